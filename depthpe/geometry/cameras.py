"""Cameras as pure, batched torch functions: closed-form inverses of w2c and K, normalized
intrinsics, projection and unprojection, crop/resize of K, camera centres.

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
