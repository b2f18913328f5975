"""Depth visuals: colour-mapped depth, error maps, RGB | GT | prediction | error panels, PNG output.

Conventions: every function takes numpy arrays or torch tensors (any device) and returns uint8
numpy arrays in HWC RGB order unless stated. Invalid pixels (mask False, GT <= 0, non-finite) are
black. GT and prediction of a panel share one colour range (taken from the GT), so colours are
comparable; the error map is per-pixel AbsRel ``|pred - gt| / gt`` on a fixed scale [0, error_vmax].
Colour maps come from ``matplotlib.colormaps`` (no pyplot, no backend needed).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..metrics import depth_and_mask, to_numpy

__all__ = ["depth_range", "colorize_depth", "error_map", "depth_panel", "views_grid", "save_png", "with_colorbar"]

_PERCENTILES = (2.0, 98.0)


def depth_range(depth, valid=None, percentiles: tuple[float, float] = _PERCENTILES) -> tuple[float, float]:
    """Robust (vmin, vmax) of the valid, positive, finite values of ``depth`` (any shape).

    Uses the given percentiles; returns (0, 1) if nothing is valid and widens a zero-width range.
    """
    d, m = depth_and_mask(depth, valid)
    if not m.any():
        return 0.0, 1.0
    lo, hi = np.percentile(d[m], percentiles)
    if hi <= lo:
        hi = lo + max(abs(lo) * 1e-3, 1e-6)
    return float(lo), float(hi)


def colorize_depth(
    depth, valid=None, vmin: float | None = None, vmax: float | None = None, cmap: str = "turbo"
) -> np.ndarray:
    """(H, W) depth -> (H, W, 3) uint8 RGB; values mapped linearly from [vmin, vmax] (clipped).

    ``valid``: optional (H, W) bool; invalid, non-positive and non-finite pixels are black. A missing
    vmin/vmax is taken from :func:`depth_range` of this depth. Near = low end of the colour map.
    """
    d, m = depth_and_mask(depth, valid)
    if d.ndim != 2:
        raise ValueError(f"colorize_depth expects (H, W) depth, got shape {d.shape}")
    if vmin is None or vmax is None:
        lo, hi = depth_range(d, m)
        vmin = lo if vmin is None else vmin
        vmax = hi if vmax is None else vmax
    t = (np.where(m, d, vmin) - vmin) / max(vmax - vmin, 1e-12)
    return _apply_cmap(np.clip(t, 0.0, 1.0), m, cmap)


def error_map(pred, gt, valid=None, vmax: float = 0.2, cmap: str = "magma") -> np.ndarray:
    """(H, W) per-pixel AbsRel ``|pred - gt| / gt`` -> (H, W, 3) uint8 RGB on the scale [0, vmax].

    Pixels that are invalid (mask False, GT <= 0 or non-finite) are black; a non-finite prediction
    shows as the maximum error.
    """
    g, m = depth_and_mask(gt, valid)
    p = to_numpy(pred).astype(np.float64)
    if p.shape != g.shape or g.ndim != 2:
        raise ValueError(f"error_map expects pred and gt of one (H, W) shape, got {p.shape} and {g.shape}")
    with np.errstate(invalid="ignore", divide="ignore"):
        err = np.abs(p - g) / np.where(m, g, 1.0)
    err = np.where(np.isfinite(err), err, vmax)
    return _apply_cmap(np.clip(err / vmax, 0.0, 1.0), m, cmap)


def depth_panel(
    image,
    gt,
    pred,
    valid=None,
    *,
    vmin: float | None = None,
    vmax: float | None = None,
    cmap: str = "turbo",
    error_vmax: float = 0.2,
) -> np.ndarray:
    """One view as ``RGB | GT | prediction | AbsRel error``: uint8 (H, 4*W, 3).

    Args:
        image: (H, W, 3) or (3, H, W) RGB, float in [0, 1] or uint8.
        gt, pred: (H, W) depth in one unit; valid: optional (H, W) bool.
        vmin, vmax: shared colour range of GT and prediction; default :func:`depth_range` of the
            valid GT (of the prediction if no GT pixel is valid).
        cmap: depth colour map; error_vmax: AbsRel shown at full error colour.
    """
    rgb = _to_rgb_uint8(image)
    g, m = depth_and_mask(gt, valid)
    p = to_numpy(pred).astype(np.float64)
    if not (rgb.shape[:2] == g.shape == p.shape):
        raise ValueError(f"image {rgb.shape[:2]}, gt {g.shape} and pred {p.shape} must share (H, W)")
    if vmin is None or vmax is None:
        lo, hi = depth_range(g, m) if m.any() else depth_range(p)
        vmin = lo if vmin is None else vmin
        vmax = hi if vmax is None else vmax
    return np.concatenate(
        [
            rgb,
            colorize_depth(g, m, vmin, vmax, cmap),
            colorize_depth(p, None, vmin, vmax, cmap),
            error_map(p, g, m, error_vmax),
        ],
        axis=1,
    )


def views_grid(
    images,
    gt,
    pred,
    valid=None,
    *,
    max_views: int | None = None,
    channels_first: bool = False,
    cmap: str = "turbo",
    error_vmax: float = 0.2,
) -> np.ndarray:
    """Panels of several views of one sample stacked vertically (one row per view).

    Args:
        images: (S, H, W, 3) or (S, 3, H, W) RGB, float in [0, 1] or uint8.
        gt, pred: (S, H, W) depth; valid: optional (S, H, W) bool.
        max_views: show only the first ``max_views`` views.
        channels_first: False -> uint8 (S*H, 4*W, 3) HWC (PNG, ``log_images``/NHWC after adding a
            batch axis); True -> uint8 (3, S*H, 4*W) CHW (TensorBoard ``add_image`` default).

    GT and prediction of *all* views share one colour range (robust range of the valid GT of the
    sample), so scale disagreements between views are visible.
    """
    g, m = depth_and_mask(gt, valid)
    if g.ndim != 3:
        raise ValueError(f"views_grid expects (S, H, W) depth, got shape {g.shape}")
    p = to_numpy(pred)
    n = g.shape[0] if max_views is None else min(max_views, g.shape[0])
    vmin, vmax = depth_range(g[:n], m[:n])
    rows = [
        depth_panel(images[i], g[i], p[i], m[i], vmin=vmin, vmax=vmax, cmap=cmap, error_vmax=error_vmax)
        for i in range(n)
    ]
    grid = np.concatenate(rows, axis=0)
    return np.ascontiguousarray(grid.transpose(2, 0, 1)) if channels_first else grid


def with_colorbar(rgb, vmin: float, vmax: float, cmap: str = "turbo", label: str = "", ticks: int = 5) -> np.ndarray:
    """Append a vertical colour bar to a colour-mapped (H, W, 3) uint8 image: a strip of ``cmap``
    from vmin (top) to vmax (bottom) with ``ticks`` labelled values and an optional unit ``label``.
    Returns (H, W + bar width, 3) uint8 (white background)."""
    import cv2

    img = _to_rgb_uint8(rgb)
    h = img.shape[0]
    strip_w, text_w = max(8, h // 24), 70
    t = np.linspace(0.0, 1.0, h)[:, None].repeat(strip_w, axis=1)
    strip = _apply_cmap(t, np.ones_like(t, bool), cmap)
    panel = np.full((h, strip_w + text_w, 3), 255, np.uint8)
    panel[:, :strip_w] = strip
    font_scale = max(0.3, min(0.5, h / 600))
    for k in range(ticks):
        y = int(round(k * (h - 1) / max(ticks - 1, 1)))
        value = vmin + (vmax - vmin) * k / max(ticks - 1, 1)
        text = f"{value:.3g}" + (f" {label}" if label and k == ticks - 1 else "")
        baseline = min(max(y + 4, 10), h - 2)
        cv2.putText(panel, text, (strip_w + 3, baseline), cv2.FONT_HERSHEY_SIMPLEX, font_scale, (0, 0, 0), 1,
                    cv2.LINE_AA)
    gap = np.full((h, 4, 3), 255, np.uint8)
    return np.concatenate([img, gap, panel], axis=1)


def save_png(path, array) -> Path:
    """Write a uint8/uint16 (H, W) or (H, W, 3) RGB array as PNG, atomically (temp file, then rename).

    Parent folders are created. Returns the path. Read back with ``cv2.imread`` (BGR) or any
    PNG reader (RGB).
    """
    import cv2

    a = to_numpy(array)
    if a.dtype not in (np.uint8, np.uint16) or not (a.ndim == 2 or (a.ndim == 3 and a.shape[2] == 3)):
        raise ValueError(f"save_png needs uint8/uint16 (H, W) or (H, W, 3) RGB, got {a.dtype} {a.shape} "
                         "(use colorize_depth or depth_panel first; CHW arrays need .transpose(1, 2, 0))")
    ok, encoded = cv2.imencode(".png", a[..., ::-1] if a.ndim == 3 else a)
    if not ok:
        raise RuntimeError(f"OpenCV could not encode a PNG of shape {a.shape}")
    from ..files import atomic_write_bytes

    return atomic_write_bytes(path, encoded.tobytes())


# ----------------------------------------------------------------------------------------------
# internals


def _apply_cmap(t: np.ndarray, mask: np.ndarray, cmap: str) -> np.ndarray:
    import matplotlib

    rgb = matplotlib.colormaps[cmap](t, bytes=True)[..., :3]
    return np.where(mask[..., None], rgb, 0).astype(np.uint8)


def _to_rgb_uint8(image) -> np.ndarray:
    a = to_numpy(image)
    if a.ndim == 3 and a.shape[0] == 3 and a.shape[-1] != 3:
        a = a.transpose(1, 2, 0)
    if a.ndim != 3 or a.shape[-1] != 3:
        raise ValueError(f"image must be (H, W, 3) or (3, H, W) RGB, got shape {a.shape}")
    if a.dtype == np.uint8:
        return np.ascontiguousarray(a)
    return (np.clip(a.astype(np.float64), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
