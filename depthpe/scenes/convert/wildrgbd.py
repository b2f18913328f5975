"""WildRGB-D converter (docs/data.md).

Layout: ``SRC/<category>/scenes/scene_<id>/{rgb/<frame:05d>.png, depth/<frame:05d>.png, metadata,
cam_poses.txt}``. Conventions handled here:

* ``metadata`` is JSON with ``"K"`` as 9 floats stored **column-major** (K = reshape(3, 3).T) and the
  image size ``"w"``, ``"h"`` the intrinsics refer to (K is rescaled if the PNGs have another size);
* ``cam_poses.txt``: one line per frame, ``frame_id`` then a row-major 4x4 **camera-to-world**
  matrix in OpenCV axes, so ``w2c = inverse(c2w)``; frames without a pose line are dropped;
* depth: uint16 PNG in **millimetres** (metres = value / 1000), 0 = hole (LiDAR depth has many);
  ``metric=True``, ``depth_units="m"``.

Known-bad scenes (CUT3R drops box/scene_257) are skipped. Scene id ``<category>__scene_<id>``;
split: everything is train (DPPE does not validate on WildRGB-D, whose depth has holes).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from .common import (
    ConvertOptions,
    FrameDropped,
    RawFrame,
    SceneRef,
    SceneSkipped,
    SceneSource,
    read_rgb,
    read_uint16,
    scale_intrinsics,
)

__all__ = [
    "NAME", "METRIC", "DEPTH_UNITS", "SOURCE", "SPLIT_RULE", "LAYOUT_HINT", "BAD_SCENES",
    "parse_metadata", "parse_cam_poses", "list_scenes", "open_scene",
]

NAME = "wildrgbd"
METRIC = True
DEPTH_UNITS = "m"
SOURCE = "WildRGB-D (wildrgbd/wildrgbd)"
SPLIT_RULE = "train"
LAYOUT_HINT = "SRC/<category>/scenes/scene_<id>/{rgb,depth,metadata,cam_poses.txt}"
DEPTH_SCALE = 1000.0  # PNG units per metre
BAD_SCENES = {"box__scene_257"}


def parse_metadata(path: Path) -> tuple[np.ndarray, int, int]:
    """``metadata`` JSON -> (K (3, 3) float64 from the column-major 9 values, width, height)."""
    meta = json.loads(Path(path).read_text())
    K = np.asarray(meta["K"], np.float64).reshape(3, 3).T
    return K, int(meta["w"]), int(meta["h"])


def parse_cam_poses(path: Path) -> dict[int, np.ndarray]:
    """``cam_poses.txt`` -> {frame_id: (3, 4) OpenCV world-to-camera}, from row-major 4x4 c2w lines."""
    poses = {}
    for line_no, line in enumerate(Path(path).read_text().splitlines(), 1):
        values = line.split()
        if not values:
            continue
        if len(values) != 17:
            raise ValueError(f"{path}:{line_no}: expected a frame id and 16 matrix values, got {len(values)} fields")
        c2w = np.asarray(values[1:], np.float64).reshape(4, 4)
        R, c = c2w[:3, :3], c2w[:3, 3]
        poses[int(float(values[0]))] = np.concatenate([R.T, (-R.T @ c)[:, None]], axis=1)
    return poses


def list_scenes(src: Path, options: ConvertOptions) -> list[SceneRef]:
    """Every ``<category>/scenes/scene_*`` folder holding a ``cam_poses.txt``."""
    refs = []
    for poses in sorted(Path(src).glob("*/scenes/*/cam_poses.txt")):
        scene_dir = poses.parent
        category = scene_dir.parent.parent.name
        refs.append(SceneRef(f"{category}__{scene_dir.name}", str(scene_dir)))
    return refs


def _load_frame(scene_dir: Path, frame: tuple[int, str], poses: dict, K: np.ndarray, size: tuple[int, int]) -> RawFrame:
    frame_id, stem = frame
    if frame_id not in poses:
        raise FrameDropped("no pose")
    image = read_rgb(scene_dir / "rgb" / f"{stem}.png")
    depth = read_uint16(scene_dir / "depth" / f"{stem}.png").astype(np.float32) / DEPTH_SCALE
    W, H = size
    if image.shape[:2] != (H, W):  # metadata w/h is the size K refers to
        K = scale_intrinsics(K, image.shape[1] / W, image.shape[0] / H)
    return RawFrame(image=image, depth=depth, K=K, w2c=poses[frame_id], name=stem)


def open_scene(ref: SceneRef, options: ConvertOptions) -> SceneSource:
    """Frames = the RGB files, in frame-id order; the pose of each comes from cam_poses.txt."""
    if ref.scene_id in BAD_SCENES:
        raise SceneSkipped("known bad scene")
    scene_dir = Path(ref.path)
    K, w, h = parse_metadata(scene_dir / "metadata")
    poses = parse_cam_poses(scene_dir / "cam_poses.txt")
    frames = sorted((int(p.stem), p.stem) for p in (scene_dir / "rgb").glob("*.png") if p.stem.isdigit())
    return SceneSource(frames=frames, load=lambda fr: _load_frame(scene_dir, fr, poses, K, (w, h)),
                       dropped=Counter())
