"""Helpers of the resumable-evaluation tests: a small synth dataset's size, the eval arguments, a
counter of the model's scene predictions that can fail like a crash, an interrupted run."""

from __future__ import annotations

from pathlib import Path


import depthpe.evaluation.loop as evaluation
from depthpe.eval import main

SCENES = 5
ARGS = ["--views", "3", "--image-width", "42", "--panels", "2", "--worst", "3", "--num-workers", "0", "--cpu"]
OUTPUTS = ("summary.json", "metrics_per_image.csv", "manifest.json", "summary.md", "worst.json", "report.html")


def eval_into(data, model, out, *extra) -> int:
    return main(["--model", str(model), "--data", str(data), "--out", str(out), *ARGS, *extra])


def output_files(out: Path) -> dict[str, bytes]:
    """Every output file's bytes (the PNG panels too)."""
    names = [*OUTPUTS, *(str(p.relative_to(out)) for p in sorted(out.glob("*/*.png")))]
    return {name: (out / name).read_bytes() for name in names}


class Predictions:
    """Counts the model's scenes; raises ``error`` at call number ``fail_at`` (1-based), like a crash."""

    def __init__(self, monkeypatch, fail_at: int | None = None, error=KeyboardInterrupt):
        self.calls, self.fail_at, self.error = 0, fail_at, error
        self._predict = evaluation.scene_prediction
        monkeypatch.setattr(evaluation, "scene_prediction", self)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.fail_at:
            raise self.error()
        return self._predict(*args, **kwargs)


def interrupt(data, model, out, monkeypatch, after: int) -> None:
    """An evaluation stopped (Ctrl-C) while predicting scene ``after + 1``."""
    with monkeypatch.context() as patch:
        Predictions(patch, fail_at=after + 1)
        assert eval_into(data, model, out) == 130  # Ctrl-C: one line, status 130
    assert len((out / "partial" / "scenes.0.jsonl").read_text().splitlines()) == after
