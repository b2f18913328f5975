"""``depthpe synth --out DIR``: write procedural multi-view scenes (no download needed)."""

from __future__ import annotations

import argparse
import sys

from ..config import ConfigError
from ..config.options import add_options, config_from_args
from depthpe.scenes.synth import DEFAULT_HEIGHT, DEFAULT_WIDTH
from depthpe.scenes.synth_config import WORKER_LIMIT, SynthConfig

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
attribute and index field; not combined with --shift.

For a correspondence benchmark in which only geometry can pick the match: --rig stereo|line|curve
(cameras sharing one viewing direction; stereo is rectified), --depth-ratio LO HI (median depth over
the distance from the first to the last camera, log-uniform), --rotation-jitter DEG, and --texture
stripes|checkers (one pattern on every surface, repeating every --texture-period patches of 14 px at
the median depth, aligned with the baseline). Such scenes are named
<split>[_<style>]_rig-<name>_tex-<name>_<i>.h5. The summary gives the parallax of the written
scenes' view pairs in patches (p10, p50, p90). A scene whose depths float16 cannot hold (a camera
facing a wall head-on) is stored as float32 and counted in the summary. See docs/data.md."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``depthpe synth``: the fields of ``SynthConfig``, ``--config FILE`` and ``key=value``."""
    add_options(parser, SynthConfig)


def run(args: argparse.Namespace) -> int:
    from depthpe.scenes.parallel import WorkerDied, resolve_workers
    from depthpe.scenes.synth import SceneGenerationError, format_summary, write_synth_dataset
    from ..files import output_folder_problem

    try:
        cfg = config_from_args(SynthConfig, args)
    except ConfigError as err:
        raise SystemExit(f"depthpe synth: {err}") from None
    problem = output_folder_problem(cfg.out, "--out")
    if problem:
        print(f"error: {problem}", file=sys.stderr, flush=True)
        return 2
    workers = resolve_workers(cfg.workers, limit=WORKER_LIMIT)
    try:
        with _owned(cfg):
            summary = _write(cfg, workers, write_synth_dataset)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 2
    except SceneGenerationError as err:
        print(f"error: {_generation_failure(cfg, err)}", file=sys.stderr, flush=True)
        return 1
    except WorkerDied as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 2
    print(format_summary(summary))
    return 0


def _owned(cfg: SynthConfig):
    """Own ``OUT/synth`` (``depthpe.files.output_folder``: its lock, and no other command's outputs or
    unrecorded files in it). The fingerprint is empty: a synthetic root accumulates scenes of several
    runs (styles, shifts and knobs are in the scene names, and every file records the seed and
    parameters it was made with, so a file of other settings is regenerated, one of the same kept)."""
    from pathlib import Path

    from ..scenes.synth import DATASET_NAME
    from ..files.output_folder import owned_output_folder

    return owned_output_folder(Path(cfg.out) / DATASET_NAME, "depthpe synth", {}, replace=cfg.overwrite)


def _generation_failure(cfg: SynthConfig, err: Exception) -> str:
    """The one line for a scene whose cameras could not be placed (``SceneGenerationError``)."""
    text = f"{err} at {cfg.height}x{cfg.width} pixels"
    if cfg.height > 2 * cfg.width:  # the FOV is horizontal: a tall image sees mostly floor and ceiling
        return (f"{text} (height/width {cfg.height / cfg.width:.3g}): the cameras' field of view is set "
                "horizontally, so an image much taller than wide sees past the room's geometry; use --height at "
                f"most 2 x --width (e.g. --height {2 * cfg.width}) and crop, or a wider --width")
    return f"{text}; try another --seed"


def _write(cfg: SynthConfig, workers: int, write_synth_dataset):
    """``write_synth_dataset`` with the command's settings."""
    return write_synth_dataset(
        cfg.out,
        train_scenes=cfg.train_scenes,
        val_scenes=cfg.val_scenes,
        views=cfg.views,
        height=cfg.height,
        width=cfg.width,
        seed=cfg.seed,
        workers=workers,
        progress=cfg.progress,
        shift=cfg.shift,
        style=cfg.style,
        **cfg.knobs(),
    )
