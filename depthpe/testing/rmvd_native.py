"""Tiny fixtures of the five RMVD test sets in their native layouts, with known geometry, for tests
and for trying ``depthpe rmvd --data-root``.

``write_native_fixture(root, dataset)`` writes ``root/<dataset>/`` in that dataset's native layout
(the paths, file names and depth encodings of ``depthpe.rmvd.datasets``) and a sample list
``root/lists/<dataset>.json`` in the shipped lists' form (``"format": dataset``, ``"root": null``:
score it with ``--data-root <dataset>=root/<dataset>``).

The geometry: frame ``f`` has the world-to-camera pose ``frame_w2c(f)`` (the camera centre at
``(0.3 f, 0.05 f, 0)`` m, turned by ``0.02 f`` rad about the y axis, OpenCV axes), K =
``FIXTURE_K`` for 12 x 8 images, and every keyview sees the plane ``z_world = plane_z(n)`` of its
sample ``n``, so its GT depth is known in closed form (``plane_depth``). Each sample has
``NUM_VIEWS`` consecutive frames; the keyview is the middle one for KITTI and ScanNet (as there:
source views before and after it) and the first for the others. One GT pixel, (0, 0), is invalid
in the dataset's own encoding (0, or ``inf`` for ETH3D, NaN for Tanks and Temples). ScanNet's
colour frames are written at twice the size, with ``image_size`` [8, 12] in the list (K is for
that size), as the real export is larger than the 640 x 480 its K is for.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ..files import atomic_write_bytes
from ..rmvd.harness import read_ground_truth
from ..rmvd.samples import load_sample_list
from .rmvd_samples import write_prediction

__all__ = ["NATIVE_DATASETS", "FIXTURE_K", "FIXTURE_HW", "NUM_VIEWS", "NativeFixture", "frame_w2c", "plane_z",
           "plane_depth", "write_native_fixture", "write_native_predictions"]

NATIVE_DATASETS = ("kitti", "scannet", "eth3d", "dtu", "tanks_and_temples")
FIXTURE_HW = (8, 12)  # (H, W) pixels of the images the K is for
FIXTURE_K = np.array([[10.0, 0.0, 6.0], [0.0, 10.0, 4.0], [0.0, 0.0, 1.0]])
NUM_VIEWS = 3
_KEYVIEW = {"kitti": 1, "scannet": 1}  # the others: 0


@dataclass(frozen=True)
class NativeFixture:
    """What ``write_native_fixture`` wrote: the sample list, the native root to give as
    ``--data-root DATASET=data_root``, and per sample its frames (``frames[n]``, in view order)."""

    dataset: str
    list_path: Path
    data_root: Path
    frames: tuple[tuple[int, ...], ...]

    @property
    def data_root_option(self) -> str:
        """``DATASET=DIR``, the value of ``--data-root``."""
        return f"{self.dataset}={self.data_root}"


def frame_w2c(frame: int) -> np.ndarray:
    """World-to-camera (4, 4) float64 of fixture frame ``frame``: centre (0.3 f, 0.05 f, 0) m,
    rotated by 0.02 f rad about y (``p_cam = w2c @ p_world``)."""
    a = 0.02 * frame
    R = np.array([[np.cos(a), 0.0, -np.sin(a)], [0.0, 1.0, 0.0], [np.sin(a), 0.0, np.cos(a)]])
    centre = np.array([0.3 * frame, 0.05 * frame, 0.0])
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, -R @ centre
    return T


def plane_z(sample: int) -> float:
    """The world plane z = plane_z(n) metres that sample ``n``'s keyview sees."""
    return 3.0 + sample


def plane_depth(frame: int, z_plane: float, hw: tuple[int, int] = FIXTURE_HW) -> np.ndarray:
    """Depth (H, W) float64 metres along the optical axis of frame ``frame`` looking at the plane
    ``z_world = z_plane`` (pixel centres at integer coordinates, K = ``FIXTURE_K``)."""
    w2c = frame_w2c(frame)
    R, t = w2c[:3, :3], w2c[:3, 3]
    v, u = np.mgrid[0:hw[0], 0:hw[1]].astype(np.float64)
    rays = np.stack([(u - FIXTURE_K[0, 2]) / FIXTURE_K[0, 0], (v - FIXTURE_K[1, 2]) / FIXTURE_K[1, 1],
                     np.ones_like(u)], axis=-1)  # camera rays with z = 1: the depth is the ray's scale
    centre_z = (-R.T @ t)[2]
    return (z_plane - centre_z) / (rays @ R)[..., 2]  # (R^T ray)_z for each ray


def _relative_pose(frame: int, key_frame: int) -> list:
    """view_to_key of ``frame`` (``p_view = pose @ p_key``): w2c(frame) @ inv(w2c(key))."""
    return (frame_w2c(frame) @ np.linalg.inv(frame_w2c(key_frame))).tolist()


def _image_bytes(frame: int, ext: str, scale: int = 1) -> bytes:
    """A small RGB test image (H * scale, W * scale) encoded as ``ext`` (".png" / ".jpg")."""
    h, w = FIXTURE_HW[0] * scale, FIXTURE_HW[1] * scale
    v, u = np.mgrid[0:h, 0:w]
    rgb = np.stack([(u * 20 + frame * 7) % 256, (v * 30) % 256, np.full_like(u, 128)], axis=-1).astype(np.uint8)
    ok, buf = cv2.imencode(ext, rgb[..., ::-1])
    assert ok
    return buf.tobytes()


def _png16(values: np.ndarray) -> bytes:
    ok, buf = cv2.imencode(".png", np.asarray(values, dtype=np.uint16))
    assert ok
    return buf.tobytes()


def _pfm(values: np.ndarray) -> bytes:
    """A greyscale little-endian PFM (bottom row first) of ``values`` (H, W)."""
    h, w = values.shape
    return f"Pf\n{w} {h}\n-1.0\n".encode("ascii") + np.ascontiguousarray(values[::-1], dtype="<f4").tobytes()


def _npz(values: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, values.astype(np.float32))  # stored as arr_0, as in the RMVD release
    return buf.getvalue()


def _encode_depth(dataset: str, depth: np.ndarray) -> bytes:
    """``depth`` (H, W) metres in ``dataset``'s native encoding, pixel (0, 0) invalid in its own way."""
    depth = depth.copy()
    if dataset in ("kitti", "scannet"):
        scale = 256.0 if dataset == "kitti" else 1000.0
        stored = np.round(depth * scale)
        stored[0, 0] = 0
        return _png16(stored)
    if dataset == "eth3d":
        depth[0, 0] = np.inf
        return np.ascontiguousarray(depth, dtype="<f4").tobytes()
    if dataset == "dtu":
        depth *= 1000.0  # millimetres
        depth[0, 0] = 0.0
        return _pfm(depth)
    depth[0, 0] = np.nan
    return _npz(depth)


def _layout(dataset: str, frame: int) -> tuple[str, str]:
    """(image path, GT depth path) of ``frame`` relative to the native root, as the dataset names them."""
    if dataset == "kitti":
        drive = "2011_09_26_drive_0001_sync"
        return (f"raw_data/2011_09_26/{drive}/image_02/data/{frame:010d}.png",
                f"depth_completion_prediction/val/{drive}/proj_depth/groundtruth/image_02/{frame:010d}.png")
    if dataset == "scannet":
        return f"scene0000_00/color/{frame}.jpg", f"scene0000_00/depth/{frame}.png"
    if dataset == "eth3d":
        return (f"courtyard/images/dslr_images/DSC_{frame:04d}.JPG",
                f"courtyard/ground_truth_depth/dslr_images/DSC_{frame:04d}.JPG")
    if dataset == "dtu":
        return f"scan1/images/{frame:08d}.png", f"scan1/gt_depths/{frame:08d}.pfm"
    return f"Barn/images/{frame:08d}.jpg", f"Barn/depth/{frame + 1:06d}.npz"


def _sample_entry(dataset: str, data_root: Path, n: int, frames: tuple[int, ...]) -> dict:
    """Write one sample's images and keyview GT under ``data_root``; returns its list entry."""
    keyview = _KEYVIEW.get(dataset, 0)
    key_frame = frames[keyview]
    views = []
    for frame in frames:
        image, _ = _layout(dataset, frame)
        scale = 2 if dataset == "scannet" else 1
        atomic_write_bytes(data_root / image, _image_bytes(frame, Path(image).suffix.lower(), scale))
        view = {"image": image, "K": FIXTURE_K.tolist(), "pose": _relative_pose(frame, key_frame)}
        if dataset == "scannet":
            view["image_size"] = list(FIXTURE_HW)
        views.append(view)
    depth_path = _layout(dataset, key_frame)[1]
    atomic_write_bytes(data_root / depth_path, _encode_depth(dataset, plane_depth(key_frame, plane_z(n))))
    names = {"kitti": f"2011_09_26_drive_0001/key{key_frame:02d}", "scannet": f"scene0000_00_frame-{key_frame:06d}",
             "eth3d": f"courtyard/key{key_frame:06d}", "dtu": f"scan1/key{key_frame:06d}"}
    entry = {"name": names.get(dataset, f"Barn/key{key_frame:06d}"), "keyview": keyview, "depth": depth_path,
             "views": views}
    if dataset == "dtu":
        entry["depth_range"] = [0.425, 0.935]
    return entry


def write_native_fixture(root, dataset: str, num_samples: int = 2) -> NativeFixture:
    """Write ``root/<dataset>/`` (native layout, ``num_samples`` samples of ``NUM_VIEWS`` views) and
    ``root/lists/<dataset>.json``; returns where they are (module docstring: the geometry)."""
    if dataset not in NATIVE_DATASETS:
        raise ValueError(f"dataset must be one of {', '.join(NATIVE_DATASETS)}, got {dataset!r}")
    root = Path(root)
    data_root = root / dataset
    frames = tuple(tuple(range(1 + 5 * n, 1 + 5 * n + NUM_VIEWS)) for n in range(num_samples))
    samples = [_sample_entry(dataset, data_root, n, f) for n, f in enumerate(frames)]
    doc = {"dataset": dataset, "format": dataset, "root": None, "samples": samples}
    list_path = atomic_write_bytes(root / "lists" / f"{dataset}.json", json.dumps(doc, indent=1).encode("utf-8"))
    return NativeFixture(dataset, list_path, data_root, frames)


def write_native_predictions(pred_root, fixture: NativeFixture, factor: float) -> None:
    """GT x ``factor`` of every sample of ``fixture`` (the GT as the native reader returns it) where
    ``depthpe rmvd --predictions pred_root`` reads it."""
    sample_list = load_sample_list(fixture.list_path, {fixture.dataset: fixture.data_root})
    for sample in sample_list.samples:
        write_prediction(pred_root, sample_list.dataset, sample.name, read_ground_truth(sample) * factor)
