"""Counting the points `depthpe view` should draw from a predict folder."""

import json

import numpy as np


def expected_count(folder, conf_threshold=None, views=None) -> int:
    """Pixels with positive finite depth (and confidence >= threshold) counted from the files."""
    total = 0
    for i, entry in enumerate(json.loads((folder / "prediction.json").read_text())["frames"]):
        if views is not None and not views[i]:
            continue
        stem = entry["name"].rsplit(".", 1)[0]
        depth, conf = np.load(folder / f"{stem}_depth.npy"), np.load(folder / f"{stem}_conf.npy")
        keep = np.isfinite(depth) & (depth > 0)
        if conf_threshold is not None:
            keep &= conf >= conf_threshold
        total += int(keep.sum())
    return total
