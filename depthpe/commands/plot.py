"""``depthpe plot RUN_DIR ... --out DIR``: validation curves of runs from their val_history.jsonl."""

from __future__ import annotations

import argparse

from .errors import USAGE_ERROR_STATUS, report_errors

DESCRIPTION = """\
Draw the validation curves of training runs from each run folder's val_history.jsonl: per dataset
one figure (curves_<dataset>.png and .svg in --out) with one panel per metric (a metric of the
table once per --rows row; `loss` is the total validation loss, `loss.l1` / `loss.gradient` its
terms), one line per run, one colour per group of --group-by (runs that differ only by seed share
it). Raw points are faint; the line on top is a bias-corrected exponential moving average with
decay 0.95 per 1,000 steps (formula: docs/compare.md)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders (config.yaml and val_history.jsonl)")
    parser.add_argument("--group-by", default="model.global_pe",
                        help="dotted run-config key that names the group (colour) of a run (default model.global_pe)")
    parser.add_argument("--metrics", nargs="+", default=["abs_rel", "delta1", "loss"],
                        help="metrics, one panel each (default: abs_rel delta1 loss)")
    parser.add_argument("--rows", nargs="+", default=["native"],
                        help="table rows of the metrics (default native; e.g. native scene_aligned)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")


def run(args: argparse.Namespace) -> int:
    with report_errors(args.debug):
        from ..analysis.plotting import run_plot

        for figure in run_plot(args.runs, args.out, group_by=args.group_by, metrics=args.metrics, rows=args.rows):
            print(f"wrote {figure.png} and {figure.svg} ({len(figure.panels)} panels)")
        return 0
    return USAGE_ERROR_STATUS
