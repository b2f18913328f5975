"""MegaSynth converter (docs/data.md), from the extracted Hugging Face zips.

Layout: ``SRC/**/<uuid>/hanwen/{opencv_cameras.json, renderings/<i:08d>_rgba.png,
renderings/<i:08d>_depth.exr}`` (``split_0/<uuid>/hanwen/`` or ``data/split_N/<uuid>/hanwen/``
depending on the zip; the public generator writes ``megasynth/`` instead of ``hanwen/``).
Conventions handled here:

* ``opencv_cameras.json`` = ``{"frames": [{"w", "h", "fx", "fy", "cx", "cy", "w2c" (4x4 OpenCV
  world-to-camera), "file_path"}]}``; intrinsics are per frame. The principal point is stored in
  pixel-corner convention (cx = w / 2 for a centred Blender camera), so 0.5 is subtracted for
  OpenCV integer pixel centres (``PIXEL_CENTER_SHIFT``);
* renderings are **RGBA** PNGs (composited on white where alpha < 1): converted to RGB, and pixels
  with alpha < 255 (background, anti-aliased silhouettes whose depth mixes two surfaces) are
  invalid;
* depth is a float32 **OpenEXR** Z pass (read with the ``OpenEXR`` package: OpenCV 5 wheels cannot
  read EXR); pixels that hit nothing hold a huge **background sentinel** (~1e10): only finite depth
  in (0, ``MAX_VALID_DEPTH``) is valid;
* depth is in the generator's normalized scene units: ``metric=False``, ``depth_units="scene"``.

Scene id: the uuid; split: a seeded random draw of validation scenes.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import cv2
import numpy as np

from .common import (
    ConvertOptions,
    FrameDropped,
    RawFrame,
    SceneRef,
    SceneSource,
    find_dirs_with,
    read_image_file,
    scale_intrinsics,
)

__all__ = [
    "NAME", "METRIC", "DEPTH_UNITS", "SOURCE", "SPLIT_RULE", "LAYOUT_HINT", "MAX_VALID_DEPTH",
    "read_exr_depth", "read_rgba", "parse_cameras", "list_scenes", "open_scene",
]

NAME = "megasynth"
METRIC = False
DEPTH_UNITS = "scene"
SOURCE = "MegaSynth (hwjiang/MegaSynth)"
SPLIT_RULE = "random"
LAYOUT_HINT = "SRC/**/<uuid>/hanwen/opencv_cameras.json with renderings/*_rgba.png and *_depth.exr"
MAX_VALID_DEPTH = 1e6  # the background sentinel is ~1e10
PIXEL_CENTER_SHIFT = 0.5
CAMERA_FILE = "opencv_cameras.json"
_DEPTH_CHANNELS = ("R", "Z", "Y", "V", "Depth.V", "Depth.Z", "depth")


def read_exr_depth(path: Path) -> np.ndarray:
    """First depth channel of an OpenEXR file -> (H, W) float32 (values as stored, sentinel included).

    Takes the channel named R, Z, Y, V or Depth.* (Blender writes the Z pass into R, G and B);
    otherwise the first channel in name order. Raises ``FrameDropped("unreadable depth")``.
    """
    try:
        import OpenEXR
    except ImportError as err:  # pragma: no cover - OpenEXR is an install requirement
        raise ImportError("reading MegaSynth depth needs the OpenEXR package: pip install OpenEXR") from err
    try:
        with OpenEXR.File(str(path), separate_channels=True) as f:
            channels = {name: ch.pixels for name, ch in f.channels().items()}
    except Exception as err:  # noqa: BLE001 - OpenEXR raises RuntimeError/OSError on bad files
        raise FrameDropped("unreadable depth") from err
    if not channels:
        raise FrameDropped("unreadable depth")
    name = next((c for c in _DEPTH_CHANNELS if c in channels), sorted(channels)[0])
    depth = np.asarray(channels[name], dtype=np.float32)
    if depth.ndim != 2:
        raise FrameDropped("unreadable depth")
    return depth


def read_rgba(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """An RGBA (or RGB) PNG -> (image (H, W, 3) uint8 RGB, alpha (H, W) uint8; 255 if absent).
    Raises ``FrameDropped`` for a missing, truncated or corrupt file (``common.read_image_file``)."""
    raw = read_image_file(path, cv2.IMREAD_UNCHANGED)
    if raw.ndim != 3 or raw.shape[2] not in (3, 4):
        raise FrameDropped("unreadable image")
    if raw.dtype == np.uint16:
        raw = np.round(raw / 257.0).astype(np.uint8)
    image = cv2.cvtColor(raw[..., :3], cv2.COLOR_BGR2RGB)
    alpha = raw[..., 3] if raw.shape[2] == 4 else np.full(raw.shape[:2], 255, np.uint8)
    return image, alpha


def parse_cameras(path: Path) -> list[dict]:
    """``opencv_cameras.json`` -> per frame {"K" (3, 3) OpenCV, "w2c" (3, 4), "w", "h", "file_path"}."""
    doc = json.loads(Path(path).read_text())
    frames = []
    for i, fr in enumerate(doc["frames"]):
        K = np.array([
            [float(fr["fx"]), 0.0, float(fr["cx"]) - PIXEL_CENTER_SHIFT],
            [0.0, float(fr["fy"]), float(fr["cy"]) - PIXEL_CENTER_SHIFT],
            [0.0, 0.0, 1.0],
        ])
        w2c = np.asarray(fr["w2c"], np.float64)[:3]
        frames.append({"K": K, "w2c": w2c, "w": int(fr["w"]), "h": int(fr["h"]),
                       "file_path": fr.get("file_path") or f"renderings/{i:08d}_rgba.png"})
    return frames


def _depth_path(rgba: Path) -> Path:
    stem = rgba.name[: -len("_rgba.png")] if rgba.name.endswith("_rgba.png") else rgba.stem
    return rgba.with_name(f"{stem}_depth.exr")


def list_scenes(src: Path, options: ConvertOptions) -> list[SceneRef]:
    """Every folder holding an ``opencv_cameras.json`` (up to 5 levels below ``src``)."""
    refs = []
    for scene_dir in find_dirs_with(src, CAMERA_FILE, max_depth=5):
        uuid_dir = scene_dir.parent if scene_dir.name in ("hanwen", "megasynth") else scene_dir
        refs.append(SceneRef(uuid_dir.name, str(scene_dir)))
    return refs


def _load_frame(scene_dir: Path, fr: dict) -> RawFrame:
    rgba = scene_dir / fr["file_path"]
    image, alpha = read_rgba(rgba)
    depth = read_exr_depth(_depth_path(rgba))
    if depth.shape != image.shape[:2]:
        raise FrameDropped("depth and image sizes differ")
    valid = np.isfinite(depth) & (depth > 0) & (depth < MAX_VALID_DEPTH) & (alpha == 255)
    depth = np.where(valid, depth, 0).astype(np.float32)
    K = fr["K"]
    if image.shape[:2] != (fr["h"], fr["w"]):
        K = scale_intrinsics(K, image.shape[1] / fr["w"], image.shape[0] / fr["h"])
    return RawFrame(image=image, depth=depth, K=K, w2c=fr["w2c"], name=Path(fr["file_path"]).name)


def open_scene(ref: SceneRef, options: ConvertOptions) -> SceneSource:
    """Frames in the order of ``opencv_cameras.json`` (36 boundary views, then 12 centre views)."""
    scene_dir = Path(ref.path)
    frames = parse_cameras(scene_dir / CAMERA_FILE)
    return SceneSource(frames=frames, load=lambda fr: _load_frame(scene_dir, fr), dropped=Counter())
