"""Metric rows -> the mean over the images of each scene -> the mean over the scenes of each dataset
(every scene weighs the same); sorted first, so independent of row order and process count."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Iterable

import numpy as np

from .image import METRIC_KEYS

_TAGS = ("dataset", "scene", "image", "mode")


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


def _unique_sorted(rows: Iterable[dict], on_duplicate: str) -> list[dict]:
    """The rows sorted by their (dataset, scene, image, mode) tags, each tag set once (``on_duplicate``)."""
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
    """The mean, NaN for no values."""
    return float(np.mean(values)) if values else math.nan
