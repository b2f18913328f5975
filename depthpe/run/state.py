"""``TrainState``: everything about a run's progress that a checkpoint restores besides Accelerate's
state (model, optimizer, RNG): the optimizer step, data and numerics counters, the unusable scene
files seen so far, and the smoothed metrics. Saved as ``trainer_state.json``.

Counters (summed over processes): ``skipped_files`` = sample draws that hit an unusable scene file
(each redrawn from another scene); ``bad_files`` = distinct such files; ``redraws`` = draws rejected
as degenerate or with too little valid depth; ``nonfinite_steps`` = optimizer steps skipped because
the loss or the gradients were not finite; ``images`` = images trained on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["Smoother", "TrainState", "COUNTERS"]

COUNTERS = ("nonfinite_steps", "redraws", "skipped_files", "bad_files", "images")


class Smoother:
    """Bias-corrected exponential moving averages of logged scalars (decay ``beta``); non-finite
    values are ignored."""

    def __init__(self, beta: float):
        self.beta, self.values, self.weights = beta, {}, {}

    def update(self, scalars: dict[str, float]) -> dict[str, float]:
        """Add one value per name; returns the current averages."""
        for k, v in scalars.items():
            if not math.isfinite(v):
                continue
            self.values[k] = self.beta * self.values.get(k, 0.0) + (1 - self.beta) * v
            self.weights[k] = self.beta * self.weights.get(k, 0.0) + (1 - self.beta)
        return self.get()

    def get(self) -> dict[str, float]:
        """The current averages, by name."""
        return {k: v / self.weights[k] for k, v in self.values.items()}

    def state(self) -> dict:
        return {"values": dict(self.values), "weights": dict(self.weights)}

    def load(self, state: dict) -> None:
        self.values, self.weights = dict(state["values"]), dict(state["weights"])


@dataclass
class TrainState:
    """A run's progress (the same on every process). ``step`` = optimizer steps done;
    ``bad_files`` = unusable scene file -> reason; ``nonfinite_in_row`` = skipped steps in a row;
    ``world_size`` = processes of the run that wrote it; ``run_id`` = the run's id
    (``depthpe.run.identity``; "" in checkpoints of versions before ids)."""

    smoothing: float = 0.95
    step: int = 0
    counters: dict = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    bad_files: dict = field(default_factory=dict)
    nonfinite_in_row: int = 0
    world_size: int = 1
    run_id: str = ""

    def __post_init__(self):
        self.smoother = Smoother(self.smoothing)

    def to_json(self) -> dict:
        """The ``trainer_state.json`` document."""
        return {"step": self.step, "counters": dict(self.counters), "smoother": self.smoother.state(),
                "bad_files": dict(self.bad_files), "nonfinite_in_row": self.nonfinite_in_row,
                "world_size": self.world_size, "run_id": self.run_id}

    def load_json(self, doc: dict) -> None:
        """Restore from a ``trainer_state.json`` document (keeps this run's ``world_size``, and its
        ``run_id`` when the document has none)."""
        self.step = int(doc["step"])
        self.counters.update(doc["counters"])
        self.bad_files.update(doc.get("bad_files", {}))
        self.nonfinite_in_row = int(doc.get("nonfinite_in_row", 0))
        self.smoother.load(doc["smoother"])
        self.run_id = str(doc.get("run_id") or self.run_id)
