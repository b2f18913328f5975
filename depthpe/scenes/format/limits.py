"""Limits and value rules of the scene format, shared by the reader, ``depthpe check`` and the converters.

Sizes claimed by a file or an index are checked against these limits *before* anything of that
size is allocated, so a small file that claims a huge shape is refused instead of exhausting memory:

=============================  =========  ===============================================================
constant                       value      meaning
=============================  =========  ===============================================================
``MAX_FRAME_SIDE``             8192       largest image height or width of a stored frame (pixels)
``MAX_FRAMES``                 100000     most frames in one scene file
``MIN_FRAME_SIDE``             8          smallest image height or width a scene is usable at: a smaller
                                          frame (a 1x1 "scene") fails ``depthpe check`` and training
                                          skips it like any unusable file (``frame_size_problem``)
``ROTATION_ATOL``              1e-3       tolerance of ``|R R^T - I|`` (max element) and ``|det R - 1|``
``PRINCIPAL_POINT_MAX_OFFSET`` 2.0        the principal point may lie at most this many image sizes from
                                          the image centre: ``|cx - (W - 1) / 2| <= 2 W``, same for cy, H
``MIN_DISTINCT_DEPTHS``        16         a frame's depth cast to its storage dtype keeps at least this
                                          many distinct values (or all it had, when it had fewer)
=============================  =========  ===============================================================

Stored depth must survive its dtype (``depth_storage_problem``): no positive value below the
dtype's smallest normal number (float16: 6.1e-5; below it float16 keeps few significant bits and
rounds to 0 = invalid), none above its largest (float16: 65504; above it: inf), and no frame whose
distinct depths the cast merges into fewer than ``MIN_DISTINCT_DEPTHS`` (or fewer than it had).

A camera is valid when K and w2c are finite, both focal lengths are positive, K's last row is
``[0, 0, 1]``, the rotation block of w2c is orthonormal with det +1 (within ``ROTATION_ATOL``) and
the principal point obeys the rule above (a generous bound: real cameras, crops included, keep it
inside or near the image; a principal point several image sizes away is a unit or layout error).
"""

from __future__ import annotations

import os
from pathlib import PurePosixPath

import numpy as np

__all__ = [
    "w2c_problems",
    "rotation_problems",
    "homogeneous_row_problems",
    "MAX_FRAME_SIDE",
    "MAX_FRAMES",
    "ROTATION_ATOL",
    "PRINCIPAL_POINT_MAX_OFFSET",
    "MIN_DISTINCT_DEPTHS",
    "MIN_FRAME_SIDE",
    "depth_storage_problem",
    "shape_problem",
    "frame_size_problem",
    "camera_problems",
    "index_entry_problem",
    "MIN_SCALE_RATIO",
]

MAX_FRAME_SIDE = 8192
MAX_FRAMES = 100_000
ROTATION_ATOL = 1e-3
PRINCIPAL_POINT_MAX_OFFSET = 2.0
MIN_DISTINCT_DEPTHS = 16
MIN_FRAME_SIDE = 8  # the smallest side depthpe synth and depthpe convert write, too


def shape_problem(num_frames: int, height: int, width: int) -> str | None:
    """Why a claimed scene shape (N, H, W) is outside the limits, or None when it is within them."""
    if not 1 <= num_frames <= MAX_FRAMES:
        return f"claims {num_frames} frames (allowed: 1 to MAX_FRAMES = {MAX_FRAMES})"
    if not (1 <= height <= MAX_FRAME_SIDE and 1 <= width <= MAX_FRAME_SIDE):
        return (f"claims frames of {height}x{width} pixels (HxW; allowed: 1 to MAX_FRAME_SIDE = "
                f"{MAX_FRAME_SIDE} per side)")
    return None


def frame_size_problem(height: int, width: int) -> str | None:
    """Why frames of ``height`` x ``width`` pixels are too small to check, train or evaluate on
    (a side below ``MIN_FRAME_SIDE``), or None. The one rule of ``depthpe check`` and training."""
    if height >= MIN_FRAME_SIDE and width >= MIN_FRAME_SIDE:
        return None
    return (f"frames of {height}x{width} pixels (HxW) are too small: a usable scene has at least "
            f"MIN_FRAME_SIDE = {MIN_FRAME_SIDE} pixels per side (convert it from larger images)")


def depth_storage_problem(depth: np.ndarray, dtype: str) -> str | None:
    """Why (N, H, W) finite, non-negative ``depth`` cannot be stored as ``dtype`` ("float16" or
    "float32") without losing values, or None: positive values below the dtype's smallest normal
    number (they become 0 = invalid, or keep few significant bits), values above its largest (they
    become inf), or a frame whose distinct positive values the cast merges into fewer than
    ``min(MIN_DISTINCT_DEPTHS, distinct values before)``. One line naming what to do. Works frame
    by frame (no copy of the whole scene); a float16 frame costs one cast and one histogram of its
    bit patterns (about 1 ms for 480x640)."""
    fix = ("write it with depth_dtype=\"float32\" (depthpe convert --depth-dtype float32)" if dtype == "float16"
           else "store depth in another unit")
    counts = [_cast_counts(frame, dtype) for frame in depth]
    info = np.finfo(dtype)
    tiny = sum(c[0] for c in counts)
    if tiny:
        smallest = min(float(f[f > 0].min()) for f, c in zip(depth, counts) if c[0])
        return (f"{tiny} depth value(s) lie below {dtype}'s smallest normal number {info.smallest_normal:.3g} "
                f"(smallest {smallest:.3g}): {dtype} would store them as 0 (invalid) or with lost precision; {fix}")
    if any(c[1] for c in counts):
        largest = max(float(f.max()) for f in depth)
        return f"depth up to {largest:.6g} exceeds the {dtype} range (largest {float(info.max):.6g}); {fix}"
    for i, (frame, (_, _, after)) in enumerate(zip(depth, counts)):
        if after < MIN_DISTINCT_DEPTHS:
            before = len(np.unique(frame[frame > 0]))
            if after < min(before, MIN_DISTINCT_DEPTHS):
                return f"frame {i}: {dtype} merges its {before} distinct depth values into {after}; {fix}"
    return None


def _cast_counts(frame: np.ndarray, dtype: str) -> tuple[int, int, int]:
    """(positive values that ``dtype`` stores as 0 or below its smallest normal, values above its
    largest, distinct positive values after the cast) of one (H, W) depth frame. float16 from its
    bit patterns (a histogram: 0 is pattern 0 or 0x8000, subnormals 1..0x3ff, inf 0x7c00); a cast to a type at
    least as wide merges and overflows nothing (reported as ``MIN_DISTINCT_DEPTHS`` distinct values)."""
    info = np.finfo(dtype)
    if frame.dtype.kind == "f" and frame.dtype.itemsize <= info.dtype.itemsize:
        return int(np.count_nonzero((frame > 0) & (frame < info.smallest_normal))), 0, MIN_DISTINCT_DEPTHS
    if dtype != "float16":
        values = frame[frame > 0].astype(np.float64)
        with np.errstate(over="ignore"):
            cast = values.astype(dtype)
        return (int(np.count_nonzero(cast < info.smallest_normal)), int(np.count_nonzero(values > float(info.max))),
                len(np.unique(cast)))
    with np.errstate(over="ignore"):
        bits = np.bincount(frame.astype(np.float16).reshape(-1).view(np.uint16), minlength=0x10000)
    zeros = frame.size - int(np.count_nonzero(frame))  # +0.0 and -0.0 (pattern 0x8000)
    tiny = int(bits[0]) + int(bits[0x8000]) - zeros + int(bits[1:0x400].sum())
    return tiny, int(bits[0x7C00]), int(np.count_nonzero(bits[0x400:0x7C00]))


def _frames_text(bad: np.ndarray) -> str:
    return f"{len(bad)} frame(s), first frame {int(bad[0])}"


def homogeneous_row_problems(w2c: np.ndarray) -> list[str]:
    """Problems of the last row of 4x4 world-to-camera matrices (empty list: all ``[0, 0, 0, 1]``,
    or the matrices are 3x4 and have no such row). w2c: (N, 3, 4) or (N, 4, 4), finite."""
    w2c = np.asarray(w2c, np.float64)
    if w2c.shape[-2] != 4:
        return []
    bad = np.nonzero(np.abs(w2c[:, 3] - [0.0, 0.0, 0.0, 1.0]).max(axis=1) > 1e-6)[0]
    if not len(bad):
        return []
    return [f"w2c's last row is not [0, 0, 0, 1] in {_frames_text(bad)} ({w2c[bad[0], 3].tolist()}; "
            "a 4x4 camera matrix must be a rigid transform)"]


def rotation_problems(w2c: np.ndarray, rotation_atol: float = ROTATION_ATOL) -> list[str]:
    """Problems of the rotation blocks of world-to-camera matrices (empty list: each is orthonormal
    with det +1 within ``rotation_atol``). w2c: (N, 3, 4) or (N, 4, 4), finite."""
    R = np.asarray(w2c, np.float64)[:, :3, :3]
    ortho = np.abs(R @ R.transpose(0, 2, 1) - np.eye(3)).max(axis=(1, 2))
    det = np.linalg.det(R)
    bad = np.nonzero((ortho > rotation_atol) | (np.abs(det - 1) > rotation_atol))[0]
    if not len(bad):
        return []
    i = bad[0]
    return [f"non-orthonormal rotation in {_frames_text(bad)} (|RR^T-I|={ortho[i]:.2g}, "
            f"det={det[i]:.4g}; allowed deviation {rotation_atol:g})"]


def w2c_problems(w2c: np.ndarray, rotation_atol: float = ROTATION_ATOL) -> list[str]:
    """Problems of world-to-camera matrices that must be rigid transforms (empty list: all are):
    non-finite entries (reported alone), a 4x4 last row other than ``[0, 0, 0, 1]``, a rotation block
    that is not orthonormal with det +1. w2c: (N, 3, 4) or (N, 4, 4) OpenCV world-to-camera."""
    w2c = np.asarray(w2c, np.float64)
    finite = np.isfinite(w2c).all(axis=(1, 2))
    if not finite.all():
        return [f"non-finite w2c values in {_frames_text(np.nonzero(~finite)[0])}"]
    return homogeneous_row_problems(w2c) + rotation_problems(w2c, rotation_atol)


def camera_problems(K: np.ndarray, w2c: np.ndarray, height: int, width: int,
                    rotation_atol: float = ROTATION_ATOL) -> list[str]:
    """Problems of the cameras of a scene (empty list: all valid), one line per kind of defect.

    K: (N, 3, 3) pixel intrinsics; w2c: (N, 3, 4) OpenCV world-to-camera; height, width: the
    stored image size. Non-finite values are reported alone (the other rules need finite numbers).
    """
    K, w2c = np.asarray(K, np.float64), np.asarray(w2c, np.float64)
    finite = np.isfinite(K).all(axis=(1, 2)) & np.isfinite(w2c).all(axis=(1, 2))
    if not finite.all():
        return [f"non-finite camera values (K or w2c) in {_frames_text(np.nonzero(~finite)[0])}"]
    problems = []
    fx, fy = K[:, 0, 0], K[:, 1, 1]
    bad = np.nonzero((fx <= 0) | (fy <= 0))[0]
    if len(bad):
        i = bad[0]
        problems.append(f"non-positive focal length in {_frames_text(bad)} (fx={fx[i]:.4g}, fy={fy[i]:.4g})")
    bad = np.nonzero(np.abs(K[:, 2] - [0.0, 0.0, 1.0]).max(axis=1) > 1e-6)[0]
    if len(bad):
        problems.append(f"K's last row is not [0, 0, 1] in {_frames_text(bad)} ({K[bad[0], 2].tolist()})")
    problems += rotation_problems(w2c, rotation_atol)
    cx, cy = K[:, 0, 2], K[:, 1, 2]
    off_x = np.abs(cx - (width - 1) / 2) > PRINCIPAL_POINT_MAX_OFFSET * width
    off_y = np.abs(cy - (height - 1) / 2) > PRINCIPAL_POINT_MAX_OFFSET * height
    bad = np.nonzero(off_x | off_y)[0]
    if len(bad):
        i = bad[0]
        problems.append(
            f"principal point far outside the image in {_frames_text(bad)} (cx={cx[i]:.4g}, cy={cy[i]:.4g} "
            f"for a {height}x{width} image; allowed: within {PRINCIPAL_POINT_MAX_OFFSET:g} image sizes "
            "of the centre)"
        )
    return problems


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _entry_type_problem(e: dict) -> str | None:
    """Why the fields of one index entry have wrong types or values, or None."""
    for key in ("path", "scene_id"):
        if not isinstance(e[key], str) or not e[key]:
            return f"{key} must be a non-empty string, got {e[key]!r}"
    limits = {"num_frames": (0, MAX_FRAMES), "height": (1, MAX_FRAME_SIDE), "width": (1, MAX_FRAME_SIDE)}
    for key, (lo, hi) in limits.items():
        if not _is_int(e[key]) or not lo <= e[key] <= hi:
            return f"{key} must be an integer from {lo} to {hi}, got {e[key]!r}"
    if "metric" in e and not isinstance(e["metric"], bool):
        return f"metric must be true or false, got {e['metric']!r}"
    if "depth_units" in e and not isinstance(e["depth_units"], str):
        return f"depth_units must be a string, got {e['depth_units']!r}"
    return None


def index_entry_problem(e, seen_paths: dict[str, int], seen_ids: dict[str, int], number: int) -> str | None:
    """Why scene entry ``number`` (0-based) of an index is unusable, or None; records its normalized
    path and scene id in ``seen_paths`` / ``seen_ids`` (name -> entry number) to find duplicates.

    Rules: an object with ``path``, ``scene_id``, ``num_frames``, ``height``, ``width`` of the right
    types; ``path`` relative to the split folder and inside it (not absolute, no ``..``); no path
    and no scene id listed twice.
    """
    if not isinstance(e, dict):
        return f"must be an object, got {type(e).__name__}"
    missing = [k for k in ("path", "scene_id", "num_frames", "height", "width") if k not in e]
    if missing:
        return f"missing field(s) {missing}"
    problem = _entry_type_problem(e)
    if problem:
        return problem
    path = PurePosixPath(e["path"].replace("\\", "/"))
    if path.is_absolute() or os.path.isabs(e["path"]) or ".." in path.parts or str(path) == ".":
        return ("path must name a file inside the split folder (relative, no '..'); a scene of another "
                "split or folder must be copied or linked into this one")
    key = str(path)
    if key in seen_paths:
        return f"lists the same file as scene entry {seen_paths[key]} (each scene must be listed once)"
    if e["scene_id"] in seen_ids:
        return f"repeats the scene_id of scene entry {seen_ids[e['scene_id']]} (scene ids must be unique)"
    seen_paths[key], seen_ids[e["scene_id"]] = number, number
    return None


# The default of ``DataConfig.min_scale_ratio``: a sample's camera baseline (mean distance of its
# camera centres to the reference's) must exceed this fraction of its median depth. Relative, so a
# scene gives the same verdict in any unit; ``depthpe check`` fails a scene below it.
MIN_SCALE_RATIO = 1e-3
