"""What ``depthpe.predict`` returns (``PredictionResult``, one ``ImagePrediction`` per image), and the
point cloud fused from it (``fuse_points``).

These live in the io layer, below ``depthpe.prediction.api`` (which runs the model), so that
``depthpe.prediction.files`` can write a result without importing the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["ImagePrediction", "PredictionResult", "fuse_points"]


@dataclass
class ImagePrediction:
    """One image's prediction at the model's input size (H, W).

    depth: (H, W) float32 z-depth in the cameras' unit (``PredictionResult.unit``), > 0;
    conf: (H, W) float32 confidence (> 1, higher = more confident); image: (H, W, 3) uint8 RGB, the
    cropped and resized input; K: (3, 3) float64 pixel intrinsics of that image (OpenCV);
    w2c: (3, 4) float64 OpenCV world-to-camera (identity without cameras); views: the names of the
    images predicted together with it (itself included), the first being the reference view.
    """

    name: str
    depth: np.ndarray
    conf: np.ndarray
    image: np.ndarray
    K: np.ndarray
    w2c: np.ndarray
    views: list[str]


@dataclass
class PredictionResult:
    """Everything ``predict`` did. frames: one ``ImagePrediction`` per input image, input order;
    size: (H, W) model input size; unit: "cameras" (depth in the unit of the cameras' translations)
    or "normalized" (no cameras: the model's own unit); mode: "all" (one prediction of all images)
    or "nearest" (one prediction per image with its nearest views); views_per_prediction: S;
    notes: lines saying what was chosen and why."""

    frames: list[ImagePrediction]
    size: tuple[int, int]
    unit: str
    mode: str
    views_per_prediction: int
    notes: list[str] = field(default_factory=list)

    def __getitem__(self, name: str) -> ImagePrediction:
        for frame in self.frames:
            if frame.name == name:
                return frame
        raise KeyError(name)


def fuse_points(result: PredictionResult, conf_threshold: float | None = None, stride: int = 1):
    """One coloured point cloud of all frames: (points (N, 3) float64 world coordinates in the
    cameras' frame and unit, colors (N, 3) uint8 RGB, frame index (N,) int). Pixels with depth <= 0
    or confidence below ``conf_threshold`` are dropped; ``stride`` keeps every stride-th pixel."""
    import torch

    from ..geometry import unproject_depth

    points, colors, index = [], [], []
    for i, fr in enumerate(result.frames):
        d = torch.from_numpy(fr.depth.astype(np.float64))
        xyz = unproject_depth(d, torch.from_numpy(fr.K), torch.from_numpy(fr.w2c)).numpy()
        keep = fr.depth > 0
        if conf_threshold is not None:
            keep &= fr.conf >= conf_threshold
        keep &= _stride_mask(keep.shape, stride)
        points.append(xyz[keep])
        colors.append(fr.image[keep])
        index.append(np.full(int(keep.sum()), i))
    return np.concatenate(points), np.concatenate(colors), np.concatenate(index)


def _stride_mask(shape: tuple[int, int], stride: int) -> np.ndarray:
    """(H, W) bool mask keeping every ``stride``-th pixel in both directions."""
    mask = np.zeros(shape, bool)
    mask[::stride, ::stride] = True
    return mask
