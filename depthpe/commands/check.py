"""``depthpe check ROOT``: validate every scene file under ROOT and measure geometric consistency."""

from __future__ import annotations

import argparse
import json
import math

from ..config import ConfigError
from ..config.command_line import require_output_file
from ..config.options import add_options, config_from_args
from depthpe.scenes.format.check_config import WORKER_LIMIT, CheckConfig

DESCRIPTION = """\
Validate every scene listed in ROOT/**/index.json: the index itself (paths inside the split
folder, no scene listed twice, field types), the file schema and its agreement with the index
(frames, height, width), sizes within the format's limits, finite and non-negative depth, valid
cameras (positive focal lengths, orthonormal rotations, principal point near the image), every
frame's image (truncated or undecodable images fail the scene) and the fraction of valid depth.
A scene that cannot be checked fails alone; the others are still checked. For view pairs the
valid depth of one view is reprojected into the other: points landing behind a clearly nearer
surface (--occlusion-margin) are occluded, hidden from the other view, and reported separately
("occluded"); the median relative depth disagreement of the co-visible points decides (a few
percent is normal for LiDAR/MVS depth, well under 1% for synthetic data). When the data disagree,
the usual convention bugs are tried (c2w stored as w2c, OpenGL camera axes, depth units off by
1000, range stored instead of z-depth); one that fits clearly better fails the scene and is named. Prints a table and exits with status 1 if any scene fails, 0 otherwise.

Scenes are checked by --workers processes (one per core by default), with a progress bar showing
the rate and the time left; the reports are the same, in the same order, for any worker count.

Run it after `depthpe synth` or `depthpe convert`, before training."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``depthpe check``: the fields of ``CheckConfig``, ``--config FILE`` and ``key=value``."""
    add_options(parser, CheckConfig)


def _fmt(x: float, pct: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{100 * x:.3f}%" if pct else f"{x:.3f}"


def format_table(reports) -> str:
    """Markdown-style table of scene reports."""
    header = ("| dataset/split | scene | frames | HxW | valid | pairs | median reproj. | scale | occluded "
              "| status |")
    lines = [header, "|" + "---|" * 10]
    for r in reports:
        status = "ok" if r.ok else "FAIL: " + "; ".join(r.problems)
        if r.ok and r.warnings:
            status = "ok (" + "; ".join(r.warnings) + ")"
        lines.append(
            f"| {r.dataset}/{r.split} | {r.scene_id or r.path} | {r.num_frames} | {r.height}x{r.width} "
            f"| {_fmt(r.valid_fraction, True)} | {r.pairs_used} | {_fmt(r.median_rel_error, True)} "
            f"| {_fmt(r.median_scale)} | {_fmt(r.occluded_fraction, True)} | {status} |"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from depthpe.scenes.format.check import check_root
    from depthpe.scenes.parallel import WorkerDied, resolve_workers
    from ..files import atomic_write_bytes

    try:
        cfg = config_from_args(CheckConfig, args)
        if cfg.json:
            require_output_file(cfg.json, "--json")
        reports, index_problems = check_root(cfg.root, limit=cfg.limit, progress=cfg.progress,
                                             workers=resolve_workers(cfg.workers, limit=WORKER_LIMIT),
                                             **cfg.thresholds())
    except (ConfigError, FileNotFoundError, WorkerDied) as err:
        print(f"error: {err}")
        return 2
    failed = [r for r in reports if not r.ok]
    shown = failed + [r for r in reports if r.ok][: max(0, cfg.show - len(failed))]
    if shown:
        print(format_table(shown))
    if len(shown) < len(reports):
        print(f"({len(reports) - len(shown)} passing scenes not shown; use --show N)")
    for problem in index_problems:
        print(f"index problem: {problem}")
    errs = [r.median_rel_error for r in reports if not math.isnan(r.median_rel_error)]
    summary = (
        f"{len(reports)} scenes checked, {len(failed)} failed, {len(index_problems)} index problem(s)"
    )
    if errs:
        summary += f"; median reprojection disagreement: median {100 * sorted(errs)[len(errs) // 2]:.3f}%, " \
                   f"worst {100 * max(errs):.3f}%"
    print(summary)
    if cfg.json:
        doc = {"reports": [asdict(r) for r in reports], "index_problems": index_problems}
        atomic_write_bytes(cfg.json, json.dumps(doc, indent=1, default=float).encode())
    return 1 if failed or index_problems or not reports else 0
