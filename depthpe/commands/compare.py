"""``depthpe compare RUN_OR_EVAL_DIR ...``: runs grouped by a config key, mean ± std over seeds, paired intervals."""

from __future__ import annotations

import argparse
from typing import Sequence

from ..analysis.settings import CompareConfig
from ..config.options import add_options, config_from_args
from ..files.output_folder import owned_output_folder, settings_fingerprint
from ..config.command_line import USAGE_ERROR_STATUS, report_errors

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
settings (AbsRel and inliers, paired per sample); folders of `depthpe study camera-noise` in one
table per dataset whose rows are groups x noise levels (paired against the first level and against
the reference at each level); folders of `depthpe study correspondence` in one table per
evaluation setting (top-1 at the last layer, paired per held-out scene). How to compare encodings honestly: docs/compare.md."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``depthpe compare``: the fields of ``CompareConfig``, ``--config FILE``, ``key=value``."""
    add_options(parser, CompareConfig)
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")


def run(args: argparse.Namespace) -> int:
    with report_errors(args.debug):
        cfg = config_from_args(CompareConfig, args)
        if not cfg.out:
            compare_and_write(cfg)
            return 0
        with owned_output_folder(cfg.out, "depthpe compare", settings_fingerprint(cfg), replace=cfg.overwrite):
            compare_and_write(cfg)
        return 0
    return USAGE_ERROR_STATUS


def compare_and_write(cfg: CompareConfig, figures: Sequence = ()) -> dict:
    """``depthpe compare``: print the tables of ``cfg.inputs`` and, with ``cfg.out``, write them
    (``analysis.comparison_files.write_comparison``; ``figures`` are shown in report.html too).
    Returns the result. The caller owns ``cfg.out`` (``run``: ``depthpe.files.output_folder``; a camera-noise
    sweep: its own folder)."""
    from ..analysis.comparison_files import write_comparison

    return write_comparison(_compare(cfg), cfg.out, figures)


def _compare(cfg: CompareConfig):
    """The ``Comparison`` (result, Markdown, meta, table columns, table cells) of evaluation folders
    (``compare.run_compare``), ``depthpe rmvd`` folders (``rmvd_compare.run_rmvd_compare``),
    camera-noise sweeps (``noise_sweep.run_sweep_compare``) or correspondence benchmark folders
    (``correspondence_compare.run_correspondence_compare``); a mix of kinds is a ``ConfigError``."""
    from ..analysis import compare, rmvd_compare
    from ..studies.camera_noise import sweep as noise_sweep
    from ..studies.correspondence import compare as correspondence_compare
    from ..analysis.comparison_files import Comparison
    from .folder_kinds import one_kind

    kind = one_kind(cfg.inputs)
    shared = {"group_by": cfg.group_by, "reference": cfg.reference, "n_boot": cfg.bootstrap, "seed": cfg.seed}
    if kind == "rmvd":
        result, markdown, meta = rmvd_compare.run_rmvd_compare(cfg.inputs, datasets=cfg.dataset, **shared)
        return Comparison(result, markdown, meta, rmvd_compare.RMVD_COLUMNS, rmvd_compare.rmvd_cells(result))
    if kind == "sweep":
        result, markdown, meta = noise_sweep.run_sweep_compare(cfg.inputs, datasets=cfg.dataset, **shared)
        return Comparison(result, markdown, meta, noise_sweep.SWEEP_COLUMNS, noise_sweep.sweep_cells(result))
    if kind == "correspondence":
        result, markdown, meta = correspondence_compare.run_correspondence_compare(cfg.inputs, **shared)
        return Comparison(result, markdown, meta, correspondence_compare.CORRESPONDENCE_COLUMNS,
                          correspondence_compare.correspondence_cells(result))
    result, markdown, meta = compare.run_compare(cfg.inputs, datasets=cfg.dataset,
                                                 allow_different_manifests=cfg.allow_different_manifests, **shared)
    return Comparison(result, markdown, meta, compare.COLUMNS, compare.compare_cells(result))
