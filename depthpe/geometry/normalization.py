"""Scene normalization: view 0 becomes the identity, translations and depth are divided by the mean
distance of the other camera centres to it (docs/conventions.md, "Scene normalization").

w2c: (..., S, 3|4, 4) OpenCV world-to-camera, depth: (..., S, H, W) z-depth (0 = invalid).
"""

from __future__ import annotations

import torch

from .cameras import camera_centers, invert_w2c, to_4x4


class DegenerateSceneError(ValueError):
    """Raised when a scene has no defined scale (camera centres of views 1..S-1 at the reference)."""


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
