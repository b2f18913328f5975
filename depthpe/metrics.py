"""Depth evaluation metrics, alignment modes, baselines and aggregation (streaming-friendly).

Protocol: docs/evaluation.md. Depth is evaluated in the normalized scene unit of
docs/conventions.md (GT divided by the sample's mean camera distance, the unit the model predicts in).

Per-image metrics (:func:`image_metrics`), float64, over the evaluated pixels
``E = valid & isfinite(gt) & gt > 0``:

* ``abs_rel = mean |p - g| / g``; ``rmse = sqrt(mean (p - g)^2)``;
  ``log_rmse = sqrt(mean (log p' - log g)^2)``;
  ``delta1/2/3 = fraction with max(p'/g, g/p') < 1.25, 1.25^2, 1.25^3``;
  ``tau103`` = same ratio test with threshold 1.03 (RMVD's inlier ratio);
  ``bad_pred`` = fraction of E where the prediction is <= ``PRED_MIN`` (non-positive or non-finite).
* ``p`` is the prediction with non-finite values replaced by ``PRED_MIN``; ``p' = max(p, PRED_MIN)``
  (``PRED_MIN = 1e-6``) is used for the log and ratio metrics, so a non-positive prediction is a
  (large) outlier instead of a NaN. abs_rel and rmse use ``p`` (negative predictions are penalized
  by their real distance).
* An image with no evaluated pixel gives NaN metrics and ``n_valid = 0``; aggregation skips it.
  Evaluation scores an image only with at least ``min_valid_pixels`` evaluated pixels
  (:func:`scored_mask`: ``MIN_VALID_PIXELS`` and a fraction of the image); a sparser image is
  treated as having none, since a handful of pixels makes any alignment look perfect.

Modes (rows of :func:`scene_rows`, one row per image and mode):

* ``native``: no alignment (headline; measures scale as well).
* ``scene_aligned``: one scale per scene, ``s = median(g) / median(p')`` over all evaluated pixels
  of all views of the scene (pooled, pixel-weighted), applied to every view.
* ``image_aligned``: one scale per image, ``s_i = median(g_i) / median(p'_i)`` (RMVD "median";
  discards cross-view scale consistency).

Baselines (rows of :func:`baseline_rows`), "what learning nothing looks like":

* ``global_constant``: every pixel of every scene predicted as one value, the median normalized GT
  depth over all evaluated pixels of the evaluated set (pixel-pooled; compute it per dataset in a
  first pass with :class:`StreamingMedian`, exact up to its documented resolution).
* ``scene_constant``: every pixel predicted as the median GT depth of its own scene (pooled over
  the scene's views) - an oracle that knows each scene's scale but nothing else.

Aggregation (:func:`scene_summaries`, :func:`aggregate`): per-image rows -> mean over the images of
a scene -> mean over the scenes of a dataset (every scene weighs the same, however many views it
has). Rows are plain dicts (CSV-ready), so evaluation can stream scenes and processes can gather
rows; aggregation sorts rows first, so its result does not depend on row order or process count.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Iterable, Sequence

import numpy as np

__all__ = [
    "to_numpy",
    "PRED_MIN",
    "MIN_VALID_PIXELS",
    "MIN_VALID_FRACTION",
    "METRIC_KEYS",
    "MODES",
    "BASELINE_MODES",
    "image_metrics",
    "scene_scale",
    "scene_rows",
    "baseline_rows",
    "scene_summaries",
    "aggregate",
    "StreamingMedian",
    "depth_and_mask",
    "min_valid_pixels",
    "scored_mask",
]

PRED_MIN = 1e-6
MIN_VALID_PIXELS = 16  # fewest evaluated pixels of a scored image, whatever its size
MIN_VALID_FRACTION = 0.01  # default fraction of an image's pixels that must be valid for it to be scored
METRIC_KEYS = ("abs_rel", "delta1", "delta2", "delta3", "tau103", "rmse", "log_rmse", "bad_pred")
MODES = ("native", "scene_aligned", "image_aligned")
BASELINE_MODES = ("global_constant", "scene_constant")
_TAGS = ("dataset", "scene", "image", "mode")
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
    p, g, m = _prepare(pred, gt, valid, ndim=2)
    return _metrics(p[m], g[m])


def scene_scale(pred, gt, valid=None) -> float:
    """Median-ratio scale ``median(gt) / median(max(pred, PRED_MIN))`` over all evaluated pixels.

    Shapes: any, all equal ((S, H, W) for a scene, (H, W) for an image). NaN if nothing is valid.
    """
    p, g, m = _prepare(pred, gt, valid, ndim=None)
    return _median_ratio(p[m], g[m])


def scene_rows(
    pred, gt, valid=None, *, dataset: str = "", scene: str = "", modes: Sequence[str] = MODES
) -> list[dict]:
    """Per-image metric rows of one scene for the requested alignment modes.

    Args:
        pred, gt: (S, H, W) predicted and GT depth of the scene's S views, normalized unit.
        valid: optional (S, H, W) bool (AND-ed with gt > 0 and finite).
        dataset, scene: tags copied into every row.
        modes: subset of ``MODES``.

    Returns:
        list of dicts, mode-major then image order, each with ``dataset, scene, image`` (view index),
        ``mode``, ``scale`` (the factor applied to the prediction; 1.0 for native), ``n_valid`` and
        the ``METRIC_KEYS`` values.
    """
    unknown = set(modes) - set(MODES)
    if unknown:
        raise ValueError(f"unknown modes {sorted(unknown)}; choose from {MODES}")
    p, g, m = _prepare(pred, gt, valid, ndim=3)
    s_scene = _median_ratio(p[m], g[m]) if "scene_aligned" in modes else 1.0
    rows = []
    for mode in modes:
        for i in range(p.shape[0]):
            pi, gi = p[i][m[i]], g[i][m[i]]
            if mode == "native":
                scale = 1.0
            elif mode == "scene_aligned":
                scale = s_scene
            else:
                scale = _median_ratio(pi, gi)
            row = {"dataset": dataset, "scene": scene, "image": i, "mode": mode, "scale": scale}
            row.update(_metrics(pi * scale, gi))
            rows.append(row)
    return rows


def baseline_rows(
    gt, valid=None, *, global_constant_value: float | None = None, dataset: str = "", scene: str = ""
) -> list[dict]:
    """Per-image rows of the constant-prediction baselines for one scene.

    Args:
        gt: (S, H, W) GT depth of the scene, normalized unit; valid: optional (S, H, W) bool.
        global_constant_value: the median GT over the evaluated set (see :class:`StreamingMedian`);
            if None, only the ``scene_constant`` rows are returned.
        dataset, scene: tags copied into every row.

    Returns:
        rows like :func:`scene_rows` with modes ``global_constant`` and/or ``scene_constant``;
        ``scale`` holds the constant that was predicted.
    """
    _, g, m = _prepare(gt, gt, valid, ndim=3)
    constants = {}
    if global_constant_value is not None:
        constants["global_constant"] = float(global_constant_value)
    constants["scene_constant"] = float(np.median(g[m])) if m.any() else math.nan
    rows = []
    for mode, value in constants.items():
        for i in range(g.shape[0]):
            gi = g[i][m[i]]
            row = {"dataset": dataset, "scene": scene, "image": i, "mode": mode, "scale": value}
            row.update(_metrics(np.full_like(gi, value), gi))
            rows.append(row)
    return rows


def scene_summaries(rows: Iterable[dict], *, on_duplicate: str = "error") -> list[dict]:
    """Mean over the images of each (dataset, scene, mode): one CSV-ready row per scene and mode.

    Images with ``n_valid == 0`` are skipped (counted in ``n_empty_images``). Output keys:
    ``dataset, scene, mode``, the ``METRIC_KEYS`` means, ``abs_log_scale`` (mean |log scale|; for
    scene_aligned: how far the native scale is off), ``log_scale_std`` (population std over images
    of log scale; for image_aligned: the cross-view scale-consistency diagnostic, 0 = views agree;
    for the baselines ``scale`` is the predicted constant, so these two columns describe it),
    ``n_images`` (evaluated), ``n_empty_images``, ``n_valid`` (pixels). A scene whose images are all
    empty has NaN metrics and ``n_images = 0``.

    ``on_duplicate``: "error" (default) raises if a (dataset, scene, image, mode) appears twice;
    "drop" keeps the first (e.g. scenes repeated to pad the last batch of a distributed sampler).
    """
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in _unique_sorted(rows, on_duplicate):
        groups[(row["dataset"], row["scene"], row["mode"])].append(row)
    out = []
    for (dataset, scene, mode), group in sorted(groups.items()):
        used = [r for r in group if r["n_valid"] > 0]
        summary = {"dataset": dataset, "scene": scene, "mode": mode}
        for key in METRIC_KEYS:
            summary[key] = _mean([r[key] for r in used])
        log_scales = [math.log(r["scale"]) if r["scale"] > 0 else math.nan for r in used]
        summary["abs_log_scale"] = _mean([abs(v) for v in log_scales])
        summary["log_scale_std"] = float(np.std(log_scales)) if used else math.nan
        summary["n_images"] = len(used)
        summary["n_empty_images"] = len(group) - len(used)
        summary["n_valid"] = int(sum(r["n_valid"] for r in group))
        out.append(summary)
    return out


def aggregate(rows: Iterable[dict], *, on_duplicate: str = "error") -> dict[str, dict[str, dict]]:
    """Per-dataset, per-mode results: mean over scenes of the per-scene means (:func:`scene_summaries`).

    Returns ``{dataset: {mode: {METRIC_KEYS..., abs_log_scale, log_scale_std, n_scenes,
    n_empty_scenes, n_images, n_valid}}}``; scenes without any evaluated image are excluded from
    the means and counted in ``n_empty_scenes``. Independent of row order.
    """
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for s in scene_summaries(rows, on_duplicate=on_duplicate):
        groups[(s["dataset"], s["mode"])].append(s)
    result: dict[str, dict[str, dict]] = {}
    for (dataset, mode), scenes in sorted(groups.items()):
        used = [s for s in scenes if s["n_images"] > 0]
        entry = {key: _mean([s[key] for s in used]) for key in (*METRIC_KEYS, "abs_log_scale", "log_scale_std")}
        entry["n_scenes"] = len(used)
        entry["n_empty_scenes"] = len(scenes) - len(used)
        entry["n_images"] = int(sum(s["n_images"] for s in scenes))
        entry["n_valid"] = int(sum(s["n_valid"] for s in scenes))
        result.setdefault(dataset, {})[mode] = entry
    return result


class StreamingMedian:
    """Median of a stream of positive values (e.g. all valid GT depths of a dataset) in fixed memory.

    Method: a histogram of ``log(value)`` with ``num_bins`` equal bins over ``[lo, hi]`` (values
    outside are counted in the first / last bin); the median is read from the cumulative counts and
    linearly interpolated (in log space) inside the bin holding the middle rank. Error bound: the
    result lies in the same bin as the exact median, i.e. within a relative error of
    ``(hi/lo)^(1/num_bins) - 1`` (defaults: 1e-4..1e4, 2^16 bins -> < 2.9e-4), usually far less.
    Counts are integers, so the result is independent of the order of updates and histograms of
    several processes can be summed (:meth:`merge`, or all-reduce ``counts``) before :meth:`median`.
    For the exact pixel-pooled median use ``numpy.median`` on the concatenated values instead.
    """

    def __init__(self, lo: float = 1e-4, hi: float = 1e4, num_bins: int = 2**16):
        if not 0 < lo < hi:
            raise ValueError(f"need 0 < lo < hi, got lo={lo}, hi={hi}")
        self.lo, self.hi, self.num_bins = float(lo), float(hi), int(num_bins)
        self._log_lo = math.log(self.lo)
        self._width = (math.log(self.hi) - self._log_lo) / self.num_bins
        self.counts = np.zeros(self.num_bins, dtype=np.int64)

    def update(self, values, valid=None) -> None:
        """Add the values (any shape, numpy or torch) where ``valid`` and value > 0 and finite."""
        v, _, m = _prepare(values, values, valid, ndim=None)
        idx = np.floor((np.log(v[m]) - self._log_lo) / self._width).astype(np.int64)
        self.counts += np.bincount(np.clip(idx, 0, self.num_bins - 1), minlength=self.num_bins)

    def merge(self, other: "StreamingMedian") -> None:
        """Add another histogram with the same (lo, hi, num_bins)."""
        if (other.lo, other.hi, other.num_bins) != (self.lo, self.hi, self.num_bins):
            raise ValueError("cannot merge StreamingMedian objects with different lo/hi/num_bins")
        self.counts += other.counts

    @property
    def count(self) -> int:
        """Number of values added."""
        return int(self.counts.sum())

    def median(self) -> float:
        """Approximate median (see the class docstring); NaN if no value was added."""
        n = self.count
        if n == 0:
            return math.nan
        cum = np.cumsum(self.counts)
        half = n / 2.0
        b = int(np.searchsorted(cum, half, side="left"))
        before = cum[b - 1] if b > 0 else 0
        frac = (half - before) / self.counts[b]
        return float(math.exp(self._log_lo + (b + frac) * self._width))


# ----------------------------------------------------------------------------------------------
# internals


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


def _prepare(pred, gt, valid, ndim: int | None):
    """float64 pred with non-finite -> PRED_MIN, float64 gt, evaluated mask (valid & gt finite & > 0)."""
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


def _median_ratio(p: np.ndarray, g: np.ndarray) -> float:
    if g.size == 0:
        return math.nan
    return float(np.median(g) / max(float(np.median(p)), PRED_MIN))


def _metrics(p: np.ndarray, g: np.ndarray) -> dict[str, float]:
    """Metrics over 1-d arrays of evaluated pixels (p already finite)."""
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


def _unique_sorted(rows: Iterable[dict], on_duplicate: str) -> list[dict]:
    if on_duplicate not in ("error", "drop"):
        raise ValueError(f"on_duplicate must be 'error' or 'drop', got {on_duplicate!r}")
    seen: dict[tuple, dict] = {}
    for row in rows:
        missing = [t for t in _TAGS if t not in row]
        if missing:
            raise KeyError(f"metric row lacks the tags {missing}; rows come from scene_rows/baseline_rows")
        key = tuple(row[t] for t in _TAGS)
        if key in seen:
            if on_duplicate == "error":
                raise ValueError(f"duplicate metric row {key}; pass on_duplicate='drop' if scenes were "
                                 "evaluated twice on purpose (e.g. padded distributed batches)")
            continue
        seen[key] = row
    return [seen[k] for k in sorted(seen)]


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else math.nan
