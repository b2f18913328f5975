"""``depthpe compare`` of ``depthpe rmvd`` output folders (docs/compare.md, docs/rmvd.md).

An RMVD folder (its ``summary.json`` has ``settings`` and no evaluation ``summary``) is resolved and
grouped exactly like an evaluation (``compare.resolve_input``, ``compare.group_inputs``: the run's
``config.yaml`` above ``meta.model``, or ``meta.global_pe`` of a ``--model`` run). The result is
one table whose rows are datasets x settings (and each setting's mean over datasets) x groups:
mean and sample std over seeds of AbsRel and inliers (percent), and per (dataset, setting) the
paired per-sample difference of AbsRel against the reference group (per sample the mean over a
group's seeds, from ``per_sample.csv``) with a seeded bootstrap 95% interval over samples
(``compare.paired_comparison``). Only (dataset, setting) pairs that every folder has are compared,
and a setting scored with another source-view ordering in one folder than in another is refused.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Sequence

import numpy as np

from ..config import ConfigError
from .compare import EvalInput, group_inputs, markdown_tables, mean_std, mean_std_text, paired_cells, paired_comparison, resolve_input
from .settings import BOOTSTRAP, GROUP_BY

__all__ = ["RMVD_COLUMNS", "RMVD_TABLE", "is_rmvd_folder", "rmvd_compare_groups", "rmvd_cells", "format_rmvd_compare",
           "run_rmvd_compare"]

RMVD_TABLE = "RMVD (datasets x settings)"
RMVD_COLUMNS = ("dataset", "setting", "ordering", "group", "seeds", "AbsRel %", "inliers (<1.03) %",
                "Δ AbsRel vs ref.", "95% interval", "excludes 0")
MEAN = "mean"  # the row of a setting's mean over datasets


def is_rmvd_folder(path: str | Path) -> bool:
    """Whether ``path`` holds the summary.json of ``depthpe rmvd`` (not of ``depthpe eval``)."""
    try:
        doc = json.loads((Path(path) / "summary.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and isinstance(doc.get("settings"), dict) and "summary" not in doc


def _entry(item: EvalInput, setting: str) -> dict:
    return item.summary["settings"].get(setting) or {}


def _pairs(items: Sequence[EvalInput], datasets: Sequence[str] | None) -> list[tuple[str, str]]:
    """The (dataset, setting) pairs every folder has (``datasets``: only these), in the first
    folder's order, each setting followed by its mean row; a ``ConfigError`` when none is left or
    a setting's ordering differs between folders."""
    first = items[0]
    pairs = []
    for setting, entry in first.summary["settings"].items():
        orderings = {_entry(it, setting).get("ordering") for it in items}
        if None in orderings:
            continue
        if len(orderings) > 1:
            raise ConfigError(f"setting {setting}: the folders used different source-view orderings "
                              f"({', '.join(sorted(orderings))}); compare like with like")
        names = [d for d in entry["datasets"] if all(d in _entry(it, setting)["datasets"] for it in items)]
        names = [d for d in names if not datasets or d in datasets]
        pairs += [(d, setting) for d in names] + ([(MEAN, setting)] if names and not datasets else [])
    if not pairs:
        raise ConfigError("the RMVD folders have no dataset and setting in common (or none of --dataset)")
    return pairs


def _value(item: EvalInput, dataset: str, setting: str, metric: str) -> float:
    entry = _entry(item, setting)
    value = (entry["mean"] if dataset == MEAN else entry["datasets"][dataset]).get(metric)
    return math.nan if value is None else float(value)


def _sample_values(item: EvalInput, dataset: str, setting: str) -> dict[str, float]:
    """{sample: AbsRel} of one folder's per_sample.csv rows of ``dataset`` in ``setting`` (finite only)."""
    if "rmvd_csv" not in item.extra:
        path = item.eval_dir / "per_sample.csv"
        if not path.is_file():
            raise ConfigError(f"{item.path}: no per_sample.csv next to summary.json (needed for the paired "
                              "per-sample comparison); score it again with depthpe rmvd")
        with open(path, newline="") as f:
            item.extra["rmvd_csv"] = list(csv.DictReader(f))
    out = {}
    for row in item.extra["rmvd_csv"]:
        value = float(row["abs_rel"]) if row.get("abs_rel") not in (None, "") else math.nan
        if row["dataset"] == dataset and row["setting"] == setting and math.isfinite(value):
            out[row["sample"]] = value
    return out


def _group_samples(members: Sequence[EvalInput], dataset: str, setting: str) -> dict[str, float]:
    """Per sample the AbsRel averaged over the group's seeds (over the seeds that have it)."""
    pooled: dict[str, list[float]] = {}
    for item in members:
        for sample, value in _sample_values(item, dataset, setting).items():
            pooled.setdefault(sample, []).append(value)
    return {s: float(np.mean(v)) for s, v in sorted(pooled.items())}


def rmvd_compare_groups(groups: dict[str, list[EvalInput]], *, reference: str | None = None,
                        datasets: Sequence[str] | None = None, n_boot: int = BOOTSTRAP, seed: int = 0) -> dict:
    """{"kind": "rmvd", "reference", "rows": [{"dataset", "setting", "ordering", "group", "runs",
    "seeds", "n_seeds", "abs_rel", "inliers" ({"mean", "std", "values"} over seeds), "paired"
    (``paired_comparison`` of per-sample AbsRel against the reference; None for a mean row)}]}."""
    reference = reference if reference is not None else next(iter(groups))
    if reference not in groups:
        raise ConfigError(f"--reference {reference!r}: no such group (groups: {', '.join(groups)})")
    items = [it for members in groups.values() for it in members]
    rows = []
    for dataset, setting in _pairs(items, datasets):
        ref = None if dataset == MEAN else _group_samples(groups[reference], dataset, setting)
        for label, members in groups.items():
            stats = {}
            for metric in ("abs_rel", "inliers"):
                values = [_value(it, dataset, setting, metric) for it in members]
                mean, std = mean_std(values)
                stats[metric] = {"mean": mean, "std": std, "values": values}
            paired = None if ref is None else paired_comparison(_group_samples(members, dataset, setting), ref,
                                                                 n_boot=n_boot, seed=seed)
            rows.append({"dataset": dataset, "setting": setting, "ordering": _entry(members[0], setting)["ordering"],
                         "group": label, "runs": [it.name for it in members], "seeds": [it.seed for it in members],
                         "n_seeds": len(members), **stats, "paired": paired})
    return {"kind": "rmvd", "reference": reference, "rows": rows}


def rmvd_cells(result: dict) -> dict[str, list[list[str]]]:
    """{``RMVD_TABLE``: one row of text cells (``RMVD_COLUMNS`` order) per row of the result}."""
    cells = []
    for row in result["rows"]:
        paired = row["paired"]
        tail = ["", "", ""] if paired is None else paired_cells(paired, row["group"] == result["reference"], 2, "samples")
        cells.append([row["dataset"], row["setting"], row["ordering"], row["group"], str(row["n_seeds"]),
                      mean_std_text(row["abs_rel"], 2), mean_std_text(row["inliers"], 1), *tail])
    return {RMVD_TABLE: cells}


def format_rmvd_compare(result: dict, notes: Sequence[str] = ()) -> str:
    """The Markdown of an ``rmvd_compare_groups`` result: ``notes``, then the one table."""
    return markdown_tables(rmvd_cells(result), RMVD_COLUMNS, notes)


def run_rmvd_compare(paths: Sequence[str], *, group_by: str = GROUP_BY, reference: str | None = None,
                     datasets: Sequence[str] | None = None, n_boot: int = BOOTSTRAP,
                     seed: int = 0) -> tuple[dict, str, dict]:
    """``depthpe compare`` of RMVD folders: (result, Markdown, meta), as ``compare.run_compare``."""
    if n_boot < 1:
        raise ConfigError(f"--bootstrap must be at least 1, got {n_boot}")
    groups = group_inputs([resolve_input(p) for p in paths], group_by)
    result = rmvd_compare_groups(groups, reference=reference, datasets=datasets, n_boot=n_boot, seed=seed)
    notes = [f"RMVD folders grouped by `{group_by}`; reference group `{result['reference']}`; Δ = group − reference "
             f"per sample (negative: lower AbsRel than the reference); bootstrap over samples, {n_boot} resamples, "
             f"seed {seed}. Rows: datasets x settings, and each setting's mean over datasets."]
    items = [it for members in groups.values() for it in members]
    meta = {"kind": "rmvd", "group_by": group_by, "reference": result["reference"], "bootstrap": n_boot, "seed": seed,
            "inputs": [{"path": it.path, "eval_dir": str(it.eval_dir), "run_dir": str(it.run_dir) if it.run_dir else None,
                        "group": it.group, "seed": it.seed} for it in items]}
    return result, format_rmvd_compare(result, notes), meta
