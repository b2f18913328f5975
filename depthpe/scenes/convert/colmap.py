"""COLMAP converter: a COLMAP dense workspace with MVS depth maps -> scene files (docs/data.md).

Layout of one scene (``SRC`` itself, or every subfolder of ``SRC`` that is one), as written by
``colmap image_undistorter`` + ``colmap patch_match_stereo``::

    images/<name>                               the (undistorted) images
    sparse/ (or sparse/0)                       the model: cameras + images, .bin or .txt
    stereo/depth_maps/<name>.geometric.bin      MVS depth (else <name>.photometric.bin)

Cameras come from ``depthpe.scenes.cameras.read_cameras`` (COLMAP's world-to-camera; the half-pixel
principal point shift is undone there); ``--cameras`` names another source. COLMAP depth maps are
z-depth in the model's unit (``metric=False``, ``depth_units="colmap"``; ``--metric`` when the model
is in metres), 0 = no estimate. A frame without a depth map is dropped ("no depth map"); a scene
without ``stereo/depth_maps`` is skipped (run ``colmap patch_match_stereo`` first).

COLMAP's array format (``read_colmap_depth``): an ASCII header ``width&height&channels&`` followed
by ``width * height * channels`` little-endian float32 values stored column-major over
(width, height, channels), i.e. x fastest, then y, then the channel: for one channel exactly a
row-major (height, width) image.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..format.limits import MAX_FRAME_SIDE
from .common import ConvertOptions, FrameDropped, SceneRef, SceneSkipped, SceneSource
from .folder import Capture, image_files, load_cameras, open_capture, scene_refs

__all__ = [
    "NAME", "METRIC", "DEPTH_UNITS", "SOURCE", "SPLIT_RULE", "LAYOUT_HINT", "units", "list_scenes",
    "open_scene", "read_colmap_depth", "write_colmap_depth",
]

NAME = "colmap"
METRIC = False
DEPTH_UNITS = "colmap"
SOURCE = "COLMAP reconstruction with MVS depth (depthpe convert colmap)"
SPLIT_RULE = "train"
LAYOUT_HINT = "SRC/{images/, sparse/ or sparse/0/, stereo/depth_maps/<image>.geometric.bin}, or one such folder per scene"
DEPTH_KINDS = ("geometric", "photometric")
_MAX_HEADER = 64


def units(options: ConvertOptions) -> tuple[bool, str]:
    """(metric, depth_units): metres with ``--metric``, else COLMAP's arbitrary model unit."""
    return (True, "m") if options.metric else (False, DEPTH_UNITS)


def _is_workspace(folder: Path) -> bool:
    """True if ``folder`` holds ``images/`` and a COLMAP model (in sparse/, sparse/0/ or itself)."""
    return (folder / "images").is_dir() and any(
        (folder / sub / "cameras.bin").is_file() or (folder / sub / "cameras.txt").is_file()
        for sub in ("sparse", "sparse/0", ".")
    )


def list_scenes(src: Path, options: ConvertOptions) -> list[SceneRef]:
    """The workspace ``src`` (``images/`` and a sparse model) or each subfolder of it that is one."""
    return scene_refs(src, _is_workspace)


def read_colmap_depth(path: str | Path) -> np.ndarray:
    """A COLMAP depth map (``*.bin`` of ``stereo/depth_maps``) -> (H, W) float32 (module docstring).
    The claimed size is checked against ``MAX_FRAME_SIDE`` and the payload length before anything is
    allocated. Raises ``FrameDropped`` ("unreadable depth", "truncated or corrupt depth")."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise FrameDropped("unreadable depth") from err
    parts = data[:_MAX_HEADER].split(b"&", 3)
    try:
        width, height, channels = (int(x) for x in parts[:3])
    except ValueError as err:
        raise FrameDropped("unreadable depth") from err
    if len(parts) < 4 or channels != 1 or not (1 <= width <= MAX_FRAME_SIDE and 1 <= height <= MAX_FRAME_SIDE):
        raise FrameDropped("unreadable depth")
    offset = len(b"&".join(parts[:3])) + 1
    if len(data) - offset != 4 * width * height:
        raise FrameDropped("truncated or corrupt depth")
    return np.frombuffer(data, dtype="<f4", offset=offset).reshape(height, width).astype(np.float32)


def write_colmap_depth(path: str | Path, depth: np.ndarray) -> Path:
    """Write an (H, W) depth map in COLMAP's array format (the inverse of ``read_colmap_depth``)."""
    depth = np.asarray(depth, dtype="<f4")
    height, width = depth.shape
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(f"{width}&{height}&1&".encode() + depth.tobytes(order="C"))
    return path


def _depth_finder(depth_dir: Path):
    """``name -> depth_dir/<name>.geometric.bin`` (else ``.photometric.bin``) or None."""
    def find(name: str, cam=None) -> Path | None:
        """The depth map of image ``name`` (its camera ``cam`` is not needed), or None."""
        return next((p for p in (depth_dir / f"{name}.{k}.bin" for k in DEPTH_KINDS) if p.is_file()), None)

    return find


def open_scene(ref: SceneRef, options: ConvertOptions) -> SceneSource:
    """Images of ``images/``, cameras of the sparse model (or ``--cameras``), MVS depth maps."""
    scene_dir = Path(ref.path)
    depth_dir = scene_dir / "stereo" / "depth_maps"
    if not depth_dir.is_dir():
        raise SceneSkipped("no MVS depth maps (stereo/depth_maps/*.bin): run `colmap image_undistorter` and "
                           "`colmap patch_match_stereo` on the reconstruction first")
    capture = Capture(
        images=image_files(scene_dir / "images"),
        cameras=load_cameras(options.cameras or scene_dir),
        find_depth=_depth_finder(depth_dir),
        read_depth=read_colmap_depth,
    )
    return open_capture(capture)
