"""``depthpe synth --out DIR``: write procedural multi-view scenes (no download needed)."""

from __future__ import annotations

import argparse
import sys

from ..data.synth import (
    DEFAULT_HEIGHT,
    DEFAULT_TRAIN_SCENES,
    DEFAULT_VAL_SCENES,
    DEFAULT_VIEWS,
    DEFAULT_WIDTH,
    SHIFTS,
    STYLES,
)

DESCRIPTION = f"""\
Render procedural MegaSynth-like scenes and write them as depthpe scene files:
DIR/synth/train/<scene_id>.h5, DIR/synth/val/<scene_id>.h5 and an index.json per split.

Each scene is a textured box room (floor, walls, ceiling; often with a missing wall, a window or a
skylight through which rays escape: depth 0, sky in the image) holding 3-8 textured boxes, spheres
and cylinders, seen by V cameras that either orbit a point of interest or walk through the room.
Rendering is exact ray casting, so depth (z-depth, scene units, not metric) and cameras (OpenCV
K and world-to-camera) agree exactly. Scene sizes vary from 3 to 10 units, so the depth scale must
come from the camera poses, not from the images.

The output is deterministic for --seed: scene i of a split depends only on (seed, split, i), train
and val scenes never coincide, and a rerun skips scene files that are already complete (resume an
interrupted run by running the same command again).

The default size {DEFAULT_HEIGHT}x{DEFAULT_WIDTH} is 1.67 x the 84 px quickstart training width,
so even the smallest augmentation crop (scale 0.8: 112 px) is larger than a training image and is
only ever downsampled; pass --height/--width (multiples of 14 are convenient) for larger training
resolutions.

--shift NAME (repeatable) draws the scenes from a shifted distribution instead, to test whether a
model's ranking holds outside its training distribution: scale (rooms 12-30 units around objects
and camera paths of the usual size), baseline (about 5x less camera motion), path (straight forward
or sideways camera paths), fov (30-40 or 80-95 degrees instead of 45-70), objects (10-16 smaller
spheres and cylinders), all. Shifted scenes are named <split>_shift-<label>_<i>.h5 and carry a
`shift` attribute and index field; index.json lists the scenes of the last run only, so write a
shifted set to its own DIR.

--style geometry draws geometry-only scenes: the ratio of the scene size to the camera baseline is
drawn on its own (log-uniform over 2-12), the cameras move along a short path in a random
direction while all looking one random way (no fixation point), and surfaces are flat-lit, so
neither one image nor the cameras alone tell the depth in the normalized unit; only matching
across views (parallax) does. Such scenes are named <split>_geometry_<i>.h5 and carry a `style`
attribute and index field; not combined with --shift. See docs/data.md."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="data root; scenes go to DIR/synth/{train,val}/")
    parser.add_argument("--train-scenes", type=int, default=DEFAULT_TRAIN_SCENES, metavar="N",
                        help=f"number of training scenes (default {DEFAULT_TRAIN_SCENES})")
    parser.add_argument("--val-scenes", type=int, default=DEFAULT_VAL_SCENES, metavar="M",
                        help=f"number of validation scenes (default {DEFAULT_VAL_SCENES})")
    parser.add_argument("--views", type=int, default=DEFAULT_VIEWS, metavar="V",
                        help=f"views (frames) per scene, at least 2 (default {DEFAULT_VIEWS})")
    parser.add_argument("--height", type=int, default=DEFAULT_HEIGHT, metavar="H",
                        help=f"image height in pixels (default {DEFAULT_HEIGHT})")
    parser.add_argument("--width", type=int, default=DEFAULT_WIDTH, metavar="W",
                        help=f"image width in pixels (default {DEFAULT_WIDTH})")
    parser.add_argument("--seed", type=int, default=0, metavar="S",
                        help="dataset seed; the same seed gives the same scenes (default 0)")
    parser.add_argument("--workers", type=int, default=0, metavar="K",
                        help="processes rendering scenes in parallel; 0 = one per available CPU "
                             "core, at most 8 (default 0); 1 renders in this process")
    parser.add_argument("--shift", action="append", default=[], metavar="NAME",
                        choices=[*SHIFTS, "all"],
                        help="draw from a shifted distribution; repeat to combine: "
                             f"{', '.join(SHIFTS)} or all (default: none, the training distribution)")
    parser.add_argument("--style", default="default", choices=sorted(STYLES),
                        help="scene style: default (the training distribution) or geometry "
                             "(depth only from parallax; docs/data.md)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from ..data.parallel import WorkerDied, resolve_workers
    from ..data.synth import SceneGenerationError, format_summary, write_synth_dataset
    from ..files import output_folder_problem

    for name in ("height", "width"):
        if getattr(args, name) < 8:
            raise SystemExit(f"depthpe synth: --{name} must be at least 8 pixels, got {getattr(args, name)}")
    if args.views < 2:
        raise SystemExit(f"depthpe synth: --views must be at least 2 (multi-view scenes), got {args.views}")
    if args.train_scenes < 0 or args.val_scenes < 0 or args.workers < 0 or args.seed < 0:
        raise SystemExit("depthpe synth: scene counts, --seed and --workers must be >= 0")
    problem = output_folder_problem(args.out, "--out")
    if problem:
        print(f"error: {problem}", file=sys.stderr, flush=True)
        return 2
    if args.style != "default" and args.shift:
        raise SystemExit(f"depthpe synth: --style {args.style} cannot be combined with --shift; use one or the other")
    workers = resolve_workers(args.workers, limit=8)
    try:
        summary = _write(args, workers, write_synth_dataset)
    except SceneGenerationError as err:
        print(f"error: {_generation_failure(args, err)}", file=sys.stderr, flush=True)
        return 1
    except WorkerDied as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 2
    print(format_summary(summary))
    return 0


def _generation_failure(args: argparse.Namespace, err: Exception) -> str:
    """The one line for a scene whose cameras could not be placed (``SceneGenerationError``)."""
    text = f"{err} at {args.height}x{args.width} pixels"
    if args.height > 2 * args.width:  # the FOV is horizontal: a tall image sees mostly floor and ceiling
        return (f"{text} (height/width {args.height / args.width:.3g}): the cameras' field of view is set "
                "horizontally, so an image much taller than wide sees past the room's geometry; use --height at "
                f"most 2 x --width (e.g. --height {2 * args.width}) and crop, or a wider --width")
    return f"{text}; try another --seed"


def _write(args: argparse.Namespace, workers: int, write_synth_dataset):
    """``write_synth_dataset`` with the command's arguments."""
    return write_synth_dataset(
        args.out,
        train_scenes=args.train_scenes,
        val_scenes=args.val_scenes,
        views=args.views,
        height=args.height,
        width=args.width,
        seed=args.seed,
        workers=workers,
        progress=not args.quiet,
        shift=args.shift,
        style=args.style,
    )
