"""The metrics of one image or pooled pixels: AbsRel, delta thresholds, tau 1.03, RMSE, log RMSE, bad
predictions, and the median-ratio scale (definitions in the ``depthpe.metrics`` docstring)."""

from __future__ import annotations

import math

import numpy as np

from .pixels import PRED_MIN, evaluated_arrays

METRIC_KEYS = ("abs_rel", "delta1", "delta2", "delta3", "tau103", "rmse", "log_rmse", "bad_pred")
_LOG_125 = math.log(1.25)
_LOG_103 = math.log(1.03)


def image_metrics(pred, gt, valid=None) -> dict[str, float]:
    """Metrics of one image (definitions in the module docstring).

    Args:
        pred: (H, W) predicted depth (numpy or torch, any float dtype, any device).
        gt: (H, W) GT depth in the same unit; pixels with gt <= 0 or non-finite are never evaluated.
        valid: optional (H, W) bool mask of pixels to evaluate (AND-ed with the GT rule).

    Returns:
        dict with the float values of ``METRIC_KEYS`` plus ``n_valid`` (int, evaluated pixels).
    """
    p, g, m = evaluated_arrays(pred, gt, valid, ndim=2)
    return pixel_metrics(p[m], g[m])


def scene_scale(pred, gt, valid=None) -> float:
    """Median-ratio scale ``median(gt) / median(max(pred, PRED_MIN))`` over all evaluated pixels.

    Shapes: any, all equal ((S, H, W) for a scene, (H, W) for an image). NaN if nothing is valid.
    """
    p, g, m = evaluated_arrays(pred, gt, valid, ndim=None)
    return median_ratio(p[m], g[m])


def median_ratio(p: np.ndarray, g: np.ndarray) -> float:
    """``median(g) / max(median(p), PRED_MIN)`` of 1-d arrays of evaluated pixels; NaN if there is none."""
    if g.size == 0:
        return math.nan
    return float(np.median(g) / max(float(np.median(p)), PRED_MIN))


def pixel_metrics(p: np.ndarray, g: np.ndarray) -> dict[str, float]:
    """The ``METRIC_KEYS`` values and ``n_valid`` over 1-d arrays of evaluated pixels (p already finite;
    definitions in the ``depthpe.metrics`` docstring); NaN metrics and ``n_valid = 0`` if there is none."""
    n = int(g.size)
    if n == 0:
        return {**{k: math.nan for k in METRIC_KEYS}, "n_valid": 0}
    diff = p - g
    # max(p'/g, g/p') < t  <=>  |log p' - log g| < log t (one log instead of two divisions)
    log_err = np.abs(np.log(np.maximum(p, PRED_MIN) / g))
    return {
        "abs_rel": float(np.mean(np.abs(diff) / g)),
        "delta1": float(np.mean(log_err < _LOG_125)),
        "delta2": float(np.mean(log_err < 2 * _LOG_125)),
        "delta3": float(np.mean(log_err < 3 * _LOG_125)),
        "tau103": float(np.mean(log_err < _LOG_103)),
        "rmse": float(np.sqrt(np.mean(diff * diff))),
        "log_rmse": float(np.sqrt(np.mean(log_err * log_err))),
        "bad_pred": float(np.mean(p <= PRED_MIN)),
        "n_valid": n,
    }
