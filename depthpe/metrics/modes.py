"""The rows of one scene: per image and alignment mode (``native``, ``scene_aligned``, ``image_aligned``),
and of the constant baselines (``global_constant``, ``scene_constant``); ``depthpe.metrics`` docstring."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .image import median_ratio, pixel_metrics
from .pixels import evaluated_arrays

MODES = ("native", "scene_aligned", "image_aligned")
BASELINE_MODES = ("global_constant", "scene_constant")


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
    p, g, m = evaluated_arrays(pred, gt, valid, ndim=3)
    s_scene = median_ratio(p[m], g[m]) if "scene_aligned" in modes else 1.0
    rows = []
    for mode in modes:
        for i in range(p.shape[0]):
            pi, gi = p[i][m[i]], g[i][m[i]]
            if mode == "native":
                scale = 1.0
            elif mode == "scene_aligned":
                scale = s_scene
            else:
                scale = median_ratio(pi, gi)
            row = {"dataset": dataset, "scene": scene, "image": i, "mode": mode, "scale": scale}
            row.update(pixel_metrics(pi * scale, gi))
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
    _, g, m = evaluated_arrays(gt, gt, valid, ndim=3)
    constants = {}
    if global_constant_value is not None:
        constants["global_constant"] = float(global_constant_value)
    constants["scene_constant"] = float(np.median(g[m])) if m.any() else math.nan
    rows = []
    for mode, value in constants.items():
        for i in range(g.shape[0]):
            gi = g[i][m[i]]
            row = {"dataset": dataset, "scene": scene, "image": i, "mode": mode, "scale": value}
            row.update(pixel_metrics(np.full_like(gi, value), gi))
            rows.append(row)
    return rows
