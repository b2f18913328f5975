"""Settings of a dataset conversion: ``ConvertOptions`` (what the converters read) and
``ConvertConfig`` (``depthpe convert``'s whole command line: the dataset, --src, --out and --check
on top). Each field's default and help text live here once; the command's options are generated
from them (``depthpe.config.options``). Light module: no torch, OpenCV or h5py import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...config import require
from ...config.options import REQUIRED, check_required, option, overwrite_option
from ..format.depth_codecs import DEFAULT_DEPTH_COMPRESSION, DEPTH_COMPRESSIONS
from ..parallel import resolve_workers
from .registry import CONVERTERS

__all__ = ["CONVERTER_VERSION", "ConvertOptions", "ConvertConfig", "parse_shard", "resolve_workers"]

CONVERTER_VERSION = 1


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` -> (K, N) with 0 <= K < N; ``ValueError`` (one line, with the fix) otherwise."""
    k, sep, n = str(text).partition("/")
    if not (sep and k.strip().isdigit() and n.strip().isdigit() and 0 <= int(k) < int(n)):
        raise ValueError(f"--shard {text}: expected K/N with 0 <= K < N (e.g. --shard 0/4 ... --shard 3/4)")
    return int(k), int(n)


@dataclass
class ConvertOptions:
    """Settings of one conversion run (see ``depthpe convert --help``).

    max_side: longer image side after resizing (pixels; never enlarged). frame_stride: keep every
    k-th frame (1 = all). min_frames: scenes with fewer usable frames are skipped (a scene needs two
    views to be multi-view). min_valid_fraction: frames whose fraction of valid depth pixels is below
    this are dropped. val_scenes / split_seed: the random validation draw (``SPLIT_RULE="random"``).
    limit: convert at most this many scenes (the first ones in sorted order; the split is still drawn
    over all scenes). workers: processes (1 = in this process; 0 = one per available core, at most
    16). split_csv: ARKitScenes split CSV (None = search the download). progress: a progress bar.
    Own captures (``folder``, ``colmap``): cameras: camera source (COLMAP folder or JSON; None =
    searched in the scene folder); depth_scale: 16-bit PNG depth value per camera unit (None = 1000,
    millimetres with metre cameras), and of ``.npy`` depth (None: as stored, or nerfstudio's
    ``depth_unit_scale_factor`` rule in a transforms.json capture: ``folder.npy_factor_of``); metric: the cameras are in metres. WAI: depth_modality: the
    frame modality holding the depth (None = ``depth``). shard: "K/N", convert only every N-th scene
    from the K-th (of those within ``limit``) and write no index (``shard_of_run``).
    """

    max_side: int = option(640, metavar="PX", help="longer image side after resizing, never enlarged")
    frame_stride: int = option(1, metavar="S", help="keep every S-th frame of a sequence (1 = all; the "
                               "training sampler chooses views anyway)")
    min_frames: int = option(2, metavar="F", help="skip scenes with fewer usable frames (a scene needs two views)")
    min_valid_fraction: float = option(0.01, metavar="X", help="drop frames with a smaller fraction of valid "
                                       "depth pixels")
    val_scenes: int = option(2000, metavar="M", help="validation scenes drawn for co3d and megasynth (at most "
                             "half of the scenes); ignored when ROOT/<dataset>/split.json exists")
    split_seed: int = option(0, metavar="S", help="seed of the validation draw")
    limit: Optional[int] = option(None, metavar="K", help="convert at most K scenes (the first in sorted order; "
                                  "for a quick try)")
    workers: int = option(1, metavar="N", help="worker processes; 0 = one per available CPU core, at most 16")
    jpeg_quality: int = option(95, metavar="Q", help="JPEG quality of the stored images")
    depth_dtype: str = option("float16", choices=("float16", "float32"), help="stored depth precision")
    depth_compression: str = option(DEFAULT_DEPTH_COMPRESSION, choices=DEPTH_COMPRESSIONS,
                                    help="HDF5 codec of the stored depth (gzip: smallest; none reads 15-30x "
                                         "faster at 1.7-4.7x the size; docs/data.md)")
    split_csv: Optional[str] = option(None, metavar="CSV", help="arkitscenes: the official "
                                      "3dod_train_val_splits.csv (none: searched under --src; else the "
                                      "Training/Validation folders decide)")
    progress: bool = option(True, flag="--quiet", store_false=True, help="no progress bar")
    cameras: Optional[str] = option(None, metavar="SOURCE", help="folder, colmap: camera source for every scene "
                                    "(a COLMAP model folder, a cameras JSON or a transforms.json; none: "
                                    "cameras.json, transforms.json or the COLMAP model in the scene folder)")
    depth_scale: Optional[float] = option(None, metavar="S", help="folder: depth value per camera unit of 16-bit "
                                          "PNG (none: 1000, millimetres with metre cameras) and .npy depth (none: as "
                                          "stored; transforms.json: its depth_unit_scale_factor, else 1e-3)")
    metric: bool = option(False, help="folder, colmap, wai: the cameras and depth are in metres (recorded as "
                          "metric; wai scenes with scale_type metric are anyway)")
    depth_modality: Optional[str] = option(None, metavar="NAME", help="wai: the frame modality holding the depth "
                                           "(none: depth; e.g. pred_depth/mvsanywhere)")
    shard: Optional[str] = option(None, metavar="K/N", help="convert only shard K of N (K = 0..N-1: every N-th "
                                  "scene from the K-th) and write no index; then the same command without --shard "
                                  "joins the shards into the index (none: SLURM_ARRAY_TASK_ID/COUNT in a Slurm "
                                  "array job, else everything)")

    def __post_init__(self) -> None:
        checks = [
            (self.max_side >= 8, f"max_side must be at least 8 pixels, got {self.max_side}"),
            (self.frame_stride >= 1, f"frame_stride must be >= 1, got {self.frame_stride}"),
            (self.min_frames >= 1, f"min_frames must be >= 1, got {self.min_frames}"),
            (0 <= self.min_valid_fraction <= 1, f"min_valid_fraction must be in [0, 1], got {self.min_valid_fraction}"),
            (self.val_scenes >= 0, f"val_scenes must be >= 0, got {self.val_scenes}"),
            (self.limit is None or self.limit >= 0, f"limit must be >= 0, got {self.limit}"),
            (self.workers >= 0, f"workers must be >= 0 (0 = one per CPU core), got {self.workers}"),
            (self.depth_dtype in ("float16", "float32"), f"depth_dtype must be float16 or float32, got {self.depth_dtype!r}"),
            (self.depth_compression in DEPTH_COMPRESSIONS,
             f"depth_compression must be one of {DEPTH_COMPRESSIONS}, got {self.depth_compression!r}"),
            (self.depth_scale is None or self.depth_scale > 0, f"depth_scale must be positive, got {self.depth_scale}"),
        ]
        for ok, message in checks:
            require(ok, message)
        if self.shard is not None:
            parse_shard(self.shard)

    def shard_of_run(self, environ=None) -> tuple[int, int] | None:
        """The (k, n) shard this run converts: ``shard`` when given, else that of a Slurm array task
        (``depthpe.cluster.slurm.array_shard``), else None (every scene)."""
        import os

        from ...cluster.slurm import array_shard

        if self.shard is not None:
            return parse_shard(self.shard)
        return array_shard(os.environ if environ is None else environ)

    def content_settings(self) -> dict:
        """Settings that change the content of a scene file (stored in it; a mismatch reconverts).
        The own-capture settings appear only when set, so files of the dataset converters keep
        their settings."""
        own = {"cameras": self.cameras, "depth_scale": self.depth_scale, "metric": self.metric or None,
               "depth_modality": self.depth_modality}
        return {
            "converter_version": CONVERTER_VERSION,
            "max_side": self.max_side,
            "frame_stride": self.frame_stride,
            "min_valid_fraction": self.min_valid_fraction,
            "jpeg_quality": self.jpeg_quality,
            "depth_dtype": self.depth_dtype,
            **{k: v for k, v in own.items() if v is not None},
        }


@dataclass
class ConvertConfig(ConvertOptions):
    """``depthpe convert``: ``dataset`` (a layout of ``CONVERTERS``) read from ``src`` into
    ``out/<dataset>/<split>/``. workers: the command's default is 0 (one per core, at most 16), the
    library's 1 (in this process). check: run ``depthpe check`` afterwards (None = on for the own
    captures ``folder``, ``colmap`` and ``wai``, off for the datasets)."""

    dataset: str = option(REQUIRED, positional=True, choices=tuple(sorted(CONVERTERS)),
                          help="which dataset layout to read")
    src: str = option(REQUIRED, metavar="RAW_ROOT", help="root of the raw download")
    out: str = option(REQUIRED, metavar="ROOT", help="data root; scenes go to ROOT/<dataset>/<split>/")
    overwrite: bool = overwrite_option()
    workers: int = option(0, metavar="N", help="worker processes; 0 = one per available CPU core, at most 16")
    check: Optional[bool] = option(None, help="run `depthpe check` on the converted dataset afterwards (none: "
                                   "on for folder, colmap and wai, off for the datasets)")

    def __post_init__(self) -> None:
        check_required(self)
        if self.dataset not in CONVERTERS:
            raise ValueError(f"unknown dataset {self.dataset!r} (one of {', '.join(sorted(CONVERTERS))})")
        super().__post_init__()
