"""RMVD's uncertainty metric: sparsification curves and AUSE, as pure numpy functions.

A sparsification curve removes the pixels with GT one by one, the most uncertain first, and
follows the AbsRel of the pixels left, divided by the AbsRel of all of them. The **oracle** curve
removes the pixels by their true error (largest first), the best any ranking can do. **AUSE** (area
under the sparsification error) is the area between the model's curve and the oracle's: 0 for a
ranking as good as the oracle's, larger for worse ones (unitless: the curves are ratios).

As the RMVD benchmark defines it (its ``sparsification`` and ``_compute_uncertainty_metrics``):
with n pixels with GT, the curve is sampled after removing ``k_i = floor(n * i / 100)`` pixels for
i = 0..99 (each distinct k once, at x = k / n), linearly interpolated onto x = 0, 0.01, ..., 0.99
(held constant past the last sample), and AUSE = sum over those 100 points of (model - oracle) /
100. The prediction is the one scored (resized to the GT, median-aligned where the setting says,
clipped: ``metrics.prepare_prediction``). depthpe models give a confidence (larger = more certain),
so the model's ranking removes the lowest confidence first. Ties are broken by pixel order (row-major,
the earlier pixel removed first). A curve with fewer than two samples, or an AbsRel of 0 over all
pixels (nothing to remove), gives NaN.
"""

from __future__ import annotations

import numpy as np

from .metrics import SETTINGS, prepare_prediction, resize_nearest

__all__ = ["CURVE_POINTS", "sparsification_curve", "ause", "keyview_ause"]

CURVE_POINTS = np.arange(100) / 100.0  # x = share of the pixels removed: 0, 0.01, ..., 0.99


def sparsification_curve(errors: np.ndarray, removal_order: np.ndarray) -> np.ndarray:
    """The curve (100,) at ``CURVE_POINTS``: mean of ``errors`` (n,) over the pixels left after
    removing the first k of ``removal_order`` (a permutation of range(n)), over the mean of all,
    sampled at k = floor(n * i / 100) and interpolated (module docstring). NaN-filled when n < 2
    or the mean of all errors is 0."""
    errors = np.asarray(errors, dtype=np.float64)
    n = errors.size
    base = errors.mean() if n else 0.0
    if n < 2 or not base > 0:
        return np.full(CURVE_POINTS.shape, np.nan)
    removed_last = errors[np.asarray(removal_order)[::-1]]  # the pixels kept longest first
    tail_sums = np.cumsum(removed_last)[::-1]  # tail_sums[k] = sum of the errors left after removing k
    steps = np.unique((n * np.arange(100)) // 100)
    values = tail_sums[steps] / (n - steps) / base
    return np.interp(CURVE_POINTS, steps / n, values)


def ause(errors: np.ndarray, confidence: np.ndarray) -> float:
    """AUSE of the ranking by ``confidence`` (n,) (lowest removed first) of the per-pixel relative
    errors ``errors`` (n,) against the oracle ranking (largest error first): sum of the difference
    of the two ``sparsification_curve`` over 100. NaN when either curve is undefined."""
    errors = np.asarray(errors, dtype=np.float64)
    by_confidence = np.argsort(np.asarray(confidence, dtype=np.float64), kind="stable")
    by_error = np.argsort(-errors, kind="stable")
    area = float(np.sum(sparsification_curve(errors, by_confidence) - sparsification_curve(errors, by_error)) / 100)
    return area if np.isfinite(area) else float("nan")


def keyview_ause(pred: np.ndarray, confidence: np.ndarray, gt: np.ndarray, setting: str) -> float:
    """AUSE of one keyview: pred (h, w) metres and its confidence (h', w') (larger = more certain)
    are resized to gt's (H, W) by nearest neighbour; pred is aligned and clipped as it is scored in
    ``setting`` (``metrics.prepare_prediction``); the errors are |pred - gt| / gt on gt > 0."""
    depth, _ = prepare_prediction(pred, gt, SETTINGS[setting])
    conf = resize_nearest(np.asarray(confidence, dtype=np.float64), gt.shape)
    mask = gt > 0
    return ause(np.abs(depth[mask] - gt[mask]) / gt[mask], conf[mask])
