"""What validation during training keeps in the run folder, and the loss it reports.

* ``val_manifest.json``: the scenes and views of the first validation ({"seed", "views",
  "scenes": {"<source>/<scene_id>": [frames]}}, the format of evaluation manifests). Every later
  validation, and a resumed run, reads it back, so a run is validated on exactly the same views
  throughout; ``val.manifest`` makes a run use another run's file, so that runs with different
  encodings are validated on the very same views.
* ``val_history.jsonl``: one JSON line per validation and dataset, {"step", "dataset", "metrics":
  {row: {metric: value, n_scenes, n_images}}, "loss": {term: value}}; with ``val.correspondence``
  the metrics also hold the row ``correspondence`` (``depthpe.probe``: ``lift_r0``, ...). It survives checkpoint
  rotation and is what curves are drawn from; a resumed run first drops the lines of steps after
  its checkpoint (validations of an interrupted stretch that it is about to repeat).
* ``val_summary.json``: the latest validation ({"step", "summary", "max_scenes", "views"},
  ``write_val_summary``); ``depthpe push`` reads it back (``read_val_summary``) for the model card
  (``validation_card_fields``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from .schema import LossConfig, RunConfig

__all__ = ["VAL_MANIFEST", "VAL_HISTORY", "VAL_SUMMARY_NAME", "val_manifest_file", "read_val_manifest", "loss_terms_fn",
           "append_val_history", "read_val_history", "trim_val_history", "write_val_summary", "read_val_summary",
           "validation_card_fields"]

VAL_MANIFEST = "val_manifest.json"
VAL_HISTORY = "val_history.jsonl"
VAL_SUMMARY_NAME = "val_summary.json"  # training's latest validation summary, in the run folder


def val_manifest_file(cfg: RunConfig) -> Path:
    """The manifest a run validates on: ``val.manifest`` if set, else ``<output_dir>/val_manifest.json``."""
    return Path(cfg.val.manifest) if cfg.val.manifest else Path(cfg.output_dir) / VAL_MANIFEST


def read_val_manifest(cfg: RunConfig) -> dict | None:
    """{"<source>/<scene_id>": [frames]} of the run's validation manifest, or None before the first validation."""
    from ..evaluation.protocol import load_manifest

    path = val_manifest_file(cfg)
    return load_manifest(path) if path.is_file() else None


def loss_terms_fn(cfg: LossConfig) -> Callable:
    """``(pred, gt, valid, conf) -> {term: float}``: the training loss (``depthpe.run.losses.depth_loss``
    with the run's weights) of one scene, tensors (1, S, H, W) in the normalized unit."""
    from . import losses

    def terms(pred, gt, valid, conf) -> dict[str, float]:
        out = losses.depth_loss(pred, gt, valid, conf, l1_weight=cfg.l1_weight, gradient_weight=cfg.gradient_weight,
                                gradient_scales=cfg.gradient_scales, conf_weight=cfg.conf_weight,
                                conf_alpha=cfg.conf_alpha)
        return {k: float(v) for k, v in out.items()}

    return terms


def append_val_history(output_dir: Path, step: int, summary: dict, extra_rows: dict | None = None) -> Path:
    """Append one line per dataset of a validation ``summary`` to ``val_history.jsonl`` (flushed and
    fsynced: a crash loses at most the line being written). extra_rows: {dataset: {row: {metric:
    value}}} added to the line's metrics (``val.correspondence``: the row ``correspondence``)."""
    path = Path(output_dir) / VAL_HISTORY
    with open(path, "a", encoding="utf-8") as f:
        for dataset in sorted(summary):
            rows = {k: v for k, v in summary[dataset].items() if k != "loss"}
            rows.update((extra_rows or {}).get(dataset, {}))
            line = {"step": int(step), "dataset": dataset, "metrics": rows, "loss": summary[dataset].get("loss", {})}
            f.write(json.dumps(line, default=float) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return path


def read_val_history(run_dir: str | Path) -> list[dict]:
    """The lines of a run's ``val_history.jsonl`` (an empty list without one); a torn last line is skipped."""
    path = Path(run_dir) / VAL_HISTORY
    if not path.is_file():
        return []
    lines = []
    for text in path.read_text(encoding="utf-8").splitlines():
        try:
            lines.append(json.loads(text))
        except ValueError:
            continue
    return lines


def trim_val_history(output_dir: Path, step: int) -> int:
    """Drop the lines of steps after ``step`` (atomically); returns how many were dropped."""
    from ..files import atomic_write_bytes

    lines = read_val_history(output_dir)
    kept = [line for line in lines if line.get("step", 0) <= step]
    if len(kept) != len(lines):
        text = "".join(json.dumps(line, default=float) + "\n" for line in kept)
        atomic_write_bytes(Path(output_dir) / VAL_HISTORY, text.encode())
    return len(lines) - len(kept)


def write_val_summary(output_dir: str | Path, step: int, summary: dict, *, scenes: int | None = None,
                      views: int | None = None) -> Path:
    """Write a run's latest validation (``EvalResult.summary`` at optimizer ``step``, ``scenes`` = at
    most that many scenes per dataset, ``views`` per scene) to ``output_dir/val_summary.json``
    atomically; returns its path. ``read_val_summary`` reads it back."""
    from ..files import atomic_write_bytes

    doc = {"step": int(step), "summary": summary, "max_scenes": scenes, "views": views}
    return atomic_write_bytes(Path(output_dir) / VAL_SUMMARY_NAME, json.dumps(doc, indent=1, default=float).encode())


def read_val_summary(run_dir: str | Path) -> dict | None:
    """The run's ``val_summary.json`` as written by ``write_val_summary`` ({"step", "summary",
    "max_scenes", "views"}), or None when the run has none. Raises ``ValueError`` if it is malformed."""
    path = Path(run_dir) / VAL_SUMMARY_NAME
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: unreadable ({err}); delete it or validate the run again") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("summary"), dict) or not isinstance(doc.get("step"), int):
        raise ValueError(f"{path}: not a validation summary (needs an integer 'step' and a 'summary' mapping)")
    return {"step": doc["step"], "summary": doc["summary"], "max_scenes": doc.get("max_scenes"),
            "views": doc.get("views")}


def validation_card_fields(validation: dict | None) -> dict:
    """``CardInfo`` fields (eval_summary, eval_note) for a validation summary (``read_val_summary``)."""
    if not validation or not validation.get("summary"):
        return {}
    note = f"Validation at optimizer step {validation['step']}"
    details = []
    if validation.get("max_scenes"):
        details.append(f"at most {validation['max_scenes']} scenes per dataset")
    if validation.get("views"):
        details.append(f"{validation['views']} views per scene")
    if details:
        note += f" ({', '.join(details)})"
    return {"eval_summary": validation["summary"], "eval_note": note}
