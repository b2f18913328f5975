"""``report.html`` of a ``depthpe eval`` output folder, built from its files alone (summary.json,
metrics_per_image.csv, worst.json with worst/*.png, panels/*.png and the model folder's
config.json, training_inputs.json and model card): the metrics table per dataset and row with the
baselines, per-scene results sortable by error, the worst images with their panels (image | GT |
prediction | AbsRel error), and the run's settings and model facts."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from ..files import safe_component
from ..metrics import BASELINE_MODES, MODES, scene_summaries
from .html import render, write_page

__all__ = ["TABLE_METRICS", "read_rows", "scene_table", "model_facts", "eval_report_context", "write_eval_report"]

TABLE_METRICS = ("abs_rel", "delta1", "delta2", "delta3", "rmse", "log_rmse")
SCENE_METRICS = ("abs_rel", "delta1", "rmse")


def _value(text: str):
    """A CSV cell as int, float or the text itself."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_rows(path: str | Path) -> list[dict]:
    """The rows of a metrics_per_image.csv, numbers parsed (empty file: [])."""
    path = Path(path)
    if not path.is_file() or not path.read_text().strip():
        return []
    with path.open(newline="") as f:
        return [{k: _value(v) for k, v in row.items()} for row in csv.DictReader(f)]


def scene_table(rows: list[dict]) -> list[dict]:
    """One entry per (dataset, scene): its views and the native metrics (``SCENE_METRICS``) plus
    the scene-aligned AbsRel, worst native AbsRel first."""
    by_scene: dict[tuple, dict] = {}
    views = {(r["dataset"], r["scene"]): r.get("views") for r in rows}
    for s in scene_summaries([r for r in rows if r["mode"] in ("native", "scene_aligned")]):
        entry = by_scene.setdefault((s["dataset"], s["scene"]), {"dataset": s["dataset"], "scene": s["scene"],
                                                                   "views": views[(s["dataset"], s["scene"])]})
        if s["mode"] == "native":
            entry.update({k: s[k] for k in SCENE_METRICS})
        else:
            entry["aligned_abs_rel"] = s["abs_rel"]
    worst_first = lambda e: -e["abs_rel"] if math.isfinite(e.get("abs_rel", math.nan)) else math.inf  # noqa: E731
    return sorted(by_scene.values(), key=worst_first)


def _front_matter(card: Path) -> dict:
    """The YAML metadata block of a model card (README.md), or {}."""
    import yaml

    text = card.read_text(encoding="utf-8") if card.is_file() else ""
    if not text.startswith("---"):
        return {}
    block = text.split("---", 2)[1]
    meta = yaml.safe_load(block)
    return meta if isinstance(meta, dict) else {}


def model_facts(model: str | None) -> list[tuple[str, str]]:
    """(name, value) facts of an exported model folder: its config.json scalars, training inputs
    and model-card metadata; one line saying where the model is when it is not a local folder."""
    if not model or not Path(model).is_dir():
        return [("model", f"{model} (not a local folder: see its model card on the Hub)")]
    folder = Path(model)
    facts = [("model folder", str(folder))]
    if (folder / "config.json").is_file():
        config = json.loads((folder / "config.json").read_text())
        facts += [(f"config.{k}", str(v)) for k, v in config.items() if not isinstance(v, (dict, list))]
    if (folder / "training_inputs.json").is_file():
        inputs = json.loads((folder / "training_inputs.json").read_text())
        facts += [(f"trained at: {k}", str(v)) for k, v in inputs.items()]
    card = _front_matter(folder / "README.md")
    facts += [(f"card: {k}", ", ".join(map(str, v)) if isinstance(v, list) else str(v))
              for k, v in card.items() if not isinstance(v, dict)]
    return facts


def _metrics_rows(summary: dict) -> list[dict]:
    """Table rows (dataset, row, baseline flag, counts, metrics) in protocol order."""
    out = []
    for dataset in sorted(summary):
        for mode in (*MODES, *BASELINE_MODES):
            entry = summary[dataset].get(mode)
            if entry and "n_scenes" in entry:
                out.append({"dataset": dataset, "row": mode, "baseline": mode in BASELINE_MODES, **entry})
    return out


def _ratios(summary: dict) -> list[dict]:
    """Native AbsRel over each baseline's AbsRel, per dataset (< 1: better than the baseline)."""
    out = []
    for dataset in sorted(summary):
        native = summary[dataset].get("native", {}).get("abs_rel")
        for mode in BASELINE_MODES:
            base = summary[dataset].get(mode, {}).get("abs_rel")
            if native is not None and base:
                out.append({"dataset": dataset, "baseline": mode, "ratio": native / base})
    return out


def eval_report_context(out_dir: str | Path) -> dict:
    """Everything report.html shows, read from the evaluation folder ``out_dir``."""
    out = Path(out_dir)
    doc = json.loads((out / "summary.json").read_text())
    worst = json.loads((out / "worst.json").read_text()) if (out / "worst.json").is_file() else []
    meta = doc.get("meta", {})
    return {
        "title": f"depthpe evaluation: {Path(str(meta.get('model', out))).name or out.name}",
        "meta": [(k, str(v)) for k, v in meta.items()],
        "metrics": TABLE_METRICS, "table": _metrics_rows(doc.get("summary", {})),
        "ratios": _ratios(doc.get("summary", {})), "scene_metrics": SCENE_METRICS,
        "scenes": scene_table(read_rows(out / "metrics_per_image.csv")),
        "worst": [{**w, "path": path} for w in worst
                  if (path := out / "worst" / safe_component(Path(str(w.get("file", ""))).name)).is_file()],
        "panels": sorted((out / "panels").glob("*.png")) if (out / "panels").is_dir() else [],
        "failures": doc.get("failures", []), "short": doc.get("views", {}).get("fewer_than_requested", {}),
        "model_facts": model_facts(meta.get("model")),
    }


def write_eval_report(out_dir: str | Path) -> Path:
    """Write ``out_dir/report.html`` (one file: images embedded); returns its path."""
    return write_page(Path(out_dir) / "report.html", render("eval.html.j2", **eval_report_context(out_dir)))
