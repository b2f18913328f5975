"""ARKitScenes converter (docs/data.md), low-resolution RGB-D + poses.

Layouts (both accepted; ``--src`` may be the download root or any folder above the videos):
``3dod/{Training,Validation}/<vid>/<vid>_frames/{lowres_wide, lowres_depth, lowres_wide_intrinsics,
lowres_wide.traj}`` and ``raw/{Training,Validation}/<vid>/{...same...}``. Conventions handled here:

* ``lowres_wide.traj``: one line per pose, ``timestamp rx ry rz tx ty tz`` with an axis-angle
  rotation (radians) and a translation (metres) of the **world-to-camera** transform in OpenCV
  axes: ``w2c = [Rodrigues(r) | t]``;
* frames are ``lowres_wide/<vid>_<ts>.png`` (RGB) and ``lowres_depth/<vid>_<ts>.png`` (uint16
  **millimetres**, 0 = invalid) with 3-decimal timestamps; a frame takes the pose with the nearest
  trajectory timestamp if it lies within ``TIME_TOLERANCE_S`` (5 ms, as Apple's loader), otherwise
  it is dropped ("no pose within tolerance");
* intrinsics are per frame: ``lowres_wide_intrinsics/<vid>_<ts>.pincam`` holds ``w h fx fy cx cy``;
  the file of ts, ts - 1 ms or ts + 1 ms is used (Apple's lookup);
* ``metric=True``, ``depth_units="m"``; images stay in sensor orientation.

Split: the official 3dod folds from ``3dod_train_val_splits.csv`` (columns video_id, visit_id,
fold with Training / Validation), found under ``--src`` or given with ``--split-csv``; without a
CSV the Training / Validation folder of each video decides. Scene id: the video id.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import cv2
import numpy as np

from .common import (
    ConvertError,
    ConvertOptions,
    FrameDropped,
    RawFrame,
    SceneRef,
    SceneSkipped,
    SceneSource,
    find_dirs_with,
    read_rgb,
    read_uint16,
    scale_intrinsics,
)

__all__ = [
    "NAME", "METRIC", "DEPTH_UNITS", "SOURCE", "SPLIT_RULE", "LAYOUT_HINT", "TIME_TOLERANCE_S",
    "parse_traj", "match_poses", "read_pincam", "read_split_csv", "list_scenes", "open_scene",
]

NAME = "arkitscenes"
METRIC = True
DEPTH_UNITS = "m"
SOURCE = "ARKitScenes lowres_wide + lowres_depth (apple/ARKitScenes)"
SPLIT_RULE = "official"
LAYOUT_HINT = "SRC/3dod/{Training,Validation}/<video_id>/<video_id>_frames/lowres_wide.traj"
TIME_TOLERANCE_S = 0.005
DEPTH_SCALE = 1000.0  # PNG units per metre
SPLIT_CSV_NAMES = ("3dod_train_val_splits.csv", "raw_train_val_splits.csv")
FOLDS = {"Training": "train", "Validation": "val"}


def parse_traj(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``lowres_wide.traj`` -> (timestamps (N,) float64 sorted, w2c (N, 3, 4) OpenCV world-to-camera)
    with ``R = Rodrigues(rx, ry, rz)`` and ``t = (tx, ty, tz)``."""
    rows = [line.split() for line in Path(path).read_text().splitlines() if line.strip()]
    if not rows:
        raise ValueError(f"{path}: empty trajectory")
    data = np.asarray(rows, np.float64)
    if data.shape[1] != 7:
        raise ValueError(f"{path}: expected 7 columns (ts rx ry rz tx ty tz), got {data.shape[1]}")
    order = np.argsort(data[:, 0], kind="stable")
    data = data[order]
    w2c = np.zeros((len(data), 3, 4))
    for i, row in enumerate(data):
        w2c[i, :, :3] = cv2.Rodrigues(row[1:4].reshape(3, 1))[0]
        w2c[i, :, 3] = row[4:7]
    return data[:, 0], w2c


def match_poses(frame_ts: np.ndarray, traj_ts: np.ndarray, tolerance: float = TIME_TOLERANCE_S) -> np.ndarray:
    """Index of the trajectory timestamp nearest to each frame timestamp, or -1 when the nearest is
    farther than ``tolerance`` seconds. frame_ts: (F,), traj_ts: (N,) sorted -> (F,) int."""
    frame_ts = np.asarray(frame_ts, np.float64)
    right = np.clip(np.searchsorted(traj_ts, frame_ts), 0, len(traj_ts) - 1)
    left = np.clip(right - 1, 0, len(traj_ts) - 1)
    nearest = np.where(np.abs(traj_ts[left] - frame_ts) <= np.abs(traj_ts[right] - frame_ts), left, right)
    # a float epsilon so that a pose exactly at the tolerance is not lost to rounding
    ok = np.abs(traj_ts[nearest] - frame_ts) <= tolerance + 1e-9
    return np.where(ok, nearest, -1)


def read_pincam(path: Path) -> tuple[np.ndarray, int, int]:
    """A ``.pincam`` file ``w h fx fy cx cy`` -> (K (3, 3), width, height)."""
    w, h, fx, fy, cx, cy = (float(v) for v in Path(path).read_text().split()[:6])
    return np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1.0]]), int(w), int(h)


def read_split_csv(path: Path) -> dict[str, str]:
    """Official split CSV (video_id, visit_id, fold) -> {video_id: "train" | "val"}."""
    folds = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            fold = FOLDS.get(row.get("fold", "").strip())
            if fold and row.get("video_id"):
                folds[row["video_id"].strip()] = fold
    if not folds:
        raise ConvertError(f"{path}: no rows with a Training/Validation fold (columns video_id, visit_id, fold)")
    return folds


def _find_split_csv(src: Path) -> Path | None:
    for name in SPLIT_CSV_NAMES:
        for depth in range(4):
            hits = sorted(src.glob("*/" * depth + name))
            if hits:
                return hits[0]
    return None


def list_scenes(src: Path, options: ConvertOptions) -> list[SceneRef]:
    """Every folder holding a ``lowres_wide.traj``; the fold comes from the split CSV (or the
    Training / Validation folder name)."""
    src = Path(src)
    csv_path = Path(options.split_csv) if options.split_csv else _find_split_csv(src)
    if options.split_csv and not csv_path.is_file():
        raise ConvertError(f"--split-csv {csv_path} does not exist")
    folds = read_split_csv(csv_path) if csv_path else {}
    refs = []
    for video_dir in find_dirs_with(src, "lowres_wide.traj", max_depth=5):
        vid = video_dir.name[: -len("_frames")] if video_dir.name.endswith("_frames") else video_dir.name
        split = folds.get(vid)
        if split is None and not folds:
            split = next((FOLDS[p] for p in reversed(video_dir.parts) if p in FOLDS), None)
        refs.append(SceneRef(vid, str(video_dir), split=split, meta={"video_id": vid}))
    return refs


def _frame_time(path: Path) -> float:
    return float(path.stem.rsplit("_", 1)[1])


def _load_frame(video_dir: Path, vid: str, frame: tuple[float, str, int], w2c: np.ndarray) -> RawFrame:
    ts, stem, pose_index = frame
    if pose_index < 0:
        raise FrameDropped("no pose within tolerance")
    pincam = None
    for cand in (stem, f"{vid}_{ts - 0.001:.3f}", f"{vid}_{ts + 0.001:.3f}"):
        p = video_dir / "lowres_wide_intrinsics" / f"{cand}.pincam"
        if p.is_file():
            pincam = p
            break
    if pincam is None:
        raise FrameDropped("no intrinsics")
    K, w, h = read_pincam(pincam)
    image = read_rgb(video_dir / "lowres_wide" / f"{stem}.png")
    depth = read_uint16(video_dir / "lowres_depth" / f"{stem}.png").astype(np.float32) / DEPTH_SCALE
    if image.shape[:2] != (h, w):
        K = scale_intrinsics(K, image.shape[1] / w, image.shape[0] / h)
    return RawFrame(image=image, depth=depth, K=K, w2c=w2c[pose_index], name=stem)


def open_scene(ref: SceneRef, options: ConvertOptions) -> SceneSource:
    """Frames = the ``lowres_wide`` PNGs in time order, each matched to the nearest pose."""
    if ref.split is None:
        raise SceneSkipped("video not in the official split")
    video_dir = Path(ref.path)
    vid = ref.meta["video_id"]
    traj_ts, w2c = parse_traj(video_dir / "lowres_wide.traj")
    files = sorted(video_dir.glob("lowres_wide/*.png"), key=_frame_time)
    times = np.array([_frame_time(p) for p in files])
    pose_index = match_poses(times, traj_ts) if len(files) else np.zeros(0, int)
    frames = [(float(t), p.stem, int(k)) for t, p, k in zip(times, files, pose_index)]
    return SceneSource(frames=frames, load=lambda fr: _load_frame(video_dir, vid, fr, w2c), dropped=Counter())
