"""One evaluated scene: ``SceneRecord``, what the evaluation loop makes per scene and what the partial
results of ``depthpe eval`` keep, one JSON line each (``evaluation.partial``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["SceneRecord"]


@dataclass
class SceneRecord:
    """A scene's outcome. key "<dataset>/<scene>"; failure: why it could not be evaluated (None =
    evaluated); frames: the frame indices evaluated; rows: its per-image metric rows (all modes);
    loss: the training loss terms ({term: float}, with a ``loss_fn``); panel_image: its uint8 (H, W, 3)
    RGB panel in memory (never stored); panel_file, worst: the PNG names a partial evaluation keeps
    (the panel, and the images that entered the worst list with their ``panel_file``)."""

    key: str
    dataset: str
    scene: str
    failure: str | None = None
    frames: list[int] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    loss: dict | None = None
    panel_image: np.ndarray | None = None
    panel_file: str | None = None
    worst: list[dict] = field(default_factory=list)

    @property
    def stem(self) -> str:
        """"<dataset>_<scene>": the name of its panel files."""
        return f"{self.dataset}_{self.scene}"

    def to_json(self) -> dict:
        """The JSON object of one line of ``scenes.<rank>.jsonl`` (no panel image): key, dataset,
        scene, then failure, or loss (if any), frames and rows; panel_file (if any); worst."""
        doc = {"key": self.key, "dataset": self.dataset, "scene": self.scene}
        if self.failure is not None:
            doc["failure"] = self.failure
        else:
            if self.loss is not None:
                doc["loss"] = self.loss
            doc.update(frames=self.frames, rows=self.rows)
        if self.panel_file:
            doc["panel_file"] = self.panel_file
        doc["worst"] = self.worst
        return doc

    @classmethod
    def from_json(cls, doc: dict) -> "SceneRecord":
        """The record of a line written by ``to_json`` (missing optional fields take their defaults)."""
        return cls(key=doc["key"], dataset=doc["dataset"], scene=doc["scene"], failure=doc.get("failure"),
                   frames=doc.get("frames", []), rows=doc.get("rows", []), loss=doc.get("loss"),
                   panel_file=doc.get("panel_file"), worst=doc.get("worst", []))
