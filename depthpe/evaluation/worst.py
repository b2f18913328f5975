"""The evaluated images with the largest native AbsRel, kept with their panels while the evaluation
runs (for report.html): a bounded list, so memory stays at k panels whatever the number of scenes.

A panel is ``depthpe.report.viz.depth_panel``: RGB | GT | prediction | AbsRel error, uint8 (H, 4W, 3).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["WorstImages"]


class WorstImages:
    """The ``k`` worst images seen so far by native AbsRel; ``items``: dicts {dataset, scene,
    image (view index), frame (index in the scene file), abs_rel, panel}, worst first."""

    def __init__(self, k: int):
        self.k = int(k)
        self.items: list[dict] = []

    def _enters(self, rank: tuple) -> bool:
        """Whether an image of this ``_rank`` enters: while fewer than k are kept, or when it ranks
        before the last kept one. Ties of AbsRel go to the first (dataset, scene, image), so the
        kept images do not depend on the order the images come in (processes, a resumed run)."""
        return self.k > 0 and (len(self.items) < self.k or rank < _rank(self.items[-1]))

    def offer(self, rows: list[dict], images, gt, pred, valid, frames) -> list[dict]:
        """Consider the images of one scene. rows: its ``scene_rows`` (only ``native`` rows are
        used); images (S, 3, H, W) float in [0, 1]; gt, pred (S, H, W); valid (S, H, W) bool;
        frames: the S frame indices. A panel is rendered only for an image that enters. Returns the
        items that entered (an image among the final k worst always entered when offered, so a
        resumed evaluation needs only these: ``add``)."""
        from ..report.viz import depth_panel

        entered = []
        for row in rows:
            value = row["abs_rel"]
            if row["mode"] != "native" or not math.isfinite(value) or not self._enters(_rank(row)):
                continue
            i = row["image"]
            panel = depth_panel(images[i], gt[i], pred[i], valid[i])
            entered.append({"dataset": row["dataset"], "scene": row["scene"], "image": int(i),
                            "frame": int(frames[i]), "abs_rel": float(value), "panel": np.asarray(panel)})
            self._insert(entered[-1])
        return entered

    def add(self, item: dict) -> None:
        """Consider an item already rendered (an ``offer`` result kept by an interrupted evaluation;
        its ``panel`` may be a placeholder that the caller fills in for the final ``items``)."""
        if self._enters(_rank(item)):
            self._insert(item)

    def _insert(self, item: dict) -> None:
        self.items.append(item)
        self.items.sort(key=_rank)
        del self.items[self.k:]

    def merge(self, others) -> "WorstImages":
        """Fold in other collectors' items (several processes); returns self."""
        for other in others:
            for item in other.items:
                self.add(item)
        return self


def _rank(item: dict) -> tuple:
    """Worst first: larger AbsRel, then dataset, scene and image in order (a total order)."""
    return (-item["abs_rel"], item["dataset"], item["scene"], int(item["image"]))
