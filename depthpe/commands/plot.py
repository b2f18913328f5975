"""``depthpe plot RUN_DIR ... --out DIR``: validation curves of runs from their val_history.jsonl."""

from __future__ import annotations

import argparse

from ..analysis.settings import PlotConfig
from ..config.options import add_options, config_from_args
from ..files.output_folder import owned_output_folder, settings_fingerprint
from ..config.command_line import USAGE_ERROR_STATUS, report_errors

DESCRIPTION = """\
Draw the validation curves of training runs from each run folder's val_history.jsonl: per dataset
one figure (curves_<dataset>.png and .svg in --out) with one panel per metric (a metric of the
table once per --rows row; `loss` is the total validation loss, `loss.l1` / `loss.gradient` its
terms), one line per run, one colour per group of --group-by (runs that differ only by seed share
it). Raw points are faint; the line on top is a bias-corrected exponential moving average with
decay 0.95 per 1,000 steps (formula: docs/compare.md). Given the folders of `depthpe bench
camera-noise` instead, draws each metric against the noise level (noise_<dataset>.png and .svg:
mean ± std over the seeds of each group; validation losses are left out); given the folders of
`depthpe study correspondence`, draws top-1, within-1 and the lift above the same-position lift
at the last global layer against the training step (correspondence_<setting>.png and .svg)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``depthpe plot``: the fields of ``PlotConfig``, ``--config FILE`` and ``key=value``."""
    add_options(parser, PlotConfig)
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")


def run(args: argparse.Namespace) -> int:
    with report_errors(args.debug):
        cfg = config_from_args(PlotConfig, args)
        with owned_output_folder(cfg.out, "depthpe plot", settings_fingerprint(cfg), replace=cfg.overwrite):
            figures = draw_figures(cfg)
        for figure in figures:
            print(f"wrote {figure.png} and {figure.svg} ({len(figure.panels)} panels)")
        return 0
    return USAGE_ERROR_STATUS


def draw_figures(cfg: PlotConfig) -> list:
    """The figures of run folders (``plotting.run_plot``), camera-noise sweeps
    (``noise_sweep.run_sweep_plot``) or correspondence folders (``correspondence_plot``); a mix is a
    ``ConfigError``. The caller owns ``cfg.out`` (``run``, or a camera-noise sweep in its own folder)."""
    from depthpe.studies.correspondence.plot import plot_correspondence
    from depthpe.studies.camera_noise.sweep import run_sweep_plot
    from ..analysis.plotting import run_plot
    from .folder_kinds import one_kind

    kind = one_kind(cfg.runs)
    if kind == "correspondence":
        return plot_correspondence(cfg.runs, cfg.out, group_by=cfg.group_by)
    if kind == "rmvd":
        from ..config import ConfigError

        raise ConfigError(f"{cfg.runs[0]} is a depthpe rmvd output: it has no curves to plot (compare it with "
                          "depthpe compare)")
    draw = run_sweep_plot if kind == "sweep" else run_plot
    return draw(cfg.runs, cfg.out, group_by=cfg.group_by, metrics=cfg.metrics, rows=cfg.rows)
