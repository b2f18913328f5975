"""Perturbed copies of a scene's cameras: rotation about a random axis, a moved centre and a scaled
focal length per view (the input-camera noise of evaluation and `depthpe study camera-noise`)."""

from __future__ import annotations

import torch

from .cameras import camera_centers, to_4x4
from .normalization import mean_center_distance


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
