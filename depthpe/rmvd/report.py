"""``report.html`` of a ``depthpe rmvd`` output folder: one table per setting (datasets and the
mean; AbsRel %, inliers %, and AUSE, runtime and peak memory where the run measured them), the
run's facts (``summary["meta"]`` of a ``--model`` run) and every sample, sortable. One page, no
network; every name from a sample list is HTML-escaped (``depthpe.report.html.render``)."""

from __future__ import annotations

from pathlib import Path

from ..report.html import render, write_page

__all__ = ["COLUMNS", "setting_tables", "write_report"]

# (summary key, column heading, decimals) of the per-setting tables, in this order where present.
COLUMNS = (("abs_rel", "AbsRel %", 2), ("inliers", "inliers (<1.03) %", 1), ("ause", "AUSE", 4),
           ("runtime_ms", "runtime ms", 1), ("peak_memory_mib", "peak memory MiB", 1))


def setting_tables(summary: dict) -> list[dict]:
    """Per setting of ``summary`` (``harness.summarize``): {"setting", "label" (its ordering, marked
    as an oracle one), "columns" [(key, heading, decimals)], "rows" [{"dataset", "samples", key:
    value}] with the mean last}."""
    tables = []
    for setting, entry in summary["settings"].items():
        columns = [c for c in COLUMNS if c[0] in entry["mean"]]
        rows = [{"dataset": name, "samples": d["samples"], **{k: d[k] for k, _, _ in columns}}
                for name, d in entry["datasets"].items()]
        rows.append({"dataset": "mean", "samples": "", **{k: entry["mean"][k] for k, _, _ in columns}})
        label = f"ordering {entry['ordering']}" + (" (oracle: views chosen with the GT)" if entry["oracle"] else "")
        tables.append({"setting": setting, "label": label, "columns": columns, "rows": rows})
    return tables


def write_report(out: str | Path, summary: dict, rows: list[dict]) -> Path:
    """Write ``out/report.html`` for the summary and the per-sample ``rows`` (per_sample.csv's);
    returns its path."""
    meta = summary.get("meta") or {}
    fields = list(rows[0]) if rows else []
    page = render("rmvd.html.j2", title=f"depthpe rmvd: {meta.get('model') or meta.get('predictions') or Path(out).name}",
                  tables=setting_tables(summary), meta=meta, fields=fields, rows=rows)
    return write_page(Path(out) / "report.html", page)
