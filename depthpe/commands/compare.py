"""``depthpe compare RUN_OR_EVAL_DIR ...``: runs grouped by a config key, mean ± std over seeds, paired intervals."""

from __future__ import annotations

import argparse

from ..analysis.settings import CompareConfig
from ..config.options import add_options, config_from_args
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
Output folders of depthpe rmvd are compared the same way, in one table whose rows are datasets x
settings (AbsRel and inliers, paired per sample); folders of `depthpe bench camera-noise` in one
table per dataset whose rows are groups x noise levels (paired against the first level and against
the reference at each level). How to compare encodings honestly: docs/compare.md."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``depthpe compare``: the fields of ``CompareConfig``, ``--config FILE``, ``key=value``."""
    add_options(parser, CompareConfig)
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")


def run(args: argparse.Namespace) -> int:
    with report_errors(args.debug):
        cfg = config_from_args(CompareConfig, args)
        from ..analysis.compare import write_compare
        from ..analysis.plotting import write_curves

        result, markdown, meta, columns, tables = _compare(cfg)
        print(markdown)
        if cfg.out:
            paths = write_compare(result, markdown, cfg.out, meta)
            print(f"wrote {paths['markdown']} and {paths['json']}")
            figures = write_curves(meta, cfg.out)
            for figure in figures:
                print(f"wrote {figure.png} and {figure.svg} (validation curves)")
            from ..report.compare_report import write_compare_report

            report = write_compare_report(result, markdown, meta, cfg.out, [f.png for f in figures], columns, tables)
            print(f"wrote {report} (open it in a browser)")
        return 0
    return USAGE_ERROR_STATUS


def _compare(cfg: CompareConfig):
    """(result, Markdown, meta, table columns, table cells) of evaluation folders
    (``compare.run_compare``), of ``depthpe rmvd`` folders (``rmvd_compare.run_rmvd_compare``) or of
    camera-noise sweep folders (``noise_sweep.run_sweep_compare``); a mix of kinds is a ``ConfigError``."""
    from ..analysis.compare import COLUMNS, compare_cells, run_compare
    from ..analysis.noise_sweep import SWEEP_COLUMNS, is_sweep_folder, run_sweep_compare, sweep_cells
    from ..analysis.rmvd_compare import RMVD_COLUMNS, is_rmvd_folder, rmvd_cells, run_rmvd_compare
    from ..config import ConfigError

    kinds = {p: "a depthpe rmvd output" if is_rmvd_folder(p) else
             "a camera-noise sweep (depthpe bench camera-noise)" if is_sweep_folder(p) else "an evaluation"
             for p in cfg.inputs}
    if len(set(kinds.values())) > 1:
        shown = next(p for p in cfg.inputs if kinds[p] != kinds[cfg.inputs[0]])
        raise ConfigError(f"{shown} is {kinds[shown]} and {cfg.inputs[0]} is {kinds[cfg.inputs[0]]}: compare "
                          "folders of one kind (evaluations, RMVD outputs or sweeps) at a time")
    if is_rmvd_folder(cfg.inputs[0]):
        result, markdown, meta = run_rmvd_compare(cfg.inputs, group_by=cfg.group_by, reference=cfg.reference,
                                                  datasets=cfg.dataset, n_boot=cfg.bootstrap, seed=cfg.seed)
        return result, markdown, meta, RMVD_COLUMNS, rmvd_cells(result)
    if is_sweep_folder(cfg.inputs[0]):
        result, markdown, meta = run_sweep_compare(cfg.inputs, group_by=cfg.group_by, reference=cfg.reference,
                                                   datasets=cfg.dataset, n_boot=cfg.bootstrap, seed=cfg.seed)
        return result, markdown, meta, SWEEP_COLUMNS, sweep_cells(result)
    result, markdown, meta = run_compare(
        cfg.inputs, group_by=cfg.group_by, reference=cfg.reference, datasets=cfg.dataset,
        allow_different_manifests=cfg.allow_different_manifests, n_boot=cfg.bootstrap, seed=cfg.seed)
    return result, markdown, meta, COLUMNS, compare_cells(result)
