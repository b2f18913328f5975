"""Distances from points to the scene's surfaces (camera placement and tests): signed distances to
primitives, ``free_space_clearance`` and ``surface_distance``."""

from __future__ import annotations

import numpy as np

from .raycast import _rowmat
from .scene import Primitive, Scene

__all__ = ["free_space_clearance", "surface_distance"]


def _primitive_sdf(prim: Primitive, P: np.ndarray) -> np.ndarray:
    """Signed distance (N,) from points P (N, 3) to a primitive (negative inside)."""
    p = _rowmat(P - prim.center, prim.rotation)
    if prim.kind == "sphere":
        return np.linalg.norm(p, axis=1) - prim.size[0]
    if prim.kind == "box":
        q = np.abs(p) - prim.size
    else:
        q = np.stack([np.hypot(p[:, 0], p[:, 1]) - prim.size[0], np.abs(p[:, 2]) - prim.size[2]], axis=1)
    return np.linalg.norm(np.maximum(q, 0), axis=1) + np.minimum(q.max(axis=1), 0)


def free_space_clearance(scene: Scene, points: np.ndarray) -> np.ndarray:
    """Distance (N,) from points (N, 3) inside the room to the nearest room face or primitive;
    negative if a point is outside the room or inside a primitive."""
    P = np.atleast_2d(np.asarray(points, dtype=np.float64))
    d = np.minimum((P - scene.room_min).min(axis=1), (scene.room_max - P).min(axis=1))
    for prim in scene.primitives:
        d = np.minimum(d, _primitive_sdf(prim, P))
    return d


def surface_distance(scene: Scene, points: np.ndarray) -> np.ndarray:
    """Unsigned distance (N,) from points (N, 3) to the nearest scene surface (room faces or
    primitives); ~0 for points on a surface."""
    P = np.atleast_2d(np.asarray(points, dtype=np.float64))
    d = np.abs(np.minimum((P - scene.room_min).min(axis=1), (scene.room_max - P).min(axis=1)))
    for prim in scene.primitives:
        d = np.minimum(d, np.abs(_primitive_sdf(prim, P)))
    return d
