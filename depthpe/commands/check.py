"""``depthpe check ROOT``: validate every scene file under ROOT and measure geometric consistency."""

from __future__ import annotations

import argparse
import json
import math

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
    parser.add_argument("root", help="data root (e.g. data) or one dataset/split folder")
    parser.add_argument("--max-rel-error", type=float, default=0.05,
                        help="fail a scene whose median reprojection disagreement exceeds this "
                             "fraction (default 0.05 = 5%%)")
    parser.add_argument("--min-valid-fraction", type=float, default=0.01,
                        help="fail a scene whose mean fraction of valid depth pixels is below this "
                             "(default 0.01)")
    parser.add_argument("--min-overlap", type=float, default=0.1,
                        help="a view pair counts as overlapping when at least this fraction of the "
                             "reprojected points are co-visible (land on valid depth, not occluded; default 0.1)")
    parser.add_argument("--occlusion-margin", type=float, default=0.1,
                        help="a reprojected point lying more than this fraction behind the other "
                             "view's surface is occluded, not an error (default 0.1 = 10%%)")
    parser.add_argument("--allow-no-overlap", action="store_true",
                        help="do not fail scenes where no view pair overlaps (only for datasets whose "
                             "views are truly disjoint; usually no overlap means broken cameras)")
    parser.add_argument("--pairs", type=int, default=24,
                        help="view pairs examined per scene (default 24; all pairs of small scenes)")
    parser.add_argument("--points", type=int, default=4096,
                        help="pixels reprojected per pair (default 4096)")
    parser.add_argument("--limit", type=int, default=None,
                        help="check at most this many scenes per split (default: all)")
    parser.add_argument("--json", default=None, metavar="FILE",
                        help="also write the per-scene reports to this JSON file")
    parser.add_argument("--show", type=int, default=50,
                        help="table rows to print; failed scenes are always printed (default 50)")
    add_workers_argument(parser, "checking scenes")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def add_workers_argument(parser: argparse.ArgumentParser, doing: str) -> None:
    """``--workers K`` of ``check`` and ``index``: processes ``doing`` the work (0 = one per core, at most 8)."""
    parser.add_argument("--workers", type=_non_negative_int, default=0, metavar="K",
                        help=f"processes {doing} in parallel; 0 = one per available CPU core, at most 8 "
                             "(default 0; fewer when there is too little work to share); 1 = in this process")


def _non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


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

    from ..data.format.check import check_root
    from ..data.parallel import WorkerDied, resolve_workers
    from ..files import atomic_write_bytes

    try:
        reports, index_problems = check_root(
            args.root,
            limit=args.limit,
            progress=not args.quiet,
            workers=resolve_workers(args.workers, limit=8),
            max_rel_error=args.max_rel_error,
            min_valid_fraction=args.min_valid_fraction,
            min_overlap=args.min_overlap,
            max_pairs=args.pairs,
            max_points=args.points,
            allow_no_overlap=args.allow_no_overlap,
            occlusion_margin=args.occlusion_margin,
        )
    except (FileNotFoundError, WorkerDied) as err:
        print(f"error: {err}")
        return 2
    failed = [r for r in reports if not r.ok]
    shown = failed + [r for r in reports if r.ok][: max(0, args.show - len(failed))]
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
    if args.json:
        doc = {"reports": [asdict(r) for r in reports], "index_problems": index_problems}
        atomic_write_bytes(args.json, json.dumps(doc, indent=1, default=float).encode())
    return 1 if failed or index_problems or not reports else 0
