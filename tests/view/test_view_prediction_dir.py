"""``depthpe view`` of a `depthpe predict` folder (``view.loaders.load_prediction_dir``): each frame's
image is the saved input in RGB channel order, pixel for pixel, and K and w2c are those of
prediction.json."""

from __future__ import annotations

import numpy as np

from depthpe.prediction.files import write_prediction
from depthpe.prediction.result import ImagePrediction, PredictionResult
from depthpe.view.loaders import load_prediction_dir

H, W = 6, 8
NAMES = ["sub/img0.jpg", "sub/img1.jpg"]


def _rgb(seed: int) -> np.ndarray:
    """(H, W, 3) uint8 with distinct channels: red ramps along x, green along y, blue random."""
    rgb = np.zeros((H, W, 3), np.uint8)
    rgb[..., 0] = np.linspace(0, 255, W, dtype=np.uint8)[None]
    rgb[..., 1] = np.linspace(30, 90, H, dtype=np.uint8)[:, None]
    rgb[..., 2] = np.random.default_rng(seed).integers(0, 256, (H, W))
    return rgb


def test_frames_hold_the_saved_rgb_images_and_cameras(tmp_path):
    frames = []
    for i in range(2):
        w2c = np.concatenate([np.eye(3), [[-0.5 * i], [0.0], [0.0]]], axis=1)
        K = np.array([[7.0, 0, 3.5 + i], [0, 6.5, 2.5], [0, 0, 1]])
        frames.append(ImagePrediction(f"sub/img{i}.jpg", np.full((H, W), 2.0 + i, np.float32),
                                      np.full((H, W), 1.5, np.float32), _rgb(i), K, w2c, NAMES))
    write_prediction(PredictionResult(frames, (H, W), "cameras", "joint", 2), tmp_path)
    scene = load_prediction_dir(tmp_path)
    assert [f.name for f in scene.frames] == NAMES
    for got, given in zip(scene.frames, frames):
        assert got.image.dtype == np.uint8 and np.array_equal(got.image, given.image)  # RGB, not BGR
        np.testing.assert_array_equal(got.K, given.K)
        np.testing.assert_array_equal(got.w2c, given.w2c)
        np.testing.assert_array_equal(got.depth, given.depth)
