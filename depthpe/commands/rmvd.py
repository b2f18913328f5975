"""``depthpe rmvd --samples FILE.json (--predictions DIR | --model PATH_OR_REPO) --out DIR``: score depth
maps on RMVD, or run a model and score its depth maps."""

from __future__ import annotations

import argparse

from ..rmvd.config import RmvdConfig
from ..config.command_line import add_config_arguments, run_config_command

DESCRIPTION = """\
Score the depth maps another program wrote (--predictions DIR: DIR/<dataset>/<sample>.npy in metres;
the oracle orderings read DIR/<dataset>/<sample>/views_<i>-<j>.npy per view set) on the Robust
Multi-View Depth benchmark's sample lists (--samples: JSON files or folders of them), in one or more
settings: known_poses (no alignment), intrinsics_only, single_view (median-aligned); with several,
each setting reads DIR/<setting>/ in that layout. Predictions are resized to the GT by nearest
neighbour and clipped to [0.1, 100] m; AbsRel and the inliers (max(p/g, g/p) < 1.03) in percent, the
mean over datasets: a datasets x settings table. Writes summary.md, summary.json and per_sample.csv
to --out and prints the table. The nearest and quasi-optimal orderings are oracle numbers (the best
of 1..N source views per sample, chosen with the GT). --model PATH_OR_REPO instead runs a depthpe model
(or vggt-1b, vggt:PATH) on each sample through predict_depth, writes OUT/predictions/ in that layout
with per-sample runtime and peak memory, and scores it the same way; an interrupted run resumes
(--restart starts over). --ause adds the AUSE of the confidence maps. Also writes report.html.
Protocol: docs/rmvd.md."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, RmvdConfig)


def run(args: argparse.Namespace) -> int:
    return run_config_command(args, RmvdConfig, _run)


def _run(cfg: RmvdConfig) -> None:
    if cfg.model is not None:
        from ..rmvd.runner import run_model_rmvd

        run_model_rmvd(cfg)
        return
    from ..rmvd.harness import run_rmvd

    run_rmvd(cfg)
