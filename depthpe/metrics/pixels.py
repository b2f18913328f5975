"""Which pixels are evaluated: depth as float64 numpy, the mask of valid, finite, positive GT, and the
fewest pixels an image needs to be scored (``depthpe.metrics`` docstring)."""

from __future__ import annotations

import math

import numpy as np

PRED_MIN = 1e-6  # predictions at or below this count as bad; the floor of the log and ratio metrics
MIN_VALID_PIXELS = 16  # fewest evaluated pixels of a scored image, whatever its size
MIN_VALID_FRACTION = 0.01  # default fraction of an image's pixels that must be valid for it to be scored


def to_numpy(x) -> np.ndarray:
    """``x`` as a numpy array of the same shape. A torch tensor (any device) is detached and copied to
    the CPU; a floating-point one becomes float32 (bfloat16 and float16 included), other dtypes (bool,
    integers) stay. Anything else goes through ``np.asarray``."""
    if hasattr(x, "detach"):  # torch tensor
        x = x.detach().cpu()
        x = x.float() if x.is_floating_point() else x
        x = x.numpy()
    return np.asarray(x)


def depth_and_mask(depth, valid=None) -> tuple[np.ndarray, np.ndarray]:
    """(depth as float64 numpy (...), mask (...) bool = finite & depth > 0 & optional ``valid``).

    depth and valid: numpy arrays or torch tensors of one shape; raises ValueError otherwise.
    """
    d = to_numpy(depth).astype(np.float64)
    with np.errstate(invalid="ignore"):
        m = np.isfinite(d) & (d > 0)
    if valid is not None:
        v = to_numpy(valid)
        if v.shape != d.shape:
            raise ValueError(f"valid has shape {v.shape} but depth has {d.shape}")
        m &= v.astype(bool)
    return d, m


def min_valid_pixels(num_pixels: int, min_valid_fraction: float) -> int:
    """Fewest evaluated pixels an image of ``num_pixels`` pixels needs to be scored:
    ``max(MIN_VALID_PIXELS, ceil(min_valid_fraction * num_pixels))``."""
    return max(MIN_VALID_PIXELS, math.ceil(min_valid_fraction * num_pixels - 1e-9))


def scored_mask(gt, valid=None, *, min_pixels: int = MIN_VALID_PIXELS) -> np.ndarray:
    """The pixels evaluation scores: (S, H, W) bool, the evaluated pixels (``valid`` and GT finite
    and > 0, :func:`depth_and_mask`) of every image that has at least ``min_pixels`` of them; the
    images with fewer get an empty mask (their rows then have ``n_valid = 0`` and are counted as
    empty images). gt, valid: (S, H, W) numpy or torch."""
    _, m = depth_and_mask(gt, valid)
    sparse = m.reshape(m.shape[0], -1).sum(axis=1) < min_pixels
    m[sparse] = False
    return m


def evaluated_arrays(pred, gt, valid, ndim: int | None):
    """(p, g, mask): float64 pred with non-finite values -> ``PRED_MIN``, float64 gt, and the evaluated
    pixels ``valid & isfinite(gt) & gt > 0``. pred, gt, valid: one shape (numpy or torch); ``ndim``: the
    dimensions they must have (2: (H, W), 3: (S, H, W), None: any); raises ValueError otherwise."""
    p = to_numpy(pred).astype(np.float64)
    g = to_numpy(gt).astype(np.float64)
    if p.shape != g.shape:
        raise ValueError(f"pred has shape {p.shape} but gt has {g.shape}; evaluate at one resolution "
                         "(nearest-neighbour resize the prediction to the GT, never resample GT bilinearly)")
    if ndim is not None and p.ndim != ndim:
        raise ValueError(f"expected {ndim}-d arrays ({'(H, W)' if ndim == 2 else '(S, H, W)'}), got shape {p.shape}")
    _, m = depth_and_mask(g, valid)
    p = np.where(np.isfinite(p), p, PRED_MIN)
    return p, g, m
