"""``depthpe study NAME``: the studies of ``depthpe.studies`` (experiments that ask a question of the
encodings and write tables and figures); benchmarks of speed and memory are ``depthpe bench``."""

from __future__ import annotations

import argparse

from .subcommands import add_lazy_subcommands

DESCRIPTION = """\
Run a study: an experiment that asks a question of the encodings (does the attention find the true
match? how does depth degrade with wrong cameras? how much do the cameras alone explain?). Each
study's settings, runner, tables and figures live in depthpe/studies/NAME/, next to the shell script
that runs it end to end; its results are in docs/results.md."""

# name -> (module, one-line help); a study's module is imported only when it runs.
STUDIES = {
    "correspondence": ("depthpe.studies.correspondence.runner", "train the global attention of a tiny model on true "
                       "cross-view matches (correspondence loss) per encoding; per layer top-1 / within-1 accuracy "
                       "and lift, with more views, zoom and pose noise"),
    "camera-noise": ("depthpe.studies.camera_noise.runner", "evaluate models at a list of input-camera noise levels "
                     "(rotation, translation, focal): per-level table with paired intervals, metric-vs-noise figure"),
    "cameras-only": ("depthpe.studies.geometry.cameras_only", "how well the cameras alone predict the depth scale: a "
                     "ridge regression against the constant baselines (geometry-only scenes: docs/data.md)"),
    "lift-table": ("depthpe.studies.geometry.lift_table", "correspondence lift per layer and group across the runs "
                   "of a study, from their `depthpe probe attention` summaries (Markdown)"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_lazy_subcommands(parser, STUDIES, dest="study", run_key="_study_run", metavar="STUDY")


def run(args: argparse.Namespace) -> int:
    from ..config.command_line import USAGE_ERROR_STATUS, report_errors

    with report_errors():
        return int(args._study_run(args) or 0)
    return USAGE_ERROR_STATUS
