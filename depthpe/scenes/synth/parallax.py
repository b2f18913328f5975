"""How much parallax a scene's view pairs have, in patches (``parallax_patches``, ``parallax_quantiles``):
the image displacement that depth causes, the quantity only geometry can explain when the content
repeats. Pure numpy; works on any scene's depth and cameras, not only generated ones."""

from __future__ import annotations

import numpy as np

from .params import PATCH_PX

__all__ = ["pair_parallax", "parallax_patches", "parallax_quantiles", "quantile_sketch"]

QUANTILES = {"p10": 0.1, "p50": 0.5, "p90": 0.9}


def pair_parallax(depth: np.ndarray, K_i: np.ndarray, w2c_i: np.ndarray, K_j: np.ndarray, w2c_j: np.ndarray,
                  stride: int = 4) -> np.ndarray:
    """Parallax in pixels of view j of the valid pixels of view i, every ``stride``-th row and column.

    depth: (H, W) z-depth of view i (0 = invalid); K: (3, 3) pixel intrinsics; w2c: (3, 4) or (4, 4)
    OpenCV world-to-camera; both views have the size H x W. The parallax of a pixel is the distance
    in view j between where its 3D point projects and where the point at infinity along its ray
    projects (what the rotation alone would do): ``f * b / z`` on a rectified pair of focal length f,
    baseline b. Pixels whose point lies behind camera j or projects outside view j are left out
    (occlusion is not tested). Returns (N,) float64 pixels."""
    return _project_pair(_view_points(depth, K_i, w2c_i, stride), K_j, w2c_j, depth.shape)


def _view_points(depth: np.ndarray, K: np.ndarray, w2c: np.ndarray, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """World points (3, N) and world ray directions (3, N) of the valid pixels of one view (H, W
    depth), every ``stride``-th row and column."""
    h, w = depth.shape
    v, u = np.mgrid[0:h:stride, 0:w:stride]
    z = depth[v, u].astype(np.float64)
    keep = z > 0
    pix = np.stack([u[keep], v[keep], np.ones(int(keep.sum()))]).astype(np.float64)
    R, t = w2c[:3, :3], w2c[:3, 3]
    rays = R.T @ (np.linalg.inv(K) @ pix)
    return rays * z[keep] - (R.T @ t)[:, None], rays


def _project_pair(points: tuple[np.ndarray, np.ndarray], K: np.ndarray, w2c: np.ndarray,
                  size: tuple[int, int]) -> np.ndarray:
    """``pair_parallax`` from ``_view_points`` of view i into view j (K, w2c) of ``size`` (H, W)."""
    h, w = size
    world, rays = points
    R, t = w2c[:3, :3], w2c[:3, 3]
    point, at_inf = K @ (R @ world + t[:, None]), K @ (R @ rays)
    front = (point[2] > 1e-12) & (at_inf[2] > 1e-12)
    xy, xy_inf = point[:2, front] / point[2, front], at_inf[:2, front] / at_inf[2, front]
    inside = (xy[0] >= -0.5) & (xy[0] <= w - 0.5) & (xy[1] >= -0.5) & (xy[1] <= h - 0.5)
    return np.linalg.norm(xy[:, inside] - xy_inf[:, inside], axis=0)


def parallax_patches(depth: np.ndarray, K: np.ndarray, w2c: np.ndarray, patch: int = PATCH_PX,
                     stride: int = 4) -> np.ndarray:
    """Parallax in patches (``patch`` pixels) of every view pair (i < j, from view i) of a scene.

    depth: (V, H, W) z-depth (0 = invalid); K: (V, 3, 3); w2c: (V, 3, 4) or (V, 4, 4) OpenCV
    world-to-camera; the pixels of view i every ``stride`` rows and columns (``pair_parallax``).
    Returns the (N,) values of all pairs together (empty when no pixel qualifies)."""
    views = len(depth)
    points = [_view_points(depth[i], K[i], w2c[i], stride) for i in range(views)]
    values = [_project_pair(points[i], K[j], w2c[j], depth.shape[1:])
              for i in range(views) for j in range(i + 1, views)]
    return np.concatenate(values) / patch if values else np.zeros(0)


def parallax_quantiles(values: np.ndarray) -> dict[str, float] | None:
    """``{"p10", "p50", "p90"}`` of parallax values (patches), or None for no values."""
    values = np.asarray(values, dtype=np.float64)
    if not len(values):
        return None
    return {name: float(np.quantile(values, q)) for name, q in QUANTILES.items()}


def quantile_sketch(values: np.ndarray, points: int = 65) -> np.ndarray:
    """(points,) evenly spaced quantiles (0 to 1) of ``values``: a fixed-size stand-in for a scene's
    distribution, so that scenes pool with equal weight (empty for no values)."""
    values = np.asarray(values, dtype=np.float64)
    return np.quantile(values, np.linspace(0.0, 1.0, points)) if len(values) else np.zeros(0)
