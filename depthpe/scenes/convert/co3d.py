"""CO3Dv2 converter (docs/data.md).

Layout: ``SRC/<category>/frame_annotations.jgz`` (gzip JSON list of frame annotations),
``SRC/<category>/sequence_annotations.jgz`` and ``SRC/<category>/<sequence>/{images, depths,
depth_masks}/``; the paths inside the annotations are relative to ``SRC``. Conventions handled here:

* depth PNGs hold the **bit pattern of float16** values in uint16 pixels, multiplied by the frame's
  ``depth.scale_adjustment``; non-finite values are invalid; ``depth_masks`` (binary PNG) mark the
  valid MVS depth; depth above the per-frame 98th percentile (far MVS outliers) is dropped too, as
  VGGT does. Depth is in the arbitrary units of the COLMAP reconstruction: ``metric=False``,
  ``depth_units="colmap"``.
* cameras are PyTorch3D row-vector world-to-view ``X_cam = X_world R + T`` with +X left, +Y up:
  OpenCV ``w2c = [F R^T | F T]`` with ``F = diag(-1, -1, 1)``.
* intrinsics are NDC and depend on ``viewpoint.intrinsics_format``: ``ndc_isotropic`` (the short
  side spans [-1, 1]) or ``ndc_norm_image_bounds`` (each axis spans [-1, 1]); PyTorch3D puts pixel
  centres at i + 0.5, so 0.5 is subtracted from the principal point for OpenCV integer centres.
* blacked-out frames (challenge targets: all-black image) and frames without valid depth are
  dropped by the common runner; frames with degenerate cameras (|T| sum > 1e5) here.

Scene id: ``<category>__<sequence_name>``; split: a seeded random draw of validation sequences.
"""

from __future__ import annotations

import functools
import gzip
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
    match_size,
    read_image_file,
    read_rgb,
    read_uint16,
    scale_intrinsics,
)

__all__ = [
    "NAME", "METRIC", "DEPTH_UNITS", "SOURCE", "SPLIT_RULE", "LAYOUT_HINT",
    "depth_from_png", "pytorch3d_to_opencv_w2c", "ndc_to_pixel_intrinsics",
    "list_scenes", "open_scene",
]

NAME = "co3d"
METRIC = False
DEPTH_UNITS = "colmap"
SOURCE = "CO3Dv2 (facebookresearch/co3d)"
SPLIT_RULE = "random"
LAYOUT_HINT = "SRC/<category>/frame_annotations.jgz and SRC/<category>/<sequence>/images/"
MAX_DEPTH_PERCENTILE = 98.0
DEGENERATE_T_SUM = 1e5
_FLIP = np.diag([-1.0, -1.0, 1.0])


def _read_jgz(path: Path) -> list:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def depth_from_png(png: np.ndarray, scale_adjustment: float) -> np.ndarray:
    """CO3D depth PNG pixels (H, W) uint16 holding float16 bits -> (H, W) float32 depth
    ``float16_view(png) * scale_adjustment``; non-finite or negative values become 0 (invalid)."""
    if png.dtype != np.uint16:
        raise ValueError(f"CO3D depth PNGs are 16-bit; got {png.dtype} (read with cv2.IMREAD_UNCHANGED)")
    depth = png.view(np.float16).astype(np.float32) * np.float32(scale_adjustment)
    depth[~np.isfinite(depth) | (depth < 0)] = 0
    return depth


def pytorch3d_to_opencv_w2c(R: np.ndarray, T: np.ndarray) -> np.ndarray:
    """PyTorch3D world-to-view (row vectors, ``X_cam = X_world @ R + T``, camera +X left, +Y up)
    -> (3, 4) OpenCV world-to-camera ``[F R^T | F T]``, F = diag(-1, -1, 1)."""
    R = np.asarray(R, np.float64).reshape(3, 3)
    T = np.asarray(T, np.float64).reshape(3)
    return np.concatenate([_FLIP @ R.T, (_FLIP @ T)[:, None]], axis=1)


def ndc_to_pixel_intrinsics(focal, principal_point, height: int, width: int, intrinsics_format: str) -> np.ndarray:
    """PyTorch3D NDC intrinsics of an image (height, width) -> (3, 3) OpenCV pixel K.

    ``ndc_isotropic``: s_x = s_y = min(H, W) / 2; ``ndc_norm_image_bounds``: s_x = W / 2, s_y = H / 2.
    fx = f_x s_x, cx = W / 2 - p_x s_x - 0.5 (likewise y): NDC +x points left, and PyTorch3D pixel
    centres are at i + 0.5 while OpenCV's are at i.
    """
    fx_ndc, fy_ndc = (float(v) for v in focal)
    px, py = (float(v) for v in principal_point)
    if intrinsics_format == "ndc_isotropic":
        sx = sy = min(height, width) / 2.0
    elif intrinsics_format == "ndc_norm_image_bounds":
        sx, sy = width / 2.0, height / 2.0
    else:
        raise ValueError(
            f"unknown CO3D intrinsics_format {intrinsics_format!r}; expected 'ndc_isotropic' or "
            "'ndc_norm_image_bounds'"
        )
    return np.array([
        [fx_ndc * sx, 0.0, width / 2.0 - px * sx - 0.5],
        [0.0, fy_ndc * sy, height / 2.0 - py * sy - 0.5],
        [0.0, 0.0, 1.0],
    ])


def list_scenes(src: Path, options: ConvertOptions) -> list[SceneRef]:
    """Every sequence of every category folder holding a ``frame_annotations.jgz``."""
    refs = []
    for ann in sorted(Path(src).glob("*/frame_annotations.jgz")):
        category = ann.parent.name
        seq_file = ann.parent / "sequence_annotations.jgz"
        if seq_file.is_file():
            names = sorted({s["sequence_name"] for s in _read_jgz(seq_file)})
        else:
            names = sorted(_category_frames(str(ann.parent)))
        for name in names:
            refs.append(SceneRef(f"{category}__{name}", str(ann.parent / name),
                                 meta={"category_dir": str(ann.parent), "sequence": name}))
    return refs


@functools.lru_cache(maxsize=2)
def _category_frames(category_dir: str) -> dict[str, list[dict]]:
    """Frame annotations of one category grouped by sequence, sorted by frame_number (cached per
    process: the runner hands a worker consecutive sequences of the same category)."""
    frames: dict[str, list[dict]] = {}
    for fa in _read_jgz(Path(category_dir) / "frame_annotations.jgz"):
        frames.setdefault(fa["sequence_name"], []).append(fa)
    for seq in frames.values():
        seq.sort(key=lambda fa: fa["frame_number"])
    return frames


def _load_frame(root: Path, fa: dict) -> RawFrame:
    vp, dinfo, iinfo = fa.get("viewpoint"), fa.get("depth"), fa["image"]
    if not vp:
        raise FrameDropped("no pose")
    if not dinfo or not dinfo.get("path"):
        raise FrameDropped("no depth")
    T = np.asarray(vp["T"], np.float64)
    if not np.isfinite(T).all() or abs(T.sum()) > DEGENERATE_T_SUM:
        raise FrameDropped("degenerate camera")
    image = read_rgb(root / iinfo["path"])
    H, W = (int(v) for v in iinfo.get("size") or image.shape[:2])
    K = ndc_to_pixel_intrinsics(vp["focal_length"], vp["principal_point"], H, W,
                                vp.get("intrinsics_format", "ndc_norm_image_bounds"))
    if image.shape[:2] != (H, W):  # annotation size is what the intrinsics refer to
        K = scale_intrinsics(K, image.shape[1] / W, image.shape[0] / H)
    scale = dinfo.get("scale_adjustment")
    depth = depth_from_png(read_uint16(root / dinfo["path"]), 1.0 if scale is None else scale)
    if dinfo.get("mask_path"):
        mask = read_image_file(root / dinfo["mask_path"], cv2.IMREAD_GRAYSCALE, "depth mask")
        if mask.shape != depth.shape:
            mask = match_size(mask, *depth.shape)
        depth[mask < (128 if mask.max(initial=0) > 1 else 1)] = 0
    valid = depth > 0
    if valid.any() and MAX_DEPTH_PERCENTILE < 100:
        depth[depth > np.percentile(depth[valid], MAX_DEPTH_PERCENTILE)] = 0
    name = Path(iinfo["path"]).name
    return RawFrame(image=image, depth=depth, K=K, w2c=pytorch3d_to_opencv_w2c(vp["R"], T), name=name)


def open_scene(ref: SceneRef, options: ConvertOptions) -> SceneSource:
    """The frames of one sequence (ordered by ``frame_number``, not by file name)."""
    category_dir = Path(ref.meta["category_dir"])
    frames = _category_frames(str(category_dir)).get(ref.meta["sequence"], [])
    root = category_dir.parent
    return SceneSource(frames=frames, load=lambda fa: _load_frame(root, fa), dropped=Counter())
