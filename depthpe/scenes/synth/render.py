"""Shading (textured Lambertian, key light + ambient, primitive shadows, a sky) and rendering of views
(``render_views``, ``render_view``: uint8 RGB images and float32 z-depth)."""

from __future__ import annotations

import numpy as np

from .raycast import _dot, _primitive_normal_uv, _rowmat, camera_rays, cast_rays
from .scene import _FACE_UV_AXES, _SKY, Scene
from .textures import _texture_color

__all__ = ["render_views", "render_view"]


def _shade(scene: Scene, O: np.ndarray, D: np.ndarray, t: np.ndarray, surface: np.ndarray) -> np.ndarray:
    """RGB in [0, 1] (N, 3): textured Lambertian (key light + ambient) with primitive shadows."""
    N = len(D)
    color = np.zeros((N, 3))
    hit = surface != _SKY
    P = O + np.where(hit, t, 0)[:, None] * D
    normal = np.zeros((N, 3))
    base = np.zeros((N, 3))
    order = np.argsort(surface, kind="stable")  # group rays by surface id
    bounds = np.searchsorted(surface[order], np.arange(-1, 7 + len(scene.primitives)))
    for sid in range(6 + len(scene.primitives)):
        idx = order[bounds[sid + 1] : bounds[sid + 2]]
        if len(idx) == 0:
            continue
        if sid < 6:
            ua, va = _FACE_UV_AXES[sid]
            n = np.zeros(3)
            n[sid // 2] = -1.0 if sid % 2 else 1.0  # pointing into the room
            normal[idx] = n
            base[idx] = _texture_color(scene.face_textures[sid], P[idx][:, [ua, va]])
        else:
            prim = scene.primitives[sid - 6]
            normal[idx], uv = _primitive_normal_uv(prim, P[idx])
            base[idx] = _texture_color(prim.texture, uv)
    facing = _dot(normal, D) > 0
    normal[facing] *= -1  # shade the side the camera sees
    L = scene.light_dir
    diffuse = np.clip(_rowmat(normal, L[:, None])[:, 0], 0, None)
    lit = hit & (diffuse > 0)
    if lit.any() and scene.primitives and scene.ambient < 1:  # ambient 1: shadows change nothing
        eps = 1e-4 * scene.scale
        Ps = P[lit] + eps * normal[lit]
        ts, _ = cast_rays(scene, Ps, np.broadcast_to(L, Ps.shape), tmin=0.0, primitives_only=True)
        shadow = np.ones(N)
        shadow[lit] = np.where(np.isfinite(ts), 0.25, 1.0)
        diffuse = diffuse * shadow
    light = scene.ambient + (1 - scene.ambient) * diffuse
    color[hit] = base[hit] * light[hit, None]
    if (~hit).any():
        d = D[~hit] / np.linalg.norm(D[~hit], axis=1, keepdims=True)
        w = np.sqrt(np.clip(d[:, 2], 0, 1))[:, None]
        color[~hit] = scene.sky_horizon * (1 - w) + scene.sky_zenith * w
    return color


def render_views(
    scene: Scene, K: np.ndarray, w2c: np.ndarray, height: int, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """Render V views of a scene by exact ray casting at the pixel centres.

    K: (V, 3, 3) pixel intrinsics (OpenCV); w2c: (V, 3, 4) OpenCV world-to-camera; cameras must be
    inside the room. Returns ``images`` (V, H, W, 3) uint8 RGB and ``depth`` (V, H, W) float32
    z-depth in scene units, 0 where the ray escapes through an opening.
    """
    K = np.asarray(K, dtype=np.float64)
    w2c = np.asarray(w2c, dtype=np.float64)
    if K.ndim != 3 or K.shape[1:] != (3, 3) or w2c.shape != (K.shape[0], 3, 4):
        raise ValueError(f"expected K (V,3,3) and w2c (V,3,4), got {K.shape} and {w2c.shape}")
    V = K.shape[0]
    O, D = camera_rays(K, w2c, height, width)
    images = np.empty((V, height, width, 3), dtype=np.uint8)
    depth = np.empty((V, height, width), dtype=np.float32)
    for i in range(V):  # one view at a time: a shared origin and cache-sized arrays
        Oi, Di = O[i, :1, 0], D[i].reshape(-1, 3)
        t, surface = cast_rays(scene, Oi, Di)
        color = _shade(scene, Oi, Di, t, surface)
        depth[i] = np.where(surface == _SKY, 0.0, t).reshape(height, width)
        images[i] = np.clip(np.rint(color * 255), 0, 255).reshape(height, width, 3)
    return images, depth


def render_view(
    scene: Scene, K: np.ndarray, w2c: np.ndarray, height: int, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """Render one view: K (3, 3), w2c (3, 4) -> image (H, W, 3) uint8 RGB, depth (H, W) float32
    z-depth (0 = ray escapes). See ``render_views``."""
    images, depth = render_views(scene, np.asarray(K)[None], np.asarray(w2c)[None], height, width)
    return images[0], depth[0]
