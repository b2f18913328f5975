"""Exact ray casting against the room and its primitives (``cast_rays``), the rays of pinhole cameras
(``camera_rays``), a coarse probe of what cameras see (``probe_depths``) and the surface normals and
texture coordinates of primitives."""

from __future__ import annotations

import numpy as np

from .scene import _FACE_UV_AXES, _SKY, Primitive, Scene

__all__ = ["cast_rays", "camera_rays", "probe_depths"]


def _dot(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Row-wise dot products of (N, 3) arrays -> (N,)."""
    return X[:, 0] * Y[:, 0] + X[:, 1] * Y[:, 1] + X[:, 2] * Y[:, 2]


def _rowmat(X: np.ndarray, M: np.ndarray) -> np.ndarray:
    """X (N, 3) @ M (3, 3) as three multiply-adds (much faster than matmul for tall thin X)."""
    return X[:, 0:1] * M[0] + X[:, 1:2] * M[1] + X[:, 2:3] * M[2]


def _to_local(prim: Primitive, O: np.ndarray, D: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    R = prim.rotation
    return _rowmat(O - prim.center, R), _rowmat(D, R)  # row-vector form of R^T (x - c), R^T d


def _bounding_radius(prim: Primitive) -> float:
    if prim.kind == "sphere":
        return float(prim.size[0])
    if prim.kind == "box":
        return float(np.linalg.norm(prim.size))
    return float(np.hypot(prim.size[0], prim.size[2]))


def _pick_root(t_near: np.ndarray, t_far: np.ndarray, hit: np.ndarray, tmin: float) -> np.ndarray:
    t = np.where(t_near > tmin, t_near, np.where(t_far > tmin, t_far, np.inf))
    return np.where(hit, t, np.inf)


def _intersect_box(prim: Primitive, O: np.ndarray, D: np.ndarray, tmin: float) -> np.ndarray:
    o, d = _to_local(prim, O, D)
    h = prim.size
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / d
        t1 = (-h - o) * inv
        t2 = (h - o) * inv
    t_near = np.fmax.reduce(np.fmin(t1, t2), axis=1)
    t_far = np.fmin.reduce(np.fmax(t1, t2), axis=1)
    return _pick_root(t_near, t_far, t_near <= t_far, tmin)


def _intersect_sphere(prim: Primitive, O: np.ndarray, D: np.ndarray, tmin: float) -> np.ndarray:
    oc = O - prim.center
    a = _dot(D, D)
    b = _dot(D, oc)
    c = _dot(oc, oc) - prim.size[0] ** 2
    disc = b * b - a * c
    sq = np.sqrt(np.maximum(disc, 0))
    return _pick_root((-b - sq) / a, (-b + sq) / a, disc >= 0, tmin)


def _intersect_cylinder(prim: Primitive, O: np.ndarray, D: np.ndarray, tmin: float) -> np.ndarray:
    o, d = _to_local(prim, O, D)
    r, hh = prim.size[0], prim.size[2]
    a = d[:, 0] ** 2 + d[:, 1] ** 2
    b = o[:, 0] * d[:, 0] + o[:, 1] * d[:, 1]
    c = o[:, 0] ** 2 + o[:, 1] ** 2 - r * r
    disc = b * b - a * c
    sq = np.sqrt(np.maximum(disc, 0))
    best = np.full(len(D), np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        for t in ((-b - sq) / a, (-b + sq) / a):  # side wall, both roots
            z = o[:, 2] + t * d[:, 2]
            ok = (disc >= 0) & (a > 0) & (np.abs(z) <= hh) & (t > tmin)
            best = np.where(ok & (t < best), t, best)
        for zc in (-hh, hh):  # caps
            t = (zc - o[:, 2]) / d[:, 2]
            x = o[:, 0] + t * d[:, 0]
            y = o[:, 1] + t * d[:, 1]
            ok = np.isfinite(t) & (x * x + y * y <= r * r) & (t > tmin)
            best = np.where(ok & (t < best), t, best)
    return best


_INTERSECT = {"box": _intersect_box, "sphere": _intersect_sphere, "cylinder": _intersect_cylinder}


def _intersect_room(scene: Scene, O: np.ndarray, D: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exit of rays (from inside the room) through its faces -> (t (N,), face id (N,), -1 = sky)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = np.where(D > 0, scene.room_max, scene.room_min)
        t_axis = (bound - O) / D
    t_axis = np.where(np.isfinite(t_axis) & (t_axis > 0), t_axis, np.inf)
    axis = np.argmin(t_axis, axis=1)
    rows = np.arange(len(D))
    t = t_axis[rows, axis]
    face = 2 * axis + (D[rows, axis] > 0)
    P = O + t[:, None] * D
    for f, (u0, u1, v0, v1) in scene.holes:
        ua, va = _FACE_UV_AXES[f]
        inside = (face == f) & (P[:, ua] >= u0) & (P[:, ua] <= u1) & (P[:, va] >= v0) & (P[:, va] <= v1)
        face = np.where(inside, _SKY, face)
    t = np.where(face == _SKY, np.inf, t)
    return t, face


def cast_rays(
    scene: Scene, O: np.ndarray, D: np.ndarray, *, tmin: float = 1e-9, primitives_only: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Nearest hit of rays ``O + t D`` (t > tmin) with the scene.

    O, D: (N, 3) float64 world origins and directions (D need not be unit; t is in units of |D|);
    O may be (1, 3) for rays sharing one origin (a camera).
    Returns ``t`` (N,) (inf = no hit) and ``surface`` (N,) int: 0-5 room faces (FACE_NAMES),
    6 + j primitive j, -1 no hit. Room faces assume origins inside the room; with
    ``primitives_only`` the room is ignored (used for shadow rays).
    """
    if primitives_only:
        t = np.full(len(D), np.inf)
        surface = np.full(len(D), _SKY, dtype=np.int64)
    else:
        t, surface = _intersect_room(scene, O, D)
    shared = len(O) == 1  # one origin for all rays (a camera): cheaper culling
    a = _dot(D, D)
    for j, prim in enumerate(scene.primitives):
        # Cull with the bounding sphere: skip rays that miss it or whose hit so far is nearer.
        oc = O - prim.center
        if shared:
            b = _rowmat(D, oc.T)[:, 0]
            c = float((oc * oc).sum()) - (_bounding_radius(prim) * (1 + 1e-6)) ** 2
        else:
            b = _dot(D, oc)
            c = _dot(oc, oc) - (_bounding_radius(prim) * (1 + 1e-6)) ** 2
        disc = b * b - a * c
        sq = np.sqrt(np.maximum(disc, 0))
        cand = np.flatnonzero((disc >= 0) & ((-b + sq) / a > tmin) & ((-b - sq) / a < t))
        if len(cand) == 0:
            continue
        tj = _INTERSECT[prim.kind](prim, O if shared else O[cand], D[cand], tmin)
        closer = tj < t[cand]
        t[cand[closer]] = tj[closer]
        surface[cand[closer]] = 6 + j
    return t, surface


def _primitive_normal_uv(prim: Primitive, P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Outward world normals (N, 3) and texture coordinates (N, 2) at surface points P (N, 3)."""
    p = _rowmat(P - prim.center, prim.rotation)
    n_local = np.zeros_like(p)
    uv = np.zeros((len(P), 2))
    if prim.kind == "sphere":
        n_local = p / prim.size[0]
        r = prim.size[0]
        uv[:, 0] = np.arctan2(p[:, 1], p[:, 0]) * r
        uv[:, 1] = np.arcsin(np.clip(p[:, 2] / r, -1, 1)) * r
    elif prim.kind == "box":
        ratio = np.abs(p) / prim.size
        axis = np.argmax(ratio, axis=1)
        idx = np.arange(len(P))
        n_local[idx, axis] = np.sign(p[idx, axis])
        others = np.array([[1, 2], [0, 2], [0, 1]])[axis]
        uv = np.stack([p[idx, others[:, 0]], p[idx, others[:, 1]]], axis=1) + axis[:, None] * 3.7
    else:
        r, hh = prim.size[0], prim.size[2]
        rho = np.hypot(p[:, 0], p[:, 1])
        cap = np.abs(p[:, 2]) / hh >= rho / r
        side_n = np.stack([p[:, 0], p[:, 1], np.zeros(len(P))], axis=1) / np.maximum(rho, 1e-12)[:, None]
        cap_n = np.stack([np.zeros(len(P)), np.zeros(len(P)), np.sign(p[:, 2])], axis=1)
        n_local = np.where(cap[:, None], cap_n, side_n)
        side_uv = np.stack([np.arctan2(p[:, 1], p[:, 0]) * r, p[:, 2]], axis=1)
        uv = np.where(cap[:, None], p[:, :2], side_uv)
    return _rowmat(n_local, prim.rotation.T), uv


def camera_rays(K: np.ndarray, w2c: np.ndarray, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """World rays through the pixel centres of V cameras.

    K: (V, 3, 3) pixel intrinsics; w2c: (V, 3, 4) OpenCV world-to-camera. Returns origins and
    directions, each (V, H, W, 3) float64, with ``D = R^T K^-1 [u, v, 1]``: every direction has
    camera-frame z = 1, so the ray parameter t of a hit *is* its z-depth.
    """
    K = np.asarray(K, dtype=np.float64)
    w2c = np.asarray(w2c, dtype=np.float64)
    v, u = np.meshgrid(np.arange(height, dtype=np.float64), np.arange(width, dtype=np.float64), indexing="ij")
    V = len(K)
    D = np.empty((V, height * width, 3))
    for i in range(V):
        d_cam = np.stack(  # K^-1 [u, v, 1] for zero-skew K
            [(u.ravel() - K[i, 0, 2]) / K[i, 0, 0], (v.ravel() - K[i, 1, 2]) / K[i, 1, 1], np.ones(u.size)],
            axis=1,
        )
        D[i] = _rowmat(d_cam, w2c[i, :, :3])  # row form of R^T d
    D = D.reshape(V, height, width, 3)
    C = -np.einsum("vji,vj->vi", w2c[:, :, :3], w2c[:, :, 3])
    O = np.broadcast_to(C[:, None, None, :], D.shape)
    return O, D


def probe_depths(scene: Scene, K: np.ndarray, w2c: np.ndarray, height: int, width: int,
                 side: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """A cheap look at what V cameras see: rays on a ``side`` x ``side`` grid spanning the same field
    of view as the ``height`` x ``width`` image. K: (V, 3, 3) pixel intrinsics at that image size;
    w2c: (V, 3, 4). Returns z-depth t (V, side * side) in scene units and hit (V, side * side) bool
    (False: the ray escapes; its t is not a depth)."""
    Ks = np.array(K, dtype=np.float64)  # same field of view at side x side pixels
    Ks[:, 0] *= side / width
    Ks[:, 1] *= side / height
    O, D = camera_rays(Ks, w2c, side, side)
    t, surface = cast_rays(scene, O.reshape(-1, 3), D.reshape(-1, 3))
    return t.reshape(len(K), -1), (surface != _SKY).reshape(len(K), -1)
