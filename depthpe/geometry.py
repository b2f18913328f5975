"""Camera geometry: pure, batched torch functions (float32 and float64 safe).

Conventions (docs/conventions.md):

* ``K``: (..., 3, 3) pixel intrinsics, OpenCV (pixel centres at integer coordinates, zero skew).
* ``w2c``: (..., 3, 4) or (..., 4, 4) OpenCV world-to-camera (x right, y down, z forward):
  ``x_cam = R @ x_world + t``.
* depth: z-depth (distance along the optical axis), 0 = invalid.

Every function works on any number of leading batch dimensions and keeps the input dtype. Inverses
are closed-form (no ``torch.linalg.inv``), so they are exact for rigid transforms and cheap.
"""

from __future__ import annotations

import torch

__all__ = [
    "DegenerateSceneError",
    "to_4x4",
    "check_rotation",
    "invert_w2c",
    "invert_intrinsics",
    "normalize_intrinsics",
    "camera_centers",
    "pixel_grid",
    "unproject_depth",
    "project_points",
    "transform_points",
    "crop_intrinsics",
    "resize_intrinsics",
    "normalize_scene",
    "mean_center_distance",
    "scale_is_degenerate",
    "SCALE_REFERENCES",
    "MIN_RELATIVE_SCALE",
    "axis_angle_rotation",
    "perturb_cameras",
]


class DegenerateSceneError(ValueError):
    """Raised when a scene has no defined scale (camera centres of views 1..S-1 at the reference)."""


def to_4x4(w2c: torch.Tensor) -> torch.Tensor:
    """(..., 3, 4) or (..., 4, 4) extrinsics -> (..., 4, 4) with bottom row [0, 0, 0, 1]."""
    _check_extrinsics_shape(w2c)
    if w2c.shape[-2] == 4:
        return w2c
    bottom = torch.zeros(*w2c.shape[:-2], 1, 4, dtype=w2c.dtype, device=w2c.device)
    bottom[..., 0, 3] = 1
    return torch.cat([w2c, bottom], dim=-2)


def _check_extrinsics_shape(w2c: torch.Tensor) -> None:
    if w2c.ndim < 2 or w2c.shape[-1] != 4 or w2c.shape[-2] not in (3, 4):
        raise ValueError(
            f"extrinsics must have shape (..., 3, 4) or (..., 4, 4), got {tuple(w2c.shape)}"
        )


def check_rotation(w2c: torch.Tensor, atol: float = 1e-3, name: str = "w2c") -> None:
    """Raise ``ValueError`` unless the 3x3 rotation blocks of ``w2c`` are orthonormal with det +1.

    w2c: (..., 3, 4) / (..., 4, 4) or bare rotations (..., 3, 3). ``atol`` is the largest allowed
    absolute deviation of R R^T from I and of det(R) from 1. Non-finite entries also raise.
    """
    if w2c.shape[-2:] == (3, 3):
        R = w2c
    else:
        _check_extrinsics_shape(w2c)
        R = w2c[..., :3, :3]
    if not torch.isfinite(w2c).all():
        raise ValueError(f"{name} contains NaN or inf values")
    R = R.double()
    eye = torch.eye(3, dtype=R.dtype, device=R.device)
    err = (R @ R.transpose(-1, -2) - eye).abs().amax(dim=(-1, -2))
    det = torch.linalg.det(R)
    bad = (err > atol) | ((det - 1).abs() > atol)
    if bad.any():
        idx = tuple(int(i) for i in torch.nonzero(bad)[0])
        raise ValueError(
            f"{name}: rotation block at index {idx} is not a rotation "
            f"(max |R R^T - I| = {float(err[idx]):.3g}, det = {float(det[idx]):.6g}, tolerance {atol}). "
            "Extrinsics must be OpenCV world-to-camera [R|t] with R orthonormal and det(R) = +1; "
            "check for camera-to-world poses, scaled rotations or left-handed axes."
        )


def invert_w2c(w2c: torch.Tensor) -> torch.Tensor:
    """Closed-form inverse of rigid transforms: [R|t] -> [R^T | -R^T t].

    w2c: (..., 3, 4) or (..., 4, 4); the result has the same shape (so world-to-camera becomes
    camera-to-world and back).
    """
    _check_extrinsics_shape(w2c)
    R = w2c[..., :3, :3]
    t = w2c[..., :3, 3:]
    Rt = R.transpose(-1, -2)
    out = torch.cat([Rt, -Rt @ t], dim=-1)
    return to_4x4(out) if w2c.shape[-2] == 4 else out


def invert_intrinsics(K: torch.Tensor) -> torch.Tensor:
    """Closed-form inverse of zero-skew intrinsics (..., 3, 3).

    [[fx,0,cx],[0,fy,cy],[0,0,1]]^-1 = [[1/fx,0,-cx/fx],[0,1/fy,-cy/fy],[0,0,1]]. Skew is ignored.
    """
    fx, fy = K[..., 0, 0], K[..., 1, 1]
    cx, cy = K[..., 0, 2], K[..., 1, 2]
    out = torch.zeros_like(K)
    out[..., 0, 0] = 1 / fx
    out[..., 1, 1] = 1 / fy
    out[..., 0, 2] = -cx / fx
    out[..., 1, 2] = -cy / fy
    out[..., 2, 2] = 1
    return out


def normalize_intrinsics(K: torch.Tensor, image_size: tuple[int, int]) -> torch.Tensor:
    """Pixel intrinsics -> PRoPE normalized intrinsics for an image of ``image_size`` = (H, W).

    ``K_bar = [[fx/W, 0, cx/W - 0.5], [0, fy/H, cy/H - 0.5], [0, 0, 1]]`` (skew dropped), which maps
    pixel coordinate u in [0, W] to u/W - 0.5 in [-0.5, 0.5]. This is the convention of the official
    PRoPE and DPPE code.
    """
    H, W = image_size
    out = torch.zeros_like(K)
    out[..., 0, 0] = K[..., 0, 0] / W
    out[..., 1, 1] = K[..., 1, 1] / H
    out[..., 0, 2] = K[..., 0, 2] / W - 0.5
    out[..., 1, 2] = K[..., 1, 2] / H - 0.5
    out[..., 2, 2] = 1
    return out


def camera_centers(w2c: torch.Tensor) -> torch.Tensor:
    """Camera centres in world coordinates, c = -R^T t. w2c: (..., 3|4, 4) -> (..., 3)."""
    _check_extrinsics_shape(w2c)
    R = w2c[..., :3, :3]
    t = w2c[..., :3, 3]
    return -(R.transpose(-1, -2) @ t.unsqueeze(-1)).squeeze(-1)


def pixel_grid(height: int, width: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """(H, W, 2) pixel coordinates (u, v) = (x, y) at integer pixel centres (OpenCV convention)."""
    v, u = torch.meshgrid(
        torch.arange(height, dtype=dtype, device=device),
        torch.arange(width, dtype=dtype, device=device),
        indexing="ij",
    )
    return torch.stack([u, v], dim=-1)


def transform_points(T: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """Apply rigid transforms T (..., 3|4, 4) to points (..., N, 3) -> (..., N, 3)."""
    _check_extrinsics_shape(T)
    R = T[..., :3, :3]
    t = T[..., :3, 3]
    return points @ R.transpose(-1, -2) + t.unsqueeze(-2)


def unproject_depth(
    depth: torch.Tensor, K: torch.Tensor, w2c: torch.Tensor | None = None
) -> torch.Tensor:
    """Lift a z-depth map to 3D points.

    depth: (..., H, W) z-depth; K: (..., 3, 3) pixel intrinsics; w2c: optional (..., 3|4, 4).
    Returns (..., H, W, 3): camera-frame points if ``w2c`` is None, else world points
    ``X_w = R^T (d K^-1 [u, v, 1] - t)``. Invalid (0) depth gives the camera centre; mask it yourself.
    """
    H, W = depth.shape[-2:]
    uv = pixel_grid(H, W, dtype=depth.dtype, device=depth.device)
    ones = torch.ones_like(uv[..., :1])
    pix = torch.cat([uv, ones], dim=-1)  # (H, W, 3)
    Kinv = invert_intrinsics(K.to(depth.dtype))  # (..., 3, 3)
    rays = torch.einsum("...ij,hwj->...hwi", Kinv, pix)
    pts = rays * depth.unsqueeze(-1)
    if w2c is None:
        return pts
    c2w = invert_w2c(w2c.to(depth.dtype))
    flat = pts.reshape(*pts.shape[:-3], H * W, 3)
    return transform_points(c2w, flat).reshape(pts.shape)


def project_points(
    points: torch.Tensor, K: torch.Tensor, w2c: torch.Tensor | None = None, eps: float = 1e-8
) -> tuple[torch.Tensor, torch.Tensor]:
    """Project points into a camera.

    points: (..., N, 3) world points (camera points if ``w2c`` is None); K: (..., 3, 3);
    w2c: (..., 3|4, 4). Returns ``uv`` (..., N, 2) pixel coordinates (OpenCV) and ``z`` (..., N)
    camera-frame depth. Points with ``z <= eps`` get uv computed with z clamped to eps; check ``z``.
    """
    cam = points if w2c is None else transform_points(w2c.to(points.dtype), points)
    z = cam[..., 2]
    proj = cam @ K.to(points.dtype).transpose(-1, -2)
    uv = proj[..., :2] / z.clamp(min=eps).unsqueeze(-1)
    return uv, z


def crop_intrinsics(K: torch.Tensor, left: float, top: float) -> torch.Tensor:
    """Intrinsics after cropping an image at pixel offset (left, top): cx -= left, cy -= top."""
    out = K.clone()
    out[..., 0, 2] = K[..., 0, 2] - left
    out[..., 1, 2] = K[..., 1, 2] - top
    return out


def resize_intrinsics(K: torch.Tensor, scale_x: float, scale_y: float) -> torch.Tensor:
    """Intrinsics after resizing an image by (scale_x, scale_y), OpenCV pixel-centre convention.

    fx' = sx fx, fy' = sy fy, cx' = sx (cx + 0.5) - 0.5, cy' = sy (cy + 0.5) - 0.5
    (pixel centres at integers, so a centre u maps to (u + 0.5) sx - 0.5). For a resize from width W
    to W', sx = W' / W.
    """
    out = K.clone()
    out[..., 0, 0] = K[..., 0, 0] * scale_x
    out[..., 1, 1] = K[..., 1, 1] * scale_y
    out[..., 0, 1] = K[..., 0, 1] * scale_x
    out[..., 0, 2] = scale_x * (K[..., 0, 2] + 0.5) - 0.5
    out[..., 1, 2] = scale_y * (K[..., 1, 2] + 0.5) - 0.5
    return out


SCALE_REFERENCES = ("others", "all")


def mean_center_distance(w2c: torch.Tensor, scale_reference: str = "others") -> torch.Tensor:
    """Mean distance of the camera centres to the centre of view 0, over views 1..S-1
    (``scale_reference="others"``, depthpe's default) or over all S views, the reference's own zero
    distance included (``"all"``: (S-1)/S times the former; the other reading of the DPPE paper).

    w2c: (..., S, 3|4, 4) with S >= 2 -> (...). This is the scene scale (docs/conventions.md).
    """
    if scale_reference not in SCALE_REFERENCES:
        raise ValueError(f"scale_reference must be one of {SCALE_REFERENCES}, got {scale_reference!r}")
    if w2c.shape[-3] < 2:
        raise DegenerateSceneError(
            f"scene normalization needs at least 2 views, got {w2c.shape[-3]}"
        )
    c = camera_centers(w2c)
    others = (c[..., 1:, :] - c[..., :1, :]).norm(dim=-1).mean(dim=-1)
    return others if scale_reference == "others" else others * ((w2c.shape[-3] - 1) / w2c.shape[-3])


MIN_RELATIVE_SCALE = 1e-6


def scale_is_degenerate(scale: torch.Tensor, w2c: torch.Tensor,
                        min_relative_scale: float = MIN_RELATIVE_SCALE) -> torch.Tensor:
    """Whether each scene scale is no scale at all: not finite, or at most ``min_relative_scale``
    times the largest distance of the scene's camera centres from the world origin.

    scale: (...) mean camera distance (``mean_center_distance``); w2c: (..., S, 3|4, 4) the cameras
    it was measured on. Returns a (...) bool tensor. The test is relative, so a scene gives the same
    verdict in mm, m or km: a camera spread that small is the rounding of the positions themselves
    (1e-6 is about 8 float32 rounding steps), i.e. the cameras do not move. Cameras given far from
    their world origin relative to their spread (e.g. geographic coordinates) must be re-centred.
    """
    magnitude = camera_centers(w2c).norm(dim=-1).amax(dim=-1).to(scale.dtype)
    return ~torch.isfinite(scale) | (scale <= min_relative_scale * magnitude)


def normalize_scene(
    w2c: torch.Tensor,
    depth: torch.Tensor | None = None,
    *,
    scale: torch.Tensor | float | None = None,
    min_relative_scale: float = MIN_RELATIVE_SCALE,
    scale_reference: str = "others",
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Express a multi-view sample in the normalized frame of its reference view (view 0).

    w2c: (..., S, 3|4, 4) OpenCV world-to-camera; depth: optional (..., S, H, W) z-depth (0 invalid).
    Steps (docs/conventions.md, "Scene normalization"): re-express all cameras so that view 0 is the identity
    (``w2c_i @ inv(w2c_0)``), then divide translations and depths by ``scale``, the mean distance of
    the camera centres of views 1..S-1 to the reference centre (``mean_center_distance``).

    ``scale`` may be passed explicitly (scalar or (...)) for samples whose cameras do not move;
    ``scale_reference``: which cameras the mean runs over (``mean_center_distance``).
    Returns ``(w2c_norm (..., S, 4, 4), depth_norm or None, scale (...))``; invalid depth stays 0.
    Raises ``DegenerateSceneError`` if the computed scale is not finite or at most
    ``min_relative_scale`` times the cameras' distance from the world origin
    (``scale_is_degenerate``: relative, so independent of the scene's unit). A baseline that is
    tiny against the depth of the scene is the caller's test (it needs depth; the datasets' is
    ``min_scale_ratio``).
    """
    w2c4 = to_4x4(w2c)
    ref_inv = invert_w2c(w2c4[..., :1, :, :])
    rel = w2c4 @ ref_inv  # (..., S, 4, 4); view 0 becomes identity (up to rounding)
    eye = torch.eye(4, dtype=rel.dtype, device=rel.device)
    rel = torch.cat([eye.expand_as(rel[..., :1, :, :]), rel[..., 1:, :, :]], dim=-3)
    if scale is None:
        scale_t = mean_center_distance(w2c4, scale_reference)
        degenerate = scale_is_degenerate(scale_t, w2c4, min_relative_scale)
        if degenerate.any():
            raise DegenerateSceneError(_no_scale_message(scale_t, w2c4, degenerate, min_relative_scale))
    else:
        scale_t = torch.as_tensor(scale, dtype=rel.dtype, device=rel.device)
        if not torch.isfinite(scale_t).all() or (scale_t <= 0).any():
            raise ValueError(f"scale must be positive and finite, got {scale_t}")
        scale_t = scale_t.expand(w2c4.shape[:-3]) if scale_t.ndim == 0 else scale_t
    rel = rel.clone()
    rel[..., :3, 3] = rel[..., :3, 3] / scale_t[..., None, None].to(rel.dtype)
    depth_n = None
    if depth is not None:
        s = scale_t.to(depth.dtype).reshape(*scale_t.shape, 1, 1, 1)
        depth_n = depth / s
    return rel, depth_n, scale_t


def _no_scale_message(scale: torch.Tensor, w2c: torch.Tensor, degenerate: torch.Tensor,
                      min_relative_scale: float) -> str:
    """The one-line ``DegenerateSceneError`` text for the first degenerate scene of a batch."""
    idx = tuple(int(i) for i in torch.nonzero(degenerate)[0]) if scale.ndim else ()
    magnitude = float(camera_centers(w2c[idx]).norm(dim=-1).amax())
    return ("the camera centres of views 1..S-1 coincide with the reference camera "
            f"(mean distance {float(scale[idx]):.3g}, at most {min_relative_scale:g} times the cameras' "
            f"largest distance {magnitude:.3g} from the world origin), so the scene has no scale. "
            "Use views with camera motion, or pass scale= explicitly.")


def axis_angle_rotation(axis: torch.Tensor, angle_rad: float | torch.Tensor) -> torch.Tensor:
    """Rotation matrices (..., 3, 3) of ``angle_rad`` radians about the unit vectors ``axis`` (..., 3)
    (Rodrigues' formula; right-handed: positive angles turn counter-clockwise seen from the tip)."""
    angle = torch.as_tensor(angle_rad, dtype=axis.dtype, device=axis.device)
    x, y, z = axis.unbind(-1)
    zero = torch.zeros_like(x)
    cross = torch.stack([zero, -z, y, z, zero, -x, -y, x, zero], dim=-1).reshape(*axis.shape[:-1], 3, 3)
    eye = torch.eye(3, dtype=axis.dtype, device=axis.device).expand_as(cross)
    angle = angle[..., None, None] if angle.ndim else angle
    return eye + torch.sin(angle) * cross + (1 - torch.cos(angle)) * (cross @ cross)


def perturb_cameras(K: torch.Tensor, w2c: torch.Tensor, *, rotation_deg: float = 0.0, translation: float = 0.0,
                    focal: float = 0.0, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Noisy copies of a scene's cameras (``depthpe.config.camera_noise.CameraNoise`` levels).

    K: (..., S, 3, 3) pixel intrinsics; w2c: (..., S, 3|4, 4) OpenCV world-to-camera, view 0 the
    reference. Every view but view 0 is rotated by exactly ``rotation_deg`` degrees about a uniformly
    random axis through its centre (``R' = dR @ R``) and has its centre moved by ``translation`` x
    the mean baseline (``mean_center_distance``, "others") in a uniformly random direction; every
    view's fx and fy are multiplied by ``1 + s * focal`` with a random sign s (principal point kept).
    The random axes, directions and signs are drawn from ``generator`` (CPU) in one fixed order
    whatever the levels, so one seed moves the cameras the same way at every level. All levels 0:
    returns ``K`` and ``w2c`` themselves. Returns (K', w2c') in the input dtypes and shapes."""
    if rotation_deg == 0 and translation == 0 and focal == 0:
        return K, w2c
    lead = w2c.shape[:-2]
    draws = torch.randn((*lead, 7), generator=generator, dtype=torch.float64)
    axis = torch.nn.functional.normalize(draws[..., 0:3], dim=-1)
    direction = torch.nn.functional.normalize(draws[..., 3:6], dim=-1)
    sign = torch.where(draws[..., 6] >= 0, 1.0, -1.0).to(torch.float64)
    w = to_4x4(w2c.double().cpu())
    moved = torch.ones(lead, dtype=torch.float64)
    moved[..., 0] = 0.0  # the reference keeps its pose
    turn = axis_angle_rotation(axis, torch.deg2rad(torch.tensor(float(rotation_deg), dtype=torch.float64)) * moved)
    baseline = mean_center_distance(w) if w.shape[-3] >= 2 else torch.zeros(lead[:-1], dtype=torch.float64)
    centers = camera_centers(w) + (translation * baseline)[..., None, None] * moved[..., None] * direction
    R = turn @ w[..., :3, :3]
    out = w.clone()
    out[..., :3, :3] = R
    out[..., :3, 3] = -(R @ centers[..., None])[..., 0]
    out[..., 0, :, :] = w[..., 0, :, :]  # exactly, not up to the rounding of -R c
    K2 = K.double().cpu().clone()
    K2[..., 0, 0] *= 1 + sign * focal
    K2[..., 1, 1] *= 1 + sign * focal
    w2c_out = out[..., : w2c.shape[-2], :]
    return K2.to(K.dtype).to(K.device), w2c_out.to(w2c.dtype).to(w2c.device)
