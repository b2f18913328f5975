"""``depthpe predict --export colmap``: the prediction as a COLMAP model (docs/predict.md#colmap-export).

Layout of ``OUT/export/colmap/``::

    images/<stem>.png          each image as the model saw it (cropped and resized: the cameras' size)
    sparse/0/cameras.bin       one PINHOLE camera per image, at the output size
    sparse/0/images.bin        each image's pose (qvec w, x, y, z; tvec: world-to-camera) and its 2D points
    sparse/0/points3D.bin      the fused points with their colours and tracks

(``.txt`` instead of ``.bin`` with ``--colmap-format txt``). COLMAP puts the centre of the top-left
pixel at (0.5, 0.5): principal points and 2D points are shifted by ``COLMAP_PIXEL_SHIFT``. A point's
track is the image it comes from (at its pixel) and every view that agreed with it in the
multi-view consistency check (where it lands there); its reprojection error is written as 0.

The model files are written here rather than through pycolmap so that the export works without
pycolmap (an optional extra) and does not follow pycolmap's changing API for building a
reconstruction (rigs and frames since 3.12); the format is COLMAP's documented one
(https://colmap.github.io/format.html), and the tests read the files back with pycolmap.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from ..scenes.cameras import COLMAP_PIXEL_SHIFT, rotation_to_quaternion
from ..files import atomic_target
from .files import write_images
from .result import FusedPoints

__all__ = ["PINHOLE_MODEL_ID", "ColmapImage", "colmap_images", "write_colmap_model", "export_colmap"]

#: COLMAP's id of the PINHOLE camera model (params fx, fy, cx, cy).
PINHOLE_MODEL_ID = 1


class ColmapImage:
    """One image of the model: ``name``, ``K`` (3, 3) OpenCV, ``w2c`` (3, 4) OpenCV, ``width``,
    ``height``, and its 2D points ``uv`` (P, 2) OpenCV pixels with the ``point_ids`` (P,) they see."""

    def __init__(self, name: str, K, w2c, width: int, height: int, uv=None, point_ids=None):
        self.name, self.K, self.w2c, self.width, self.height = name, np.asarray(K), np.asarray(w2c), width, height
        self.uv = np.zeros((0, 2)) if uv is None else np.asarray(uv, np.float64)
        self.point_ids = np.zeros(0, np.int64) if point_ids is None else np.asarray(point_ids, np.int64)


def colmap_images(frames, names: list[str], cloud: FusedPoints) -> tuple[list[ColmapImage], list[np.ndarray]]:
    """(images, tracks): one ``ColmapImage`` per frame (``names``: the file names in images/) with the
    observations of ``cloud`` in that frame as 2D points; per point (N,) its track as a (L, 2) int
    array of (image index from 0, index of the 2D point in that image)."""
    order = np.lexsort((cloud.obs_point, cloud.obs_frame))
    frame, point, uv = cloud.obs_frame[order], cloud.obs_point[order], cloud.obs_uv[order]
    starts = np.searchsorted(frame, np.arange(len(frames) + 1))
    rank = np.arange(len(frame)) - starts[frame]  # index of each observation among its frame's 2D points
    images = [ColmapImage(n, fr.K, fr.w2c, fr.depth.shape[1], fr.depth.shape[0], uv[starts[i]:starts[i + 1]],
                          point[starts[i]:starts[i + 1]]) for i, (fr, n) in enumerate(zip(frames, names))]
    by_point = np.argsort(point, kind="stable")
    bounds = np.searchsorted(point[by_point], np.arange(len(cloud.points) + 1))
    pairs = np.stack([frame[by_point], rank[by_point]], axis=1)
    return images, [pairs[bounds[p]:bounds[p + 1]] for p in range(len(cloud.points))]


def _pinhole_params(image: ColmapImage) -> tuple[float, float, float, float]:
    K = image.K
    return (float(K[0, 0]), float(K[1, 1]), float(K[0, 2]) + COLMAP_PIXEL_SHIFT, float(K[1, 2]) + COLMAP_PIXEL_SHIFT)


def _pose(image: ColmapImage) -> tuple[float, ...]:
    """(qw, qx, qy, qz, tx, ty, tz) of the image's world-to-camera."""
    return (*(float(q) for q in rotation_to_quaternion(image.w2c[:, :3])), *(float(t) for t in image.w2c[:, 3]))


def _write_binary(folder: Path, images: list[ColmapImage], cloud: FusedPoints, tracks: list) -> None:
    """cameras.bin, images.bin, points3D.bin (COLMAP's binary format, little-endian)."""
    with atomic_target(folder / "cameras.bin") as tmp, open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(images)))
        for i, im in enumerate(images, 1):
            f.write(struct.pack("<iiQQ4d", i, PINHOLE_MODEL_ID, im.width, im.height, *_pinhole_params(im)))
    with atomic_target(folder / "images.bin") as tmp, open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(images)))
        for i, im in enumerate(images, 1):
            f.write(struct.pack("<I7dI", i, *_pose(im), i) + im.name.encode() + b"\0")
            rows = np.zeros(len(im.uv), dtype=[("x", "<f8"), ("y", "<f8"), ("id", "<i8")])
            rows["x"], rows["y"] = (im.uv + COLMAP_PIXEL_SHIFT).T
            rows["id"] = im.point_ids + 1
            f.write(struct.pack("<Q", len(rows)) + rows.tobytes())
    head = np.zeros(len(cloud.points), dtype=[("id", "<u8"), ("xyz", "<f8", 3), ("rgb", "u1", 3), ("err", "<f8"),
                                               ("n", "<u8")])
    head["id"], head["xyz"], head["rgb"] = np.arange(1, len(head) + 1), cloud.points, cloud.colors
    head["n"] = [len(t) for t in tracks]
    with atomic_target(folder / "points3D.bin") as tmp, open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        for row, track in zip(head, tracks):
            f.write(row.tobytes() + (track + [1, 0]).astype("<u4").tobytes())


def _write_text(folder: Path, images: list[ColmapImage], cloud: FusedPoints, tracks: list) -> None:
    """cameras.txt, images.txt, points3D.txt (COLMAP's text format)."""
    cams = ["# CAMERA_ID MODEL WIDTH HEIGHT PARAMS[]"]
    cams += [f"{i} PINHOLE {im.width} {im.height} " + " ".join(map(repr, _pinhole_params(im)))
             for i, im in enumerate(images, 1)]
    lines = ["# IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME", "# POINTS2D[] as (X, Y, POINT3D_ID)"]
    for i, im in enumerate(images, 1):
        lines.append(" ".join([str(i), *map(repr, _pose(im)), str(i), im.name]))
        lines.append(" ".join(f"{x!r} {y!r} {p + 1}"
                              for (x, y), p in zip((im.uv + COLMAP_PIXEL_SHIFT).tolist(), im.point_ids.tolist())))
    pts = ["# POINT3D_ID X Y Z R G B ERROR TRACK[] as (IMAGE_ID, POINT2D_IDX)"]
    for p, (xyz, rgb, track) in enumerate(zip(cloud.points, cloud.colors, tracks), 1):
        pts.append(" ".join([str(p), *map(repr, xyz.tolist()), *map(str, rgb.tolist()), "0",
                             *(f"{i + 1} {j}" for i, j in track.tolist())]))
    for name, text in (("cameras.txt", cams), ("images.txt", lines), ("points3D.txt", pts)):
        with atomic_target(folder / name) as tmp:
            Path(tmp).write_text("\n".join(text) + "\n", encoding="utf-8")


def write_colmap_model(folder: str | Path, images: list[ColmapImage], cloud: FusedPoints, tracks: list,
                       fmt: str = "bin") -> Path:
    """Write a COLMAP model (cameras, images, points3D; ``fmt`` "bin" or "txt") into ``folder``. Image
    and camera ids are 1..len(images) in order; point ids 1..N in the order of ``cloud``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (_write_binary if fmt == "bin" else _write_text)(folder, images, cloud, tracks)
    return folder


def export_colmap(result, cloud: FusedPoints, stems: list[str], out: str | Path, fmt: str = "bin") -> Path:
    """Write ``OUT/export/colmap/`` (module docstring) for a ``PredictionResult`` and its fused cloud
    (``fuse_result``); ``stems``: the frames' output stems (``files.file_stems``). Returns the folder."""
    root = Path(out) / "export" / "colmap"
    names = write_images(result.frames, stems, root / "images")
    images, tracks = colmap_images(result.frames, names, cloud)
    write_colmap_model(root / "sparse" / "0", images, cloud, tracks, fmt)
    return root
