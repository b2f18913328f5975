"""``depthpe eval --model DIR_OR_ID --data ROOT --out DIR``: depth metrics on held-out scenes."""

from __future__ import annotations

import argparse

from ..config.inference import EvalConfig
from ..config.command_line import add_config_arguments, run_config_command

DESCRIPTION = """\
Evaluate a depthpe model on the held-out scenes of every dataset under --data (ROOT/<dataset>/<split>/
index.json) and print the table (rows native, scene_aligned, image_aligned and the baselines
global_constant and scene_constant). Writes summary.json, metrics_per_image.csv, manifest.json,
summary.md and panels/ to --out. The input width defaults to the width the model was trained at
(training_inputs.json next to the exported model); pass --manifest of an earlier run to evaluate
the very same views. A scene with fewer frames than --views is evaluated with all its frames (a
warning; the count per scene is in summary.json and metrics_per_image.csv). No dataset, an empty
split or dataset, or no scene that could be evaluated is an error (one line, exit status 2).
Interrupted (Ctrl-C, kill, crash)? Rerun the same command: finished scenes are kept in --out/partial/
and only the others are evaluated, with the same results as an uninterrupted run; a rerun with other
settings is an error (--restart discards the partial results), and a rerun of a complete evaluation
does nothing.
Settings can also come from --config FILE (YAML, keys as the options with underscores, e.g.
max_scenes: 4) and key=value overrides. The protocol: docs/evaluation.md."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, EvalConfig)


def run(args: argparse.Namespace) -> int:
    return run_config_command(args, EvalConfig, _run)


def _run(cfg: EvalConfig) -> None:
    from ..evaluation.command import run_evaluation
    from ..cluster.slurm import apply_launch_env

    apply_launch_env()  # `srun --ntasks=N depthpe eval`: the N tasks split the scenes (depthpe.cluster.slurm)

    run_evaluation(cfg)
