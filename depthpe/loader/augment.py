"""Per-view geometric augmentation (crop + resize with exact intrinsics) and colour jitter.

Geometry (OpenCV pixel-centre convention, docs/conventions.md): a crop window of the
output aspect ratio is centred on the principal point as far as the image allows (shifted to stay
inside), scaled by a random factor, cut at integer offsets, then resized to the output size.
Images use INTER_AREA when shrinking and INTER_CUBIC when enlarging; depth and validity use
INTER_NEAREST_EXACT so that only original depth values appear. K follows exactly through
``crop_intrinsics`` then ``resize_intrinsics``.

Colour jitter (VGGT's recipe: torchvision ColorJitter(0.5, 0.5, 0.5, 0.1) semantics) runs on uint8 with
OpenCV (much faster than torchvision's float HSV conversion) and draws its parameters from a numpy
Generator, never from global RNG.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import torch

from depthpe.loader.config import ColorJitterConfig
from depthpe.geometry import crop_intrinsics, resize_intrinsics

__all__ = [
    "CropBox",
    "crop_box",
    "crop_and_resize",
    "JitterParams",
    "sample_jitter",
    "apply_jitter",
    "jitter_views",
]


@dataclass(frozen=True)
class CropBox:
    """Integer crop window: columns [left, left + width), rows [top, top + height)."""

    left: int
    top: int
    width: int
    height: int


def crop_box(
    image_hw: tuple[int, int],
    principal_point: tuple[float, float],
    out_hw: tuple[int, int],
    scale: float = 1.0,
) -> CropBox:
    """Crop window of aspect ``out_h / out_w`` centred on the principal point (cx, cy) in pixels.

    The largest window of the output aspect that fits in the image is scaled by ``scale`` in (0, 1],
    centred on the principal point (window centre = (cx, cy) in OpenCV pixel coordinates), then shifted
    as little as needed to lie inside the image. Offsets and sizes are integers.
    """
    if not 0 < scale <= 1:
        raise ValueError(f"crop scale must be in (0, 1], got {scale}")
    H, W = image_hw
    out_h, out_w = out_hw
    aspect = out_h / out_w
    full_w = min(float(W), H / aspect)
    cw = min(W, max(1, int(round(full_w * scale))))
    ch = min(H, max(1, int(round(cw * aspect))))
    cx, cy = principal_point
    # the window [left - 0.5, left + cw - 0.5] has its centre at cx when left = cx + 0.5 - cw / 2
    left = int(np.clip(round(cx + 0.5 - cw / 2), 0, W - cw))
    top = int(np.clip(round(cy + 0.5 - ch / 2), 0, H - ch))
    return CropBox(left, top, cw, ch)


def crop_and_resize(
    image: np.ndarray,
    depth: np.ndarray,
    valid: np.ndarray,
    K: np.ndarray,
    box: CropBox,
    out_hw: tuple[int, int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Crop one view to ``box`` and resize it to ``out_hw`` = (H_out, W_out).

    image: (H, W, 3) uint8 RGB; depth: (H, W) float32 (0 invalid); valid: (H, W) bool; K: (3, 3)
    pixel intrinsics. Returns (image (H_out, W_out, 3) uint8, depth (H_out, W_out) float32 with only
    values of the input, valid (H_out, W_out) bool, K (3, 3) float64 for the output image):
    K' = resize(crop(K, left, top), W_out / box.width, H_out / box.height).
    """
    out_h, out_w = out_hw
    sl = (slice(box.top, box.top + box.height), slice(box.left, box.left + box.width))
    img, dep, val = image[sl], depth[sl], valid[sl]
    shrinking = out_w * out_h < box.width * box.height
    interp = cv2.INTER_AREA if shrinking else cv2.INTER_CUBIC
    img = cv2.resize(np.ascontiguousarray(img), (out_w, out_h), interpolation=interp)
    dep = cv2.resize(np.ascontiguousarray(dep), (out_w, out_h), interpolation=cv2.INTER_NEAREST_EXACT)
    val = cv2.resize(
        np.ascontiguousarray(val, dtype=np.uint8), (out_w, out_h), interpolation=cv2.INTER_NEAREST_EXACT
    ).astype(bool)
    K_t = torch.as_tensor(np.asarray(K, dtype=np.float64))
    K_t = crop_intrinsics(K_t, box.left, box.top)
    K_t = resize_intrinsics(K_t, out_w / box.width, out_h / box.height)
    return img, dep, val, K_t.numpy()


@dataclass(frozen=True)
class JitterParams:
    """One draw of colour jitter: whether to jitter, the order of the four operations
    (0 brightness, 1 contrast, 2 saturation, 3 hue), their factors, and whether to gray out."""

    apply: bool
    order: tuple[int, ...]
    brightness: float
    contrast: float
    saturation: float
    hue: float
    grayscale: bool


def sample_jitter(rng: np.random.Generator, cfg: ColorJitterConfig) -> JitterParams:
    """Draw jitter parameters: factors in [1 - x, 1 + x], hue in [-hue, hue], random op order."""

    def factor(x: float) -> float:
        return float(rng.uniform(max(0.0, 1 - x), 1 + x))

    apply = bool(rng.random() < cfg.apply_prob)
    order = tuple(int(i) for i in rng.permutation(4))
    b, c, s = factor(cfg.brightness), factor(cfg.contrast), factor(cfg.saturation)
    h = float(rng.uniform(-cfg.hue, cfg.hue))
    gray = bool(rng.random() < cfg.grayscale_prob)
    return JitterParams(apply, order, b, c, s, h, gray)


def _blend(img: np.ndarray, factor: float, other: np.ndarray | float) -> np.ndarray:
    """factor * img + (1 - factor) * other, rounded and saturated to uint8 (torchvision's _blend).
    img: (H, W, 3) uint8; other: a number or an (H, W, 3) uint8 image."""
    if np.isscalar(other):
        return cv2.addWeighted(img, factor, img, 0.0, (1 - factor) * float(other))
    return cv2.addWeighted(img, factor, other, 1 - factor, 0.0)


def _gray(img: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 RGB -> (H, W) uint8 luma (ITU-R 601, as torchvision)."""
    return cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)


def _shift_hue(img: np.ndarray, hue: float) -> np.ndarray:
    """Rotate the hue of an RGB uint8 image by ``hue`` turns (OpenCV full-range HSV, 1/256 steps)."""
    hsv = cv2.cvtColor(img, cv2.COLOR_RGB2HSV_FULL)
    shift = int(round(hue * 256)) % 256
    lut = ((np.arange(256) + shift) % 256).astype(np.uint8)
    hsv[..., 0] = cv2.LUT(hsv[..., 0], lut)
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB_FULL)


def apply_jitter(image: np.ndarray, p: JitterParams) -> np.ndarray:
    """Apply one jitter draw to an RGB uint8 image (H, W, 3); returns a new uint8 image.

    brightness: b * img; contrast: blend with the image's mean luma; saturation: blend with the
    luma image; hue: rotation in HSV; all saturated to [0, 255] (torchvision ColorJitter semantics,
    computed with OpenCV on uint8 for speed). Grayscale (if drawn) comes last.
    """
    out = np.ascontiguousarray(image)
    if p.apply:
        for i in p.order:
            if i == 0:
                out = _blend(out, p.brightness, 0.0)
            elif i == 1:
                out = _blend(out, p.contrast, float(_gray(out).mean()))
            elif i == 2:
                out = _blend(out, p.saturation, cv2.cvtColor(_gray(out), cv2.COLOR_GRAY2RGB))
            elif p.hue != 0:
                out = _shift_hue(out, p.hue)
    if p.grayscale:
        out = cv2.cvtColor(_gray(out), cv2.COLOR_GRAY2RGB)
    return out


def jitter_views(
    images: np.ndarray, rng: np.random.Generator, cfg: ColorJitterConfig
) -> tuple[np.ndarray, bool]:
    """Colour-jitter the S views of one sample, images (S, H, W, 3) uint8 RGB.

    With probability ``cfg.shared_prob`` one parameter draw is applied to every view (returns
    shared = True), otherwise each view gets its own draw. Returns (images (S, H, W, 3) uint8, shared).
    If ``cfg.enabled`` is False the images are returned unchanged (shared = True).
    """
    if not cfg.enabled:
        return images, True
    shared = bool(rng.random() < cfg.shared_prob)
    params = sample_jitter(rng, cfg) if shared else None
    out = [apply_jitter(v, params if shared else sample_jitter(rng, cfg)) for v in images]
    return np.stack(out), shared
