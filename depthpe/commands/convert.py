"""``depthpe convert DATASET --src RAW --out ROOT``: raw dataset downloads -> depthpe scene files."""

from __future__ import annotations

import argparse

from ..data.depth_codecs import DEFAULT_DEPTH_COMPRESSION, DEPTH_COMPRESSIONS

HELP = ("convert a raw dataset download (co3d, wildrgbd, arkitscenes, megasynth) or your own captures "
        "(folder, colmap) to scene files")
DESCRIPTION = """\
Convert a raw dataset download into depthpe scene files: ROOT/<dataset>/<split>/<scene_id>.h5 plus an
index.json per split (docs/scene-format.md). Cameras become OpenCV K and world-to-camera in the dataset's own
world frame and units (metric and depth_units are recorded); depth is z-depth with 0 = invalid.

  co3d         SRC = CO3Dv2 root (<category>/frame_annotations.jgz, <category>/<sequence>/...)
  wildrgbd     SRC = WildRGB-D root (<category>/scenes/scene_<id>/{rgb,depth,metadata,cam_poses.txt})
  arkitscenes  SRC = ARKitScenes root (3dod/{Training,Validation}/<video>/<video>_frames/ or
               raw/{Training,Validation}/<video>/, lowres_wide + lowres_depth + intrinsics + .traj)
  megasynth    SRC = extracted MegaSynth zips (**/<uuid>/hanwen/opencv_cameras.json + renderings/)
  folder       SRC = your capture: images/, depth/<image name>.npy|.exr|.png (16-bit, / --depth-scale)
               and cameras.json ({"frames": [{"file", "K", "w2c"}]}) or a COLMAP model (sparse/0), or
               --cameras; or one such folder per scene
  colmap       SRC = a COLMAP dense workspace: images/, sparse/ (or sparse/0), and MVS depth maps
               stereo/depth_maps/<image>.geometric.bin (or .photometric.bin); or one per scene

Frames are resized so that the longer side is at most --max-side (K updated exactly, depth resampled
nearest-neighbour). Unusable frames (blacked out, no pose, almost no valid depth) are dropped and
counted. Splits follow the DPPE paper: CO3D and MegaSynth draw --val-scenes validation scenes with
--split-seed, ARKitScenes uses the official 3dod Training/Validation folds, WildRGB-D is train only.
folder and colmap put everything in train.
The split is saved in ROOT/<dataset>/split.json and reused by later runs. Finished scenes are kept
on a rerun (resume an interrupted conversion by running the same command again); a summary is
printed and saved to ROOT/<dataset>/convert_summary.json. folder and colmap then run `depthpe check`
on ROOT/<dataset> (--no-check to skip; exit status 1 if a scene fails it); for the datasets, run
`depthpe check ROOT` afterwards (or pass --check)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..data.convert import CONVERTERS

    parser.add_argument("dataset", choices=sorted(CONVERTERS), help="which dataset layout to read")
    parser.add_argument("--src", required=True, metavar="RAW_ROOT", help="root of the raw download")
    parser.add_argument("--out", required=True, metavar="ROOT",
                        help="data root; scenes go to ROOT/<dataset>/<split>/")
    parser.add_argument("--workers", type=int, default=0, metavar="N",
                        help="worker processes; 0 = one per available CPU core, at most 16 (default 0)")
    parser.add_argument("--max-side", type=int, default=640, metavar="PX",
                        help="longer image side after resizing, never enlarged (default 640)")
    parser.add_argument("--limit", type=int, default=None, metavar="K",
                        help="convert at most K scenes (the first in sorted order; for a quick try)")
    parser.add_argument("--frame-stride", type=int, default=1, metavar="S",
                        help="keep every S-th frame of a sequence (default 1 = all; the training "
                             "sampler chooses views anyway)")
    parser.add_argument("--min-frames", type=int, default=2, metavar="F",
                        help="skip scenes with fewer usable frames (default 2: a scene needs two views)")
    parser.add_argument("--min-valid-fraction", type=float, default=0.01, metavar="X",
                        help="drop frames with a smaller fraction of valid depth pixels (default 0.01)")
    parser.add_argument("--val-scenes", type=int, default=2000, metavar="M",
                        help="validation scenes drawn for co3d and megasynth (default 2000, at most "
                             "half of the scenes); ignored when ROOT/<dataset>/split.json exists")
    parser.add_argument("--split-seed", type=int, default=0, metavar="S",
                        help="seed of the validation draw (default 0)")
    parser.add_argument("--split-csv", default=None, metavar="CSV",
                        help="arkitscenes: the official 3dod_train_val_splits.csv (default: searched "
                             "under --src; else the Training/Validation folders decide)")
    parser.add_argument("--depth-dtype", choices=("float16", "float32"), default="float16",
                        help="stored depth precision (default float16)")
    parser.add_argument("--depth-compression", choices=DEPTH_COMPRESSIONS, default=DEFAULT_DEPTH_COMPRESSION,
                        help="HDF5 codec of the stored depth (default gzip: smallest; none reads 15-30x "
                             "faster at 1.7-4.7x the size; docs/data.md)")
    parser.add_argument("--jpeg-quality", type=int, default=95, metavar="Q",
                        help="JPEG quality of the stored images (default 95)")
    parser.add_argument("--cameras", default=None, metavar="SOURCE",
                        help="folder, colmap: camera source for every scene (a COLMAP model folder or a "
                             "cameras JSON; default: cameras.json or the COLMAP model in the scene folder)")
    parser.add_argument("--depth-scale", type=float, default=None, metavar="S",
                        help="folder: 16-bit PNG depth value per camera unit (default 1000: millimetres "
                             "with metre cameras)")
    parser.add_argument("--metric", action="store_true",
                        help="folder, colmap: the cameras and depth are in metres (recorded as metric)")
    parser.add_argument("--check", action=argparse.BooleanOptionalAction, default=None,
                        help="run `depthpe check` on the converted dataset afterwards (default: on for "
                             "folder and colmap, off for the datasets)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _options(args: argparse.Namespace):
    """``ConvertOptions`` from the command line (raises ValueError for bad values)."""
    from ..data.convert.common import ConvertOptions
    from .synth import default_workers

    return ConvertOptions(
        max_side=args.max_side,
        frame_stride=args.frame_stride,
        min_frames=args.min_frames,
        min_valid_fraction=args.min_valid_fraction,
        val_scenes=args.val_scenes,
        split_seed=args.split_seed,
        limit=args.limit,
        workers=args.workers or default_workers(16),
        jpeg_quality=args.jpeg_quality,
        depth_dtype=args.depth_dtype,
        depth_compression=args.depth_compression,
        split_csv=args.split_csv,
        progress=not args.quiet,
        cameras=args.cameras,
        depth_scale=args.depth_scale,
        metric=args.metric,
    )


def _check(dataset_dir: str, quiet: bool) -> int:
    """``depthpe check DATASET_DIR``; returns its exit status."""
    from .check import add_arguments as check_arguments, run as check_run

    parser = argparse.ArgumentParser()
    check_arguments(parser)
    print(f"\ndepthpe check {dataset_dir}")
    return check_run(parser.parse_args([dataset_dir, *(["--quiet"] if quiet else [])]))


def run(args: argparse.Namespace) -> int:
    from ..data.convert import OWN_CAPTURES, convert
    from ..data.convert.common import ConvertError, format_summary

    try:
        summary = convert(args.dataset, args.src, args.out, _options(args))
    except (ConvertError, ValueError) as err:
        print(f"depthpe convert: error: {err}")
        return 2
    print(format_summary(summary))
    if summary["scenes_written"] + summary["scenes_existing"] == 0:
        return 1
    check = args.check if args.check is not None else args.dataset in OWN_CAPTURES
    if not check:
        print(f"next: depthpe check {summary['out']}")
        return 0
    return 1 if _check(summary["out"], args.quiet) else 0
