"""The one inference path: input checks and ``predict_depth``.

``predict_depth(model, images, K, w2c)`` normalizes a posed scene (``depthpe.geometry.normalize_scene``),
checks the inputs where they enter, runs the model without gradients (optionally under bfloat16
autocast) and scales depth back to the caller's unit. ``DepthModel.predict``, ``depthpe predict``
(``depthpe.prediction.api``) and evaluation (``depthpe.evaluation.loop``) all go through it, so they give
bit-identical depth for the same views.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn as nn

from .. import geometry
from ..config.choices import DTYPES

__all__ = ["check_input_shapes", "check_inputs", "check_model_inputs", "predict_depth"]


def check_input_shapes(images: torch.Tensor, K: torch.Tensor, w2c: torch.Tensor, patch_size: int) -> None:
    """Check types, dtypes and shapes of model inputs (static: reads no tensor values, so
    ``DepthModel.forward`` runs it without a host-device sync); raise ``TypeError`` / ``ValueError``.

    images: (B, S, 3, H, W) float, H and W multiples of ``patch_size``; K: (B, S, 3, 3);
    w2c: (B, S, 3, 4) or (B, S, 4, 4).
    """
    for name, t in (("images", images), ("K", K), ("w2c", w2c)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if images.ndim != 5 or images.shape[2] != 3:
        raise ValueError(
            f"images must have shape (B, S, 3, H, W), got {tuple(images.shape)}; "
            "add the batch/view dimensions and put channels first"
        )
    if not images.is_floating_point():
        raise ValueError(
            f"images must be float RGB in [0, 1], got dtype {images.dtype}; use images.float() / 255"
        )
    B, S, _, H, W = images.shape
    if H % patch_size or W % patch_size or H == 0 or W == 0:
        raise ValueError(
            f"image size {H}x{W} (HxW) is not a multiple of the patch size {patch_size}; "
            f"resize or crop to e.g. {max(1, round(H / patch_size)) * patch_size}x"
            f"{max(1, round(W / patch_size)) * patch_size}"
        )
    if K.shape != (B, S, 3, 3):
        raise ValueError(
            f"K must have shape (B, S, 3, 3) = {(B, S, 3, 3)} to match images, got {tuple(K.shape)}"
        )
    if w2c.ndim != 4 or w2c.shape[:2] != (B, S) or w2c.shape[-1] != 4 or w2c.shape[-2] not in (3, 4):
        raise ValueError(
            f"w2c must have shape (B, S, 3, 4) or (B, S, 4, 4) with (B, S) = {(B, S)} to match "
            f"images, got {tuple(w2c.shape)}"
        )


def check_inputs(images: torch.Tensor, K: torch.Tensor, w2c: torch.Tensor, patch_size: int) -> None:
    """Validate model inputs, shapes and values; raise ``ValueError`` saying what is wrong and how to fix it.

    images: (B, S, 3, H, W) float RGB in [0, 1], H and W multiples of ``patch_size``;
    K: (B, S, 3, 3) pixel intrinsics (finite, positive focal lengths);
    w2c: (B, S, 3, 4) or (B, S, 4, 4) OpenCV world-to-camera (finite).
    Reads the values (one host-device sync): run it where data enters (``predict_depth``,
    ``DepthModel.check_inputs``), not inside ``forward``.
    """
    check_input_shapes(images, K, w2c, patch_size)
    flags = torch.stack([
        torch.isfinite(K).all(),
        torch.isfinite(w2c).all(),
        ((K[..., 0, 0] > 0) & (K[..., 1, 1] > 0)).all(),
        torch.isfinite(images).all(),
        (images.amin() >= -1e-3) & (images.amax() <= 1 + 1e-3),
    ]).tolist()
    if not flags[0]:
        raise ValueError("K contains NaN or inf values; every view needs finite pixel intrinsics")
    if not flags[1]:
        raise ValueError("w2c contains NaN or inf values; every view needs a finite camera pose")
    if not flags[2]:
        raise ValueError("K has non-positive focal lengths (K[..., 0, 0] and K[..., 1, 1] must be > 0)")
    if not flags[3]:
        raise ValueError("images contain NaN or inf values")
    if not flags[4]:
        raise ValueError(
            f"images must be RGB in [0, 1] (got range [{float(images.amin()):.3g}, "
            f"{float(images.amax()):.3g}]); divide uint8 images by 255 and do not apply ImageNet "
            "normalization (the model does it)"
        )


def check_model_inputs(model: nn.Module, images: torch.Tensor, K: torch.Tensor, w2c: torch.Tensor) -> None:
    """``model.check_inputs(images, K, w2c)`` (``ValueError`` for NaN/inf, focal lengths, image range;
    ``forward`` checks only shapes), looking through DDP (``.module``) and ``torch.compile``
    wrappers; a module without ``check_inputs`` (e.g. a test oracle) is not checked.

    images: (B, S, 3, H, W) in [0, 1]; K: (B, S, 3, 3) pixels; w2c: (B, S, 3|4, 4) OpenCV
    world-to-camera. For the boundary where data enters: ``predict_depth``.
    """
    check = getattr(getattr(model, "module", model), "check_inputs", None)
    if callable(check):
        check(images, K, w2c)


def _autocast(device: torch.device, dtype: str):
    """bfloat16 autocast on ``device`` for ``dtype="bf16"``, nothing for "fp32"."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {list(DTYPES)}, got {dtype!r}")
    if dtype == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def _normalized_cameras(w2c: torch.Tensor, scale, scale_reference: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(w2c in the model's normalized frame (B, S, 4, 4) float64, scale (B,) float64); raises
    ``DegenerateSceneError`` with a hint when the cameras do not move and no scale is given."""
    geometry.check_rotation(w2c, name="w2c")
    try:
        w2c_n, _, s = geometry.normalize_scene(w2c.double(), scale=scale, scale_reference=scale_reference)
    except geometry.DegenerateSceneError as err:
        raise geometry.DegenerateSceneError(
            f"{err} (scale= is the length that becomes 1 in the model's normalized frame, in your units; "
            "or predict more views together)"
        ) from err
    return w2c_n, s


@torch.no_grad()
def predict_depth(model: nn.Module, images: torch.Tensor, K: torch.Tensor, w2c: torch.Tensor, *,
                  scale: float | torch.Tensor | None = None, scale_reference: str = "others",
                  dtype: str = "fp32") -> dict[str, torch.Tensor]:
    """Depth in the caller's units for posed views, with any module whose ``forward(images, K, w2c)``
    returns {"depth", "conf"} in the normalized frame (a ``DepthModel``, possibly DDP-wrapped).

    images: (B, S, 3, H, W) or (S, 3, H, W) float RGB in [0, 1]; K: (B, S, 3, 3) / (S, 3, 3) pixel
    intrinsics; w2c: (B, S, 3|4, 4) / (S, 3|4, 4) OpenCV world-to-camera in any frame and unit
    (view 0 is the reference). scale: length that becomes 1 (scalar or (B,); None = the mean camera
    distance, ``scale_reference`` "others" or "all"); dtype: "fp32" or "bf16" (autocast).
    Returns {"depth": float32, "conf", "scale": (B,) float64}, unbatched like the input; depth =
    model depth x scale, multiplied in float64. Raises ``ValueError`` (``DegenerateSceneError``) for
    unusable inputs.
    """
    unbatched = images.ndim == 4
    if unbatched:
        images, K, w2c = images[None], K[None], w2c[None]
    core = getattr(model, "module", model)  # DDP-wrapped or not
    check_input_shapes(images, K, w2c, getattr(getattr(core, "config", None), "patch_size", 1))
    w2c_n, s = _normalized_cameras(w2c, scale, scale_reference)
    param = next(model.parameters())
    images, K, w2c_n = (t.to(param.device, param.dtype) for t in (images, K, w2c_n))
    check_model_inputs(model, images, K, w2c_n)
    was_training = model.training
    model.eval()
    try:
        with _autocast(param.device, dtype):
            out = model(images, K, w2c_n)
    finally:
        model.train(was_training)
    depth = (out["depth"].double() * s.to(param.device).reshape(-1, 1, 1, 1)).float()
    result = {"depth": depth, "scale": s, **({"conf": out["conf"].float()} if "conf" in out else {})}
    return {k: v[0] for k, v in result.items()} if unbatched else result
