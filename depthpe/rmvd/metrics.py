"""RMVD's depth metrics as pure numpy functions.

Per keyview: the prediction is resized to the GT resolution by nearest neighbour, scaled by the
median ratio in the settings that allow no metric scale (``intrinsics_only``, ``single_view``),
clipped to [0.1, 100] m, then scored on the pixels with GT > 0: AbsRel = mean |p - g| / g and
the inlier ratio = share of pixels with max(p/g, g/p) < 1.03, both in percent. The benchmark
score is the mean over datasets of each dataset's mean over its samples.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SETTINGS", "CLIP_RANGE", "INLIER_THRESHOLD", "ASPECT_TOLERANCE", "aspect_mismatch", "resize_nearest", "median_ratio", "prepare_prediction",
           "abs_rel", "inlier_ratio", "score_keyview", "benchmark_mean"]

# setting -> whether the prediction is median-aligned to the GT (no metric scale without poses)
SETTINGS = {"known_poses": False, "intrinsics_only": True, "single_view": True}
CLIP_RANGE = (0.1, 100.0)  # metres
INLIER_THRESHOLD = 1.03
ASPECT_TOLERANCE = 0.01  # a depth map whose width/height differs more from the keyview's is refused


def aspect_mismatch(shape: tuple[int, int], reference: tuple[int, int]) -> float | None:
    """The relative difference of the aspect ratios (width / height) of ``shape`` and ``reference``
    (both (H, W)) when it is above ``ASPECT_TOLERANCE``, else None: a depth map of another aspect
    (a transposed or cropped array) would be stretched onto the keyview by the resize."""
    ratio = (shape[1] / shape[0]) / (reference[1] / reference[0])
    return abs(ratio - 1.0) if abs(ratio - 1.0) > ASPECT_TOLERANCE else None


def resize_nearest(depth: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """``depth`` (h, w) resized to ``shape`` (H, W) by nearest neighbour on pixel centres: output
    pixel (i, j) takes input pixel (floor((i + 0.5) h / H), floor((j + 0.5) w / W))."""
    h, w = depth.shape
    rows = np.minimum(((np.arange(shape[0]) + 0.5) * h / shape[0]).astype(np.int64), h - 1)
    cols = np.minimum(((np.arange(shape[1]) + 0.5) * w / shape[1]).astype(np.int64), w - 1)
    return depth[rows[:, None], cols[None, :]]


def median_ratio(pred: np.ndarray, gt: np.ndarray) -> float:
    """median(gt) / median(pred) over the pixels with gt > 0 (same shapes, metres); NaN when there
    is no such pixel, when median(pred) <= 0 (no positive scale aligns it: the alignment is
    undefined) or the ratio is not finite."""
    mask = gt > 0
    if not mask.any():
        return float("nan")
    denominator = float(np.median(pred[mask]))
    if not denominator > 0:
        return float("nan")
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(np.median(gt[mask]) / denominator)
    return ratio if np.isfinite(ratio) else float("nan")


def prepare_prediction(pred: np.ndarray, gt: np.ndarray, align: bool) -> tuple[np.ndarray, float]:
    """The prediction as scored: resized to ``gt``'s (H, W), times the median ratio when ``align``
    (1.0 otherwise; left unscaled when the ratio is NaN), clipped to ``CLIP_RANGE`` metres.
    Returns (depth (H, W) float64, the scale applied or NaN)."""
    depth = resize_nearest(np.asarray(pred, dtype=np.float64), gt.shape)
    scale = 1.0
    if align:
        scale = median_ratio(depth, gt)
        if np.isfinite(scale):
            depth = depth * scale
    return np.clip(depth, *CLIP_RANGE), scale


def abs_rel(pred: np.ndarray, gt: np.ndarray) -> float:
    """AbsRel in percent: 100 * mean |pred - gt| / gt over the pixels with gt > 0 (NaN if none)."""
    mask = gt > 0
    if not mask.any():
        return float("nan")
    return float(100.0 * np.mean(np.abs(pred[mask] - gt[mask]) / gt[mask]))


def inlier_ratio(pred: np.ndarray, gt: np.ndarray, threshold: float = INLIER_THRESHOLD) -> float:
    """Inliers in percent: 100 * share of the pixels with gt > 0 where max(pred/gt, gt/pred) <
    ``threshold``; a prediction <= 0 is an outlier (NaN if no pixel has gt > 0)."""
    mask = gt > 0
    if not mask.any():
        return float("nan")
    p, g = pred[mask], gt[mask]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(p > 0, np.maximum(p / g, g / p), np.inf)
    return float(100.0 * np.mean(ratio < threshold))


def score_keyview(pred: np.ndarray, gt: np.ndarray, setting: str) -> dict:
    """The metrics of one keyview: pred (h, w) and gt (H, W) in metres, ``setting`` one of
    ``SETTINGS``. Returns {"abs_rel", "inliers" (both percent), "scale" (the median ratio, 1.0
    without alignment)}. In a median-aligned setting whose alignment is undefined (``median_ratio``
    NaN: median(pred) <= 0, or no GT) every value is NaN: such a prediction is never scored."""
    depth, scale = prepare_prediction(pred, gt, SETTINGS[setting])
    if SETTINGS[setting] and not np.isfinite(scale):
        return {"abs_rel": float("nan"), "inliers": float("nan"), "scale": float("nan")}
    return {"abs_rel": abs_rel(depth, gt), "inliers": inlier_ratio(depth, gt), "scale": scale}


def benchmark_mean(per_dataset: dict[str, float]) -> float:
    """The benchmark score: the mean over datasets of their values (each already a mean over the
    dataset's samples), NaN values skipped; NaN when nothing is left."""
    values = [v for v in per_dataset.values() if np.isfinite(v)]
    return float(np.mean(values)) if values else float("nan")
