"""What the viewer shows, and the points it draws: pure functions of a ``ViewScene`` and a ``Selection``.

Conventions: cameras are OpenCV (x right, y down, z forward), ``w2c`` (3, 4) world-to-camera, ``K``
(3, 3) pixel intrinsics of the (H, W) image; depth is z-depth in the scene's unit (> 0, 0 =
invalid). World points come from ``depthpe.geometry.unproject_depth`` (the same lifting as
``points.ply``). A point is one pixel of one frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["SOURCES", "COLORINGS", "ALIGNMENTS", "ViewFrame", "ViewScene", "Selection", "PointSet",
           "select_points", "side_offset", "subsample", "camera_pose", "frustum_fov"]

SOURCES = ("prediction", "ground truth", "side by side", "overlaid")  # the last three need GT
COLORINGS = ("image", "depth", "error")  # error needs GT
ALIGNMENTS = ("native", "scene_aligned")  # the rows of the evaluation table (depthpe.metrics)
GT_TINT = np.array([40, 200, 255], np.uint8)  # GT points when overlaid and coloured by image


@dataclass
class ViewFrame:
    """One view. image: (H, W, 3) uint8 RGB; K: (3, 3); w2c: (3, 4) OpenCV world-to-camera;
    depth: (H, W) predicted z-depth (native unit); conf: (H, W) confidence (> 1) or None;
    gt: (H, W) GT z-depth (0 = invalid) or None."""

    name: str
    image: np.ndarray
    K: np.ndarray
    w2c: np.ndarray
    depth: np.ndarray
    conf: np.ndarray | None = None
    gt: np.ndarray | None = None


@dataclass
class ViewScene:
    """A scene to view. scales: the factor each alignment applies to the predicted depth
    ({"native": 1.0, "scene_aligned": s}); metrics: {row: {metric: value}} of the scene, or empty;
    unit: what depth is measured in (shown to the user); name: the scene in file names
    (``<dataset>_<scene_id>`` of a held-out scene, made safe where it is used; empty for a predict folder)."""

    title: str
    frames: list[ViewFrame]
    unit: str = ""
    scales: dict[str, float] = field(default_factory=lambda: {"native": 1.0})
    metrics: dict[str, dict] = field(default_factory=dict)
    name: str = ""
    _world: dict = field(default_factory=dict, repr=False)  # cache: (kind, scale) -> [(H, W, 3) per frame]

    @property
    def has_gt(self) -> bool:
        return all(f.gt is not None for f in self.frames)

    @property
    def has_conf(self) -> bool:
        return all(f.conf is not None for f in self.frames)

    def conf_range(self) -> tuple[float, float]:
        """(lowest, 99th percentile) confidence over all frames; (1, 1) without confidence."""
        if not self.has_conf:
            return 1.0, 1.0
        values = np.concatenate([f.conf[np.isfinite(f.conf)].ravel() for f in self.frames])
        return float(values.min()), float(np.percentile(values, 99))

    def world_points(self, kind: str, scale: float = 1.0) -> list[np.ndarray]:
        """Per frame (H, W, 3) float64 world points of the predicted depth times ``scale``
        (kind "prediction") or of the GT depth (kind "gt"); computed once per (kind, scale)."""
        key = (kind, scale if kind == "prediction" else 1.0)
        if key not in self._world:
            self._world[key] = [_unproject(f.depth * key[1] if kind == "prediction" else f.gt, f.K, f.w2c)
                                for f in self.frames]
        return self._world[key]


@dataclass
class Selection:
    """What to draw. conf_threshold: drop predicted pixels below it (None = keep all); views: one
    bool per frame (None = all); source / coloring / alignment: one of SOURCES / COLORINGS /
    ALIGNMENTS; max_points: subsample to at most this many points (0 = no limit)."""

    conf_threshold: float | None = None
    views: tuple[bool, ...] | None = None
    source: str = "prediction"
    coloring: str = "image"
    alignment: str = "native"
    max_points: int = 200_000


@dataclass
class PointSet:
    """Points to draw: points (N, 3) float32 world, colors (N, 3) uint8; total: points that passed
    the filters before subsampling (N <= total)."""

    points: np.ndarray
    colors: np.ndarray
    total: int

    @property
    def shown(self) -> int:
        return int(len(self.points))


def _unproject(depth: np.ndarray, K: np.ndarray, w2c: np.ndarray) -> np.ndarray:
    """(H, W, 3) float64 world points of a z-depth map (``depthpe.geometry.unproject_depth``)."""
    import torch

    from ..geometry import unproject_depth

    d = torch.from_numpy(np.asarray(depth, np.float64))
    return unproject_depth(d, torch.from_numpy(np.asarray(K, np.float64)),
                           torch.from_numpy(np.asarray(w2c, np.float64))).numpy()


def _valid(frame: ViewFrame, kind: str, conf_threshold: float | None) -> np.ndarray:
    """(H, W) bool: the pixels of ``frame`` drawn for ``kind`` ("prediction": positive finite depth
    with confidence >= threshold; "gt": positive finite GT)."""
    d = frame.depth if kind == "prediction" else frame.gt
    keep = np.isfinite(d) & (d > 0)
    if kind == "prediction" and conf_threshold is not None and frame.conf is not None:
        keep &= frame.conf >= conf_threshold
    return keep


def _depth_range(scene: ViewScene) -> tuple[float, float]:
    """One colour range for every frame: robust range of the GT, else of the native prediction."""
    from ..report.viz import depth_range

    maps = [f.gt for f in scene.frames] if scene.has_gt else [f.depth for f in scene.frames]
    return depth_range(np.stack([np.asarray(m, np.float64) for m in maps]))


def _frame_colors(scene: ViewScene, i: int, kind: str, coloring: str, scale: float) -> np.ndarray:
    """(H, W, 3) uint8 colour of every pixel of frame ``i`` for ``kind``: its image, its depth
    (one range for the scene, turbo) or the per-pixel AbsRel of the aligned prediction (magma)."""
    from ..report.viz import colorize_depth, error_map

    frame = scene.frames[i]
    if coloring == "image":
        return frame.image if kind == "prediction" else (frame.image * 0.5 + GT_TINT * 0.5).astype(np.uint8)
    if coloring == "depth":
        vmin, vmax = _depth_range(scene)
        depth = frame.depth * scale if kind == "prediction" else frame.gt
        return colorize_depth(depth, None, vmin, vmax)
    return error_map(frame.depth * scale, frame.gt, frame.gt > 0)


def _layer(scene: ViewScene, sel: Selection, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(points (N, 3) float64, colors (N, 3) uint8) of one kind ("prediction" or "gt") over the
    enabled views."""
    scale = scene.scales[sel.alignment]
    world = scene.world_points(kind, scale)
    points, colors = [], []
    for i, frame in enumerate(scene.frames):
        if sel.views is not None and not sel.views[i]:
            continue
        keep = _valid(frame, kind, sel.conf_threshold)
        points.append(world[i][keep])
        colors.append(_frame_colors(scene, i, kind, sel.coloring, scale)[keep])
    if not points:
        return np.zeros((0, 3)), np.zeros((0, 3), np.uint8)
    return np.concatenate(points), np.concatenate(colors)


def side_offset(scene: ViewScene) -> np.ndarray:
    """(3,) shift of the GT cloud when shown side by side: 1.1 times the x extent of all GT points,
    along world x (independent of the selection, so the GT does not jump while filtering)."""
    xs = np.concatenate([w[..., 0][_valid(f, "gt", None)] for w, f in zip(scene.world_points("gt"), scene.frames)])
    extent = float(xs.max() - xs.min()) if xs.size else 1.0
    return np.array([1.1 * max(extent, 1e-6), 0.0, 0.0])


def _check(scene: ViewScene, sel: Selection) -> None:
    if sel.source not in SOURCES or sel.coloring not in COLORINGS or sel.alignment not in scene.scales:
        raise ValueError(f"unknown selection {sel.source!r}, {sel.coloring!r}, {sel.alignment!r}: choose from "
                         f"{SOURCES}, {COLORINGS}, {tuple(scene.scales)}")
    if not scene.has_gt and (sel.source != "prediction" or sel.coloring == "error"):
        raise ValueError(f"{sel.source!r} coloured by {sel.coloring!r} needs ground truth; this scene has none")


def select_points(scene: ViewScene, sel: Selection, seed: int = 0) -> PointSet:
    """The points of ``scene`` under ``sel``: prediction and/or GT layers (GT shifted by
    ``side_offset`` side by side), filtered, then subsampled to ``sel.max_points``
    (``subsample``). Raises ValueError for a selection the scene cannot show (GT needed)."""
    _check(scene, sel)
    kinds = {"prediction": ["prediction"], "ground truth": ["gt"]}.get(sel.source, ["prediction", "gt"])
    layers = [_layer(scene, sel, kind) for kind in kinds]
    if sel.source == "side by side":
        layers[1] = (layers[1][0] + side_offset(scene), layers[1][1])
    points = np.concatenate([p for p, _ in layers])
    colors = np.concatenate([c for _, c in layers])
    index = subsample(len(points), sel.max_points, seed)
    return PointSet(points[index].astype(np.float32), colors[index], total=len(points))


def subsample(n: int, budget: int, seed: int = 0) -> np.ndarray:
    """Sorted indices of at most ``budget`` of ``n`` items, drawn uniformly without replacement
    with ``seed`` (all of them when n <= budget or budget == 0)."""
    if budget <= 0 or n <= budget:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=budget, replace=False))


def camera_pose(w2c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R (3, 3) camera-to-world rotation, centre (3,) in world) of an OpenCV (3|4, 4) w2c."""
    R, t = np.asarray(w2c, np.float64)[:3, :3], np.asarray(w2c, np.float64)[:3, 3]
    return R.T, -R.T @ t


def frustum_fov(K: np.ndarray, height: int) -> float:
    """Vertical field of view in radians of pixel intrinsics ``K`` for an image ``height`` pixels high."""
    return float(2.0 * np.arctan(height / (2.0 * float(K[1, 1]))))
