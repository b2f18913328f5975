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

from dataclasses import dataclass
from typing import Sequence

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
    "PatchMatches",
    "patch_depths",
    "patch_matches",
    "patch_rows_cols",
    "window_masks",
    "cyclic_pairs",
    "query_patches",
    "pair_targets",
    "pair_blocks",
    "match_hits",
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
            "Use views with camera motion (a pure rotation gives depth no scale).")


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


# ---- True patch matches between views (the correspondence probe, loss and benchmark) ----
# True cross-view correspondences of patches, from ground-truth depth and cameras (pure maths).
# 
# A query patch p = (row, col) of view i stands for one 3D point: its centre pixel
# ``u = (col + 0.5) W/w - 0.5``, ``v = (row + 0.5) H/h - 0.5`` (OpenCV, pixel centres at integers, the
# convention of URoPE's key lifting) lifted to the median of the valid GT depths inside the patch.
# That point is moved into every other view j and projected; the match is usable (``ok``) when
# 
# * at least ``min_valid`` of the query patch's pixels have valid depth,
# * the point is in front of camera j (z > 0) and projects inside image j,
# * it is not occluded: the GT depth of view j at the nearest pixel is valid and agrees with the
#   point's z-depth in camera j within ``depth_tolerance`` (relative),
# * j != i.
# 
# The target is the patch of view j that contains the projected pixel. ``window_masks`` turns targets
# into the key patches within ``radius`` patches (Chebyshev distance) of them. Depths are in whatever
# unit depth and w2c share (the probe passes the normalized scene unit).
# 
# For a loss or an accuracy over chosen (query view i, key view j) pairs, ``pair_targets`` flattens the
# matches to one key patch index per query (-1 = no usable match), ``pair_blocks`` cuts the same
# (query patch, key patch) blocks out of a full (B, heads, N, N) attention matrix, and ``match_hits``
# says which queries' best-scoring key patch lies within r patches of the target. Used by the probe
# (``depthpe probe attention``), the correspondence loss of training and ``depthpe bench
# correspondence`` (docs/correspondence.md).

@dataclass
class PatchMatches:
    """Correspondences of every query patch of view i in every view j, P = h*w patches per view.

    target: (B, S_i, P, S_j, 2) long (row, col) of the patch of view j holding the reprojection;
    ok: (B, S_i, P, S_j) bool (usable match, see the module docstring; False on the diagonal);
    depth: (B, S_i, P, S_j) z-depth of the point in camera j (0 where not ok); grid: (h, w).
    """

    target: torch.Tensor
    ok: torch.Tensor
    depth: torch.Tensor
    grid: tuple[int, int]


def patch_rows_cols(grid: tuple[int, int], device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(P,) row and (P,) column of the patches of a view, row-major with the column fastest."""
    h, w = grid
    rows = torch.arange(h, device=device).repeat_interleave(w)
    cols = torch.arange(w, device=device).repeat(h)
    return rows, cols


def patch_depths(depth: torch.Tensor, valid: torch.Tensor, grid: tuple[int, int],
                 min_valid: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    """Median valid depth of each patch: depth (B, S, H, W), valid (B, S, H, W) bool, H and W
    multiples of the grid (h, w). Returns (B, S, h*w) float64 depths (0 where unusable) and
    (B, S, h*w) bool: at least ``min_valid`` of the patch's pixels have valid, positive depth."""
    B, S, H, W = depth.shape
    h, w = grid
    if H % h or W % w:
        raise ValueError(f"depth {H}x{W} is not a whole number of {h}x{w} patches")
    ph, pw = H // h, W // w
    tiles = depth.double().reshape(B, S, h, ph, w, pw).permute(0, 1, 2, 4, 3, 5).reshape(B, S, h * w, ph * pw)
    usable = valid.reshape(B, S, h, ph, w, pw).permute(0, 1, 2, 4, 3, 5).reshape(B, S, h * w, ph * pw)
    usable = usable & (tiles > 0) & torch.isfinite(tiles)
    median = torch.where(usable, tiles, torch.nan).nanmedian(dim=-1).values
    ok = usable.double().mean(dim=-1) >= min_valid
    return torch.where(ok, median, 0.0), ok


def patch_matches(depth: torch.Tensor, valid: torch.Tensor, K: torch.Tensor, w2c: torch.Tensor,
                  grid: tuple[int, int], *, depth_tolerance: float = 0.05, min_valid: float = 0.5) -> PatchMatches:
    """Where the 3D point of every query patch appears in every other view (module docstring).

    depth: (B, S, H, W) z-depth, valid: (B, S, H, W) bool, K: (B, S, 3, 3) pixel intrinsics,
    w2c: (B, S, 3|4, 4) OpenCV world-to-camera in depth's unit; grid: (h, w) patches per view.
    """
    B, S, H, W = depth.shape
    h, w = grid
    ph, pw = H / h, W / w
    K, w2c = K.double(), to_4x4(w2c.double())
    z_i, ok_i = patch_depths(depth, valid, grid, min_valid)
    rows, cols = patch_rows_cols(grid, depth.device)
    pix = torch.stack([(cols + 0.5) * pw - 0.5, (rows + 0.5) * ph - 0.5, torch.ones(h * w, device=depth.device)], dim=-1).double()
    rays = pix @ invert_intrinsics(K).mT  # (B, S, P, 3), z = 1
    world = transform_points(invert_w2c(w2c), rays * z_i.unsqueeze(-1))  # (B, S_i, P, 3)
    uv, z = project_points(world[:, :, None], K[:, None], w2c[:, None])  # (B, S_i, S_j, P, 2), (B, S_i, S_j, P)
    uv, z = uv.transpose(2, 3), z.transpose(2, 3)  # (B, S_i, P, S_j, ...)
    u, v = uv[..., 0], uv[..., 1]
    inside = (z > 0) & (u >= -0.5) & (u < W - 0.5) & (v >= -0.5) & (v < H - 0.5)
    x = u.round().clamp(0, W - 1).long()
    y = v.round().clamp(0, H - 1).long()
    seen, seen_ok = _depth_at(depth.double(), valid, y, x)
    consistent = seen_ok & ((z - seen).abs() <= depth_tolerance * seen)
    other = ~torch.eye(S, dtype=torch.bool, device=depth.device).view(1, S, 1, S)
    ok = ok_i[..., None] & inside & consistent & other
    target = torch.stack([((v + 0.5) / ph).floor().clamp(0, h - 1), ((u + 0.5) / pw).floor().clamp(0, w - 1)], -1)
    return PatchMatches(target=target.long(), ok=ok, depth=torch.where(ok, z, 0.0), grid=(h, w))


def _depth_at(depth: torch.Tensor, valid: torch.Tensor, y: torch.Tensor, x: torch.Tensor):
    """GT depth and validity of view j at pixel (y, x): depth, valid (B, S, H, W); y, x
    (B, S_i, P, S_j) long. Returns two (B, S_i, P, S_j) tensors."""
    B, S, H, W = depth.shape
    index = (y * W + x).permute(0, 3, 1, 2).reshape(B, S, -1)  # (B, S_j, S_i * P)
    d = depth.reshape(B, S, H * W).gather(2, index)
    m = valid.reshape(B, S, H * W).gather(2, index) & (d > 0)
    shape = (B, S, y.shape[1], y.shape[2])  # (B, S_j, S_i, P)
    return d.view(shape).permute(0, 2, 3, 1), m.view(shape).permute(0, 2, 3, 1)


def window_masks(target: torch.Tensor, ok: torch.Tensor, grid: tuple[int, int], radius: int) -> torch.Tensor:
    """(B, S_i, P, S_j, P) bool: key patch k of view j lies within ``radius`` patches (Chebyshev
    distance, clipped at the image border) of ``target`` (B, S_i, P, S_j, 2) (row, col); all False
    where ``ok`` (B, S_i, P, S_j) is False. ``radius`` 0 is the target patch alone."""
    rows, cols = patch_rows_cols(grid, target.device)
    near = ((target[..., 0, None] - rows).abs() <= radius) & ((target[..., 1, None] - cols).abs() <= radius)
    return near & ok[..., None]


def cyclic_pairs(num_views: int) -> list[tuple[int, int]]:
    """The (query view, key view) pairs (i, i + 1 mod S) for i = 0..S-1: every view queries its next
    one; for S = 2 that is both ordered pairs (0, 1), (1, 0). S views give S pairs (S >= 2)."""
    if num_views < 2:
        raise ValueError(f"correspondences need at least 2 views, got {num_views}")
    return [(i, (i + 1) % num_views) for i in range(num_views)]


def query_patches(num_patches: int, max_queries: int | None, step: int = 0) -> torch.Tensor | None:
    """The query patches of a view to use at training step ``step``: None (every patch) when
    ``max_queries`` is None or >= num_patches, else the (n,) long indices ``offset, offset + stride,
    ...`` with ``stride = ceil(num_patches / max_queries)`` and ``offset = step mod stride``, so
    that successive steps cover every patch (deterministic: no random state)."""
    if max_queries is None or max_queries >= num_patches:
        return None
    if max_queries < 1:
        raise ValueError(f"max_queries must be >= 1 or None, got {max_queries}")
    stride = -(-num_patches // max_queries)
    return torch.arange(step % stride, num_patches, stride)


def pair_targets(matches: PatchMatches, pairs: Sequence[tuple[int, int]],
                 patches: torch.Tensor | None = None) -> torch.Tensor:
    """(B, len(pairs) * n) long: for every pair (i, j), pair-major, and every query patch of view i
    (``patches`` (n,) indices, None = all P), the flat index ``row * w + col`` of its true patch in
    view j, or -1 where the match is not usable (``matches.ok``)."""
    h, w = matches.grid
    flat = matches.target[..., 0] * w + matches.target[..., 1]  # (B, S_i, P, S_j)
    flat = torch.where(matches.ok, flat, torch.full_like(flat, -1))
    blocks = [flat[:, i, :, j] for i, j in pairs]  # each (B, P)
    if patches is not None:
        blocks = [b[:, patches.to(b.device)] for b in blocks]
    return torch.cat(blocks, dim=1)


def pair_blocks(attention: torch.Tensor, grid: tuple[int, int], num_special: int,
                pairs: Sequence[tuple[int, int]], patches: torch.Tensor | None = None) -> torch.Tensor:
    """The (query patch of view i, key patch of view j) entries of a full attention matrix, pair-major:
    attention (B, heads, N, N) over N = S * (num_special + h*w) tokens (view-major, special tokens
    first) -> (B, heads, len(pairs) * n, h*w), rows in the order of ``pair_targets`` (``patches``:
    the n query patches, None = all)."""
    B, H, N, _ = attention.shape
    P = grid[0] * grid[1]
    T = num_special + P
    if N % T:
        raise ValueError(f"attention over {N} tokens is not a whole number of views of {T} tokens")
    x = attention.view(B, H, N // T, T, N // T, T)[:, :, :, num_special:, :, num_special:]  # (B, H, S, P, S, P)
    blocks = [x[:, :, i, :, j] for i, j in pairs]  # each (B, H, P, P)
    if patches is not None:
        blocks = [b[:, :, patches.to(b.device)] for b in blocks]
    return torch.cat(blocks, dim=2)


def match_hits(scores: torch.Tensor, target: torch.Tensor, grid: tuple[int, int], radius: int = 0) -> torch.Tensor:
    """(B, Q) bool: the key patch with the highest score (scores (B, Q, h*w) over the key view's
    patches, any monotone score: logits, weights) lies within ``radius`` patches (Chebyshev
    distance) of the true patch ``target`` (B, Q) (flat index, -1 = no match: always False)."""
    h, w = grid
    best = scores.argmax(dim=-1)
    t = target.clamp(min=0)
    near = ((best // w - t // w).abs() <= radius) & ((best % w - t % w).abs() <= radius)
    return near & (target >= 0)
