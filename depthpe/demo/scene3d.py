"""The demo's 3D view: the fused points and the camera frustums as one GLB file (``trimesh``), which
Gradio's ``Model3D`` shows in the browser."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["frustum_lines", "write_scene_glb"]


def frustum_lines(K: np.ndarray, w2c: np.ndarray, height: int, width: int, size: float) -> np.ndarray:
    """(8, 2, 3) world-space line segments of a camera frustum: centre to the 4 image corners at depth
    ``size`` and the rectangle between them. K: (3, 3) OpenCV; w2c: (3, 4) OpenCV world-to-camera."""
    corners = np.array([[0, 0, 1], [width - 1, 0, 1], [width - 1, height - 1, 1], [0, height - 1, 1]], float)
    cam = (np.linalg.inv(K) @ corners.T).T * size
    R, t = w2c[:, :3], w2c[:, 3]
    world = (cam - t) @ R  # R^T (x - t)
    centre = -R.T @ t
    rays = [[centre, c] for c in world]
    rim = [[world[i], world[(i + 1) % 4]] for i in range(4)]
    return np.array(rays + rim)


def write_scene_glb(path: str | Path, points: np.ndarray, colors: np.ndarray, cameras: list, max_points: int = 200_000,
                    seed: int = 0) -> Path:
    """Write a GLB of (N, 3) ``points`` with (N, 3) uint8 ``colors`` (a uniform subsample of at most
    ``max_points``) and one frustum per camera in ``cameras`` ((K, w2c, height, width) tuples), sized
    by a tenth of the points' median distance to the camera centres. Returns the path."""
    import trimesh

    if len(points) > max_points:
        keep = np.random.default_rng(seed).choice(len(points), max_points, replace=False)
        points, colors = points[keep], colors[keep]
    scene = trimesh.Scene()
    if len(points):
        rgba = np.concatenate([colors, np.full((len(colors), 1), 255, np.uint8)], axis=1)
        scene.add_geometry(trimesh.PointCloud(points, colors=rgba), geom_name="points")
    centres = np.array([-w2c[:, :3].T @ w2c[:, 3] for _, w2c, _, _ in cameras])
    sample = points[:: max(1, len(points) // 5000)]
    size = 0.1 * float(np.median(np.linalg.norm(sample[:, None] - centres[None], axis=2))) if len(points) else 0.2
    for i, (K, w2c, h, w) in enumerate(cameras):
        segments = frustum_lines(np.asarray(K), np.asarray(w2c), h, w, size)
        path3d = trimesh.load_path(segments)
        path3d.colors = np.tile([[230, 60, 30, 255]], (len(path3d.entities), 1))
        scene.add_geometry(path3d, geom_name=f"camera_{i}")
    path = Path(path)
    path.write_bytes(scene.export(file_type="glb"))
    return path
