"""``depthpe compare RUN_OR_EVAL_DIR ...``: runs grouped by a config key, mean ± std over seeds, paired intervals."""

from __future__ import annotations

import argparse

from .errors import USAGE_ERROR_STATUS, report_errors

DESCRIPTION = """\
Compare the evaluations (depthpe eval output folders, or run folders holding exactly one eval*/
evaluation) of several runs. Runs are grouped by a config key of their config.yaml (--group-by,
default model.global_pe); the runs of one group must differ only in seed, output_dir, hub.* and val.manifest
(else an error names the key). Prints one Markdown table per dataset: seeds, mean ± sample std over
seeds of native and scene-aligned AbsRel and delta1, native AbsRel over the global-constant and
scene-constant baselines, and the per-scene paired difference of native AbsRel against the
reference group with a bootstrap 95% interval over scenes. Evaluations on different manifests are
refused unless --allow-different-manifests. With --out, writes compare.md, compare.json, report.html, and
the validation curves of the runs that have a val_history.jsonl to curves/ (as `depthpe plot`).
How to compare encodings honestly: docs/compare.md."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="RUN_OR_EVAL_DIR",
                        help="evaluation folders (summary.json) or run folders (config.yaml + one eval*/ folder)")
    parser.add_argument("--group-by", default="model.global_pe",
                        help="dotted run-config key whose value names the group (default model.global_pe)")
    parser.add_argument("--reference", default=None, help="group the others are paired with (default: the first group)")
    parser.add_argument("--dataset", action="append", default=None, metavar="D",
                        help="compare only this dataset (repeatable; default: every dataset all evaluations have)")
    parser.add_argument("--out", default=None, help="folder for compare.md and compare.json")
    parser.add_argument("--allow-different-manifests", action="store_true",
                        help="compare evaluations made on different manifests (paired on the common scenes)")
    parser.add_argument("--bootstrap", type=int, default=10_000, metavar="N", help="bootstrap resamples (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")


def run(args: argparse.Namespace) -> int:
    with report_errors(args.debug):
        from ..analysis.compare import run_compare, write_compare
        from ..analysis.plotting import write_curves

        result, markdown, meta = run_compare(
            args.inputs, group_by=args.group_by, reference=args.reference, datasets=args.dataset,
            allow_different_manifests=args.allow_different_manifests, n_boot=args.bootstrap, seed=args.seed)
        print(markdown)
        if args.out:
            paths = write_compare(result, markdown, args.out, meta)
            print(f"wrote {paths['markdown']} and {paths['json']}")
            figures = write_curves(meta, args.out)
            for figure in figures:
                print(f"wrote {figure.png} and {figure.svg} (validation curves)")
            from ..report.compare_report import write_compare_report

            report = write_compare_report(result, markdown, meta, args.out, [f.png for f in figures])
            print(f"wrote {report} (open it in a browser)")
        return 0
    return USAGE_ERROR_STATUS
