"""Tiny RMVD sample lists and predictions on disk, for tests and for trying ``depthpe rmvd``.

``write_sample_list`` writes ``root/<dataset>.json`` with ``num_samples`` samples of ``num_views``
views each (keyview 0 at the identity pose, view i translated by ``baseline * i`` metres along x in
the keyview frame, so ``pose_i = [[I, (-baseline * i, 0, 0)], [0, 0, 0, 1]]``), an 8 x 12 GT depth
ramp in metres per sample with one invalid (0) pixel, and the images as named, unwritten paths
(the harness never opens them), or with ``images=True`` as 12 x 8 PNG files (``fixture_image``),
for ``depthpe rmvd --model``. ``write_predictions`` writes GT x ``factor`` in the layout of
``depthpe.rmvd.harness``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..files import atomic_write_bytes
from ..rmvd.harness import prediction_path

__all__ = ["FIXTURE_K", "fixture_pose", "fixture_depth", "fixture_image", "write_sample_list", "write_predictions",
           "write_prediction"]

FIXTURE_K = [[10.0, 0.0, 6.0], [0.0, 10.0, 4.0], [0.0, 0.0, 1.0]]  # pixels of the 12 x 8 images


def fixture_pose(i: int, baseline: float = 0.5) -> list[list[float]]:
    """view_to_key of fixture view ``i``: the camera centre at x = baseline * i in keyview
    coordinates, same orientation, so p_view = p_key - (baseline * i, 0, 0)."""
    return [[1.0, 0.0, 0.0, -baseline * i], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]


def fixture_depth(index: int) -> np.ndarray:
    """GT depth (8, 12) float32 of sample ``index``: 2 + 0.1 * (row + col) + index metres, the
    pixel (0, 0) set to 0 (no GT)."""
    rows, cols = np.mgrid[0:8, 0:12]
    depth = (2.0 + 0.1 * (rows + cols) + index).astype(np.float32)
    depth[0, 0] = 0.0
    return depth


def fixture_image(sample: int, view: int) -> np.ndarray:
    """A 12 x 8 (W x H) uint8 RGB image of ``view`` of sample ``sample``: a seeded random texture."""
    return np.random.default_rng([sample, view]).integers(0, 256, size=(8, 12, 3), dtype=np.uint8)


def _png_bytes(image: np.ndarray) -> bytes:
    import cv2

    ok, data = cv2.imencode(".png", np.ascontiguousarray(image[..., ::-1]))
    assert ok
    return data.tobytes()


def _npy_bytes(arr: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def write_sample_list(root, dataset: str = "toy", num_samples: int = 2, num_views: int = 3,
                      baseline: float = 0.5, images: bool = False) -> Path:
    """Write ``root/<dataset>.json`` and its GT ``root/<dataset>_gt/<name>.npy`` (with ``images``
    also ``root/<dataset>_img/<name>_<i>.png``); returns the JSON path."""
    root = Path(root)
    samples = []
    for n in range(num_samples):
        name = f"{dataset}_{n:03d}"
        atomic_write_bytes(root / f"{dataset}_gt" / f"{name}.npy", _npy_bytes(fixture_depth(n)))
        views = [{"image": f"{dataset}_img/{name}_{i}.png", "K": FIXTURE_K, "pose": fixture_pose(i, baseline)}
                 for i in range(num_views)]
        for i, view in enumerate(views if images else []):
            atomic_write_bytes(root / view["image"], _png_bytes(fixture_image(n, i)))
        samples.append({"name": name, "keyview": 0, "depth": f"{dataset}_gt/{name}.npy", "views": views})
    path = root / f"{dataset}.json"
    atomic_write_bytes(path, json.dumps({"dataset": dataset, "samples": samples}, indent=1).encode("utf-8"))
    return path


def write_predictions(pred_root, sample_list: Path, factor: float, views: tuple[int, ...] | None = None) -> None:
    """GT x ``factor`` for every sample of ``sample_list`` into ``pred_root/<dataset>/<sample>.npy``
    (``views`` None) or ``.../<sample>/views_<i>-<j>.npy`` (the layout of depthpe.rmvd.harness)."""
    doc = json.loads(Path(sample_list).read_text())
    for s in doc["samples"]:
        depth = np.load(Path(sample_list).parent / s["depth"]) * np.float32(factor)
        write_prediction(pred_root, doc["dataset"], s["name"], depth, views)


def write_prediction(pred_root, dataset: str, sample: str, depth: np.ndarray,
                     views: tuple[int, ...] | None = None) -> Path:
    """One predicted depth map (H, W) metres where ``depthpe rmvd --predictions pred_root`` reads it."""
    return atomic_write_bytes(prediction_path(Path(pred_root), dataset, sample, views), _npy_bytes(depth))
