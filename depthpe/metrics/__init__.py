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

One job per module, every public name also importable from ``depthpe.metrics``: which pixels are
evaluated (``pixels``), the metrics of one image (``image``), the rows of a scene per mode and of the
baselines (``modes``), the means per scene and dataset (``aggregation``), :class:`StreamingMedian`
(``streaming``).
"""

from __future__ import annotations

from .aggregation import aggregate, scene_summaries
from .image import METRIC_KEYS, image_metrics, scene_scale
from .modes import BASELINE_MODES, MODES, baseline_rows, scene_rows
from .pixels import MIN_VALID_FRACTION, MIN_VALID_PIXELS, PRED_MIN, depth_and_mask, min_valid_pixels, scored_mask, to_numpy
from .streaming import StreamingMedian

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
