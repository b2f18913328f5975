"""The output files of an evaluation (docs/evaluation.md, "Outputs"): ``summary.json``,
``metrics_per_image.csv``, ``manifest.json``, ``summary.md``, ``panels/``, ``worst/`` and
``report.html``, each written atomically, and the markdown table (``format_summary``) that the
console, validation logs and model cards print."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Sequence

from ..config.camera_noise import noise_note
from ..files import atomic_write_bytes, safe_component
from ..metrics import BASELINE_MODES, MODES
from .loop import EvalResult, finite_values, non_finite
from .protocol import write_manifest

__all__ = ["ROW_ORDER", "format_summary", "write_outputs"]

ROW_ORDER = (*MODES, *BASELINE_MODES)


def format_summary(summary: dict, keys: Sequence[str] = ("abs_rel", "delta1", "delta2", "delta3", "rmse", "log_rmse")) -> str:
    """Markdown table: one row per (dataset, mode), modes in protocol order."""
    header = "| dataset | rows | scenes | images | " + " | ".join(keys) + " |"
    lines = [header, "|" + "---|" * (4 + len(keys))]
    for dataset in sorted(summary):
        for mode in ROW_ORDER:
            entry = summary[dataset].get(mode)
            if not entry or "n_scenes" not in entry:
                continue
            vals = " | ".join(_cell(entry.get(k)) for k in keys)
            lines.append(f"| {dataset} | {mode} | {entry['n_scenes']} | {entry['n_images']} | {vals} |")
    return "\n".join(lines)


def _cell(value) -> str:
    """A table cell: the value to 4 decimals, ``-`` where it is undefined (missing, None or NaN)."""
    return "-" if value is None or non_finite(value) else f"{value:.4f}"


def write_outputs(result: EvalResult, out_dir: str | Path, *, meta: dict | None = None,
                  fingerprint: dict | None = None) -> dict[str, Path]:
    """Write ``summary.json``, ``metrics_per_image.csv``, ``manifest.json``, ``summary.md`` (the table,
    after a line naming the camera noise when ``meta`` has one) and ``panels/*.png`` into ``out_dir``
    (atomically, file by file). Returns the paths written.
    fingerprint: ``eval_partial.eval_fingerprint`` of the settings, kept in summary.json so that a
    rerun with the same settings knows the evaluation is complete."""
    from ..report.viz import save_png

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    requested = (meta or {}).get("views")
    doc = {"meta": meta or {}, "summary": result.summary, "failures": result.failures,
           "views": {"requested": requested, "per_scene": result.views_used(),
                     "fewer_than_requested": result.short_scenes(requested) if requested else {}}}
    if fingerprint is not None:
        doc["fingerprint"] = fingerprint
    text = json.dumps(finite_values(doc), indent=1, default=float, allow_nan=False)  # strict JSON: no NaN
    paths["summary"] = atomic_write_bytes(out / "summary.json", text.encode())
    buf = io.StringIO()
    if result.rows:
        fieldnames = list(result.rows[0].keys())
        writer = csv.DictWriter(buf, fieldnames=fieldnames)
        writer.writeheader()
        for row in sorted(result.rows, key=lambda r: (r["dataset"], r["scene"], ROW_ORDER.index(r["mode"]), r["image"])):
            writer.writerow(row)
    paths["rows"] = atomic_write_bytes(out / "metrics_per_image.csv", buf.getvalue().encode())
    paths["manifest"] = write_manifest(out / "manifest.json", result.manifest, seed=(meta or {}).get("seed"),
                                       views=(meta or {}).get("views"), camera_noise=(meta or {}).get("camera_noise"))
    note = noise_note((meta or {}).get("camera_noise"))
    table = (f"{note}\n\n" if note else "") + format_summary(result.summary) + "\n"
    paths["table"] = atomic_write_bytes(out / "summary.md", table.encode())
    for name, panel in result.panels:
        paths[f"panel_{name}"] = save_png(out / "panels" / f"{safe_component(name)}.png", panel)
    paths.update(_write_worst(result.worst, out))
    from ..report.eval_report import write_eval_report

    paths["report"] = write_eval_report(out)
    return paths


def _write_worst(items: list[dict], out: Path) -> dict[str, Path]:
    """``worst/NN_<dataset>_<scene>_v<image>.png`` panels and ``worst.json`` (their metrics and files)."""
    from ..report.viz import save_png

    listed, paths = [], {}
    for rank, item in enumerate(items):
        stem = safe_component(f"{rank:02d}_{item['dataset']}_{item['scene']}_v{item['image']}")
        name = f"worst/{stem}.png"
        paths[f"worst_{rank}"] = save_png(out / name, item["panel"])
        listed.append({**{k: v for k, v in item.items() if k != "panel"}, "file": name})
    paths["worst"] = atomic_write_bytes(out / "worst.json", json.dumps(listed, indent=1).encode())
    return paths
