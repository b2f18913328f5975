"""Correspondence lift per layer across the runs of a study, as a Markdown table.

    depthpe study lift-table geo_study/runs --probe probe_geo [--radius 1]

Reads RUNS/<group>_s<seed>/<probe>/summary.json (written by `depthpe probe attention`), groups the
runs by their folder name without the ``_s<seed>`` suffix, and prints per group and layer the mean
and sample standard deviation over seeds of the head-averaged lift and of the lift minus the
same-position lift (the part of the lift that the query's own grid position does not explain;
docs/probe.md). One dataset per table. Used by depthpe/studies/geometry/study.sh.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path


def read_layer_rows(summary: Path, radius: int) -> dict[str, dict[int, tuple[float, float]]]:
    """{dataset: {layer: (lift, lift - same_position_lift)}} of one probe summary at ``radius``."""
    data = json.loads(summary.read_text())["datasets"]
    return {name: {row["layer"]: (row["lift"], row["lift"] - row["same_position_lift"])
                   for row in entry["layers"] if row["radius"] == radius}
            for name, entry in data.items()}


def mean_std(values: list[float]) -> str:
    """``mean ± std`` (sample std over seeds; ``± -`` for one value), 2 decimals."""
    spread = f"{statistics.stdev(values):.2f}" if len(values) > 1 else "-"
    return f"{statistics.fmean(values):.2f} ± {spread}"


def lift_tables(runs: Path, probe: str, radius: int) -> str:
    """The Markdown tables (one per dataset) of every group under ``runs``."""
    per_group: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for summary in sorted(runs.glob(f"*_s[0-9]*/{probe}/summary.json")):
        group = re.sub(r"_s\d+$", "", summary.parent.parent.name)
        for dataset, layers in read_layer_rows(summary, radius).items():
            for layer, values in layers.items():
                per_group[dataset][(group, layer)]["lift"].append(values[0])
                per_group[dataset][(group, layer)]["margin"].append(values[1])
    if not per_group:
        raise SystemExit(f"error: no {probe}/summary.json under {runs}/*_s<seed>/ (run depthpe probe attention first)")
    out = []
    for dataset, cells in per_group.items():
        out += [f"### {dataset}, r = {radius}", "",
                "| group | layer | seeds | lift | lift - same-position lift |", "|---|---:|---:|---:|---:|"]
        for (group, layer), values in cells.items():
            out.append(f"| {group} | {layer} | {len(values['lift'])} | {mean_std(values['lift'])} | "
                       f"{mean_std(values['margin'])} |")
        out.append("")
    return "\n".join(out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``depthpe study lift-table``: RUNS, --probe and --radius."""
    parser.add_argument("runs", type=Path, help="folder holding the run folders <group>_s<seed>")
    parser.add_argument("--probe", default="probe_geo", help="probe output folder inside each run")
    parser.add_argument("--radius", type=int, default=1, help="window radius in patches (0 or 1)")


def run(args: argparse.Namespace) -> int:
    """Print the tables of ``lift_tables`` for RUNS, --probe and --radius."""
    print(lift_tables(args.runs, args.probe, args.radius))
    return 0
