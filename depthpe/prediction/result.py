"""What ``depthpe.predict`` returns (``PredictionResult``, one ``ImagePrediction`` per image), and the
point cloud fused from it (``fuse_points``).

These live in the io layer, below ``depthpe.prediction.api`` (which runs the model), so that
``depthpe.prediction.files`` can write a result without importing the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["ImagePrediction", "PredictionResult", "FusionSettings", "FusedPoints", "source_views", "fuse_result",
           "fuse_points"]


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


@dataclass
class FusionSettings:
    """Multi-view consistency filter of the fused cloud (``depthpe.prediction.fusion``): a pixel is
    kept when at least ``min_views`` of the views it was predicted with agree with its depth within
    ``rel_threshold`` (relative) and, when set, reproject within ``pixel_threshold`` pixels.
    ``min_views`` 0 keeps every pixel (points are still merged with the agreeing views)."""

    min_views: int = 0
    rel_threshold: float = 0.01
    pixel_threshold: float | None = None


@dataclass
class FusedPoints:
    """A fused point cloud with its observations. points: (N, 3) float64 world points in the
    cameras' frame and unit; colors: (N, 3) uint8 RGB; frame: (N,) index of the frame each point
    comes from; obs_frame, obs_point: (M,) int and obs_uv: (M, 2) float64 OpenCV pixels: point
    ``obs_point`` is seen in frame ``obs_frame`` at ``obs_uv`` (its own pixel in its frame, and
    where it lands in every view that agreed with it), the track of each point."""

    points: np.ndarray
    colors: np.ndarray
    frame: np.ndarray
    obs_frame: np.ndarray
    obs_point: np.ndarray
    obs_uv: np.ndarray


def source_views(result: PredictionResult) -> list[list[int]]:
    """Per frame the indices of the other frames it was predicted with (its ``views``)."""
    index = {fr.name: i for i, fr in enumerate(result.frames)}
    return [[index[v] for v in fr.views if v in index and index[v] != i] for i, fr in enumerate(result.frames)]


def fuse_result(result: PredictionResult, conf_threshold: float | None = None, fusion: FusionSettings | None = None,
                stride: int = 1) -> tuple[FusedPoints, list[np.ndarray]]:
    """The fused cloud of all frames and each frame's (H, W) bool keep-mask. A pixel is kept when
    its depth is > 0, its confidence >= ``conf_threshold`` (None: any), it passes the multi-view
    check ``fusion`` (None: no check, points unmerged) and it lies on the ``stride`` grid."""
    from .fusion import fuse_view

    depth = [fr.depth for fr in result.frames]
    K = np.stack([fr.K for fr in result.frames])
    w2c = np.stack([fr.w2c for fr in result.frames])
    sources = source_views(result) if fusion else [[] for _ in result.frames]
    settings = fusion or FusionSettings()
    parts, masks, start = [], [], 0
    for i, fr in enumerate(result.frames):
        fused = fuse_view(i, depth, K, w2c, sources[i], settings.min_views, settings.rel_threshold,
                          settings.pixel_threshold)
        keep = fused.keep & _stride_mask(fr.depth.shape, stride)
        if conf_threshold is not None:
            keep &= fr.conf >= conf_threshold
        masks.append(keep)
        parts.append(_frame_points(i, fr, fused, keep, start))
        start += int(keep.sum())
    cat = [np.concatenate([p[k] for p in parts]) for k in range(6)]
    return FusedPoints(*cat), masks


def _frame_points(i: int, fr: ImagePrediction, fused, keep: np.ndarray, start: int) -> tuple:
    """(points, colors, frame, obs_frame, obs_point, obs_uv) of the kept pixels of frame ``i``,
    numbered from ``start``."""
    n = int(keep.sum())
    ids = np.arange(start, start + n)
    rows, cols = np.nonzero(keep)
    obs_frame, obs_point, obs_uv = [np.full(n, i)], [ids], [np.stack([cols, rows], 1).astype(np.float64)]
    for j, check in zip(fused.sources, fused.checks):
        seen = check.ok[keep]
        obs_frame.append(np.full(int(seen.sum()), j))
        obs_point.append(ids[seen])
        obs_uv.append(check.uv[keep][seen])
    return (fused.points[keep], fr.image[keep], np.full(n, i), np.concatenate(obs_frame),
            np.concatenate(obs_point), np.concatenate(obs_uv))


def fuse_points(result: PredictionResult, conf_threshold: float | None = None, stride: int = 1,
                fusion: FusionSettings | None = None):
    """One coloured point cloud of all frames: (points (N, 3) float64 world coordinates in the
    cameras' frame and unit, colors (N, 3) uint8 RGB, frame index (N,) int). Pixels with depth <= 0
    or confidence below ``conf_threshold`` are dropped; ``stride`` keeps every stride-th pixel;
    ``fusion`` filters and merges them by multi-view consistency (``fuse_result``)."""
    cloud, _ = fuse_result(result, conf_threshold, fusion, stride)
    return cloud.points, cloud.colors, cloud.frame


def _stride_mask(shape: tuple[int, int], stride: int) -> np.ndarray:
    """(H, W) bool mask keeping every ``stride``-th pixel in both directions."""
    mask = np.zeros(shape, bool)
    mask[::stride, ::stride] = True
    return mask
