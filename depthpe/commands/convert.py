"""``depthpe convert DATASET --src RAW --out ROOT``: raw dataset downloads -> depthpe scene files."""

from __future__ import annotations

import argparse

from ..config import ConfigError
from depthpe.scenes.convert.options import ConvertConfig
from ..config.options import add_options, config_from_args
from ..config.command_line import require_output_folder

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
               and cameras.json ({"frames": [{"file", "K", "w2c"}]}), a nerfstudio transforms.json
               (its depth_file_path entries name the depth maps) or a COLMAP model (sparse/0), or
               --cameras; or one such folder per scene
  colmap       SRC = a COLMAP dense workspace: images/, sparse/ (or sparse/0), and MVS depth maps
               stereo/depth_maps/<image>.geometric.bin (or .photometric.bin); or one per scene
  wai          SRC = WAI scenes (MapAnything): <scene>/scene_meta.json with images/ and depth/*.exr
               (--depth-modality picks another depth modality); or one scene

Frames are resized so that the longer side is at most --max-side (K updated exactly, depth resampled
nearest-neighbour). Unusable frames (blacked out, no pose, almost no valid depth) are dropped and
counted. Splits follow the DPPE paper: CO3D and MegaSynth draw --val-scenes validation scenes with
--split-seed, ARKitScenes uses the official 3dod Training/Validation folds, WildRGB-D is train only.
folder and colmap put everything in train; wai draws --val-scenes validation scenes.
The split is saved in ROOT/<dataset>/split.json and reused by later runs. Finished scenes are kept
on a rerun (resume an interrupted conversion by running the same command again); a summary is
printed and saved to ROOT/<dataset>/convert_summary.json. folder, colmap and wai then run `depthpe check`
on ROOT/<dataset> (--no-check to skip; exit status 1 if a scene fails it); for the datasets, run
`depthpe check ROOT` afterwards (or pass --check). Settings can also come from --config FILE (YAML,
keys as the options with underscores, e.g. max_side: 320) and key=value overrides.
Across machines: --shard K/N (K = 0..N-1) converts every N-th scene from the K-th and writes no index; in
a Slurm array job (sbatch --array=0-{N-1}) the shard comes from SLURM_ARRAY_TASK_ID and _COUNT. When all
shards are done, the same command without --shard writes the indexes: the result is that of one run
(scripts/slurm/convert_array.sbatch; docs/distributed.md)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, ConvertConfig)


def _check(dataset_dir: str, quiet: bool) -> int:
    """``depthpe check DATASET_DIR``; returns its exit status."""
    from .check import add_arguments as check_arguments, run as check_run

    parser = argparse.ArgumentParser()
    check_arguments(parser)
    print(f"\ndepthpe check {dataset_dir}")
    return check_run(parser.parse_args([dataset_dir, *(["--quiet"] if quiet else [])]))


def _owned(cfg: ConvertConfig):
    """Own ``ROOT/<dataset>`` (``depthpe.files.output_folder``) with the download and the settings that
    change a scene file's content as the fingerprint (``--limit`` and ``--shard`` may change: finished
    scenes are kept). A ``--shard`` run writes alongside the other shards: it registers with the owner
    (``register_shard``: the checks and the manifest under the lock for a moment) and converts unlocked;
    the run without ``--shard`` that writes the indexes owns the folder as usual."""
    import contextlib
    import importlib
    from pathlib import Path

    from ..scenes.convert import converter_module
    from ..files.output_folder import owned_output_folder, register_shard, settings_fingerprint

    name = importlib.import_module(converter_module(cfg.dataset)).NAME
    fingerprint = settings_fingerprint(cfg, leave_out=tuple(f for f in cfg.__dataclass_fields__ if f != "src"),
                                       dataset=cfg.dataset, content=cfg.content_settings())
    if cfg.shard_of_run() is not None:  # --shard, or the task of a Slurm array job
        register_shard(Path(cfg.out) / name, "depthpe convert", fingerprint, replace=cfg.overwrite)
        return contextlib.nullcontext()
    return owned_output_folder(Path(cfg.out) / name, "depthpe convert", fingerprint, replace=cfg.overwrite)


def run(args: argparse.Namespace) -> int:
    from depthpe.scenes.convert import OWN_CAPTURES, convert
    from depthpe.scenes.convert.common import ConvertError, format_summary
    from depthpe.scenes.parallel import WorkerDied

    try:
        cfg = config_from_args(ConvertConfig, args)
        require_output_folder(cfg.out, "--out")
        with _owned(cfg):
            summary = convert(cfg.dataset, cfg.src, cfg.out, cfg)
    except (ConvertError, ConfigError, ValueError, WorkerDied) as err:
        print(f"depthpe convert: error: {err}")
        return 2
    print(format_summary(summary))
    if summary["shard"] is not None:
        k, n = summary["shard"]
        print(f"shard {k}/{n} done (no index written): when every shard is done, run the same command without "
              "--shard (outside the array job) to write the indexes")
        return 0
    if summary["scenes_written"] + summary["scenes_existing"] == 0:
        return 1
    check = cfg.check if cfg.check is not None else cfg.dataset in OWN_CAPTURES
    if not check:
        print(f"next: depthpe check {summary['out']}")
        return 0
    return 1 if _check(summary["out"], not cfg.progress) else 0
