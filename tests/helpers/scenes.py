"""Small analytic scenes for tests: cameras looking at a textured plane, with exact z-depth."""

from __future__ import annotations

import numpy as np


def look_at_w2c(center: np.ndarray, target: np.ndarray, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """(3, 4) OpenCV world-to-camera for a camera at ``center`` looking at ``target``."""
    z = target - center
    z = z / np.linalg.norm(z)
    x = np.cross(z, np.asarray(up, float))
    if np.linalg.norm(x) < 1e-6:
        x = np.cross(z, np.array([0.0, 1.0, 0.0]))
    x = x / np.linalg.norm(x)
    y = np.cross(z, x)
    R = np.stack([x, y, z])  # rows: camera axes in world coordinates
    return np.concatenate([R, -(R @ center)[:, None]], axis=1)


def plane_scene(n: int = 4, h: int = 24, w: int = 32, seed: int = 0, radius: float = 2.0,
                pure_rotation: bool = False):
    """n cameras on a circle at heights 1.6, 1.9, ... looking at the plane z = 0 near the origin
    (``pure_rotation``: all at the first camera's centre, looking at different points).

    Returns dict(images (n,h,w,3) uint8, depth (n,h,w) float32 z-depth, K (n,3,3), w2c (n,3,4)).
    The image texture is a function of the world (x, y) hit point, so colours are registered.
    """
    rng = np.random.default_rng(seed)
    f = 0.9 * w
    K = np.array([[f, 0, (w - 1) / 2], [0, f, (h - 1) / 2], [0, 0, 1]])
    Ks, w2cs, depths, images = [], [], [], []
    for i in range(n):
        a = 2 * np.pi * i / n + rng.uniform(-0.2, 0.2)
        center = np.array([radius * np.cos(a), radius * np.sin(a), 1.6 + 0.3 * i])
        if pure_rotation:
            a, center = 0.0, np.array([radius, 0.0, 1.6])
        w2c = look_at_w2c(center, np.array([0.0, 0.0, 0.0]) + rng.uniform(-0.2, 0.2, 3) * [1, 1, 0])
        R = w2c[:, :3]
        v, u = np.mgrid[0:h, 0:w].astype(float)
        rays_cam = np.stack([(u - K[0, 2]) / f, (v - K[1, 2]) / f, np.ones_like(u)], -1)  # z = 1
        rays_w = rays_cam @ R  # R^T applied to each ray
        s = -center[2] / rays_w[..., 2]  # plane z = 0; s is the z-depth since ray z_cam = 1
        hit = center + s[..., None] * rays_w
        depth = np.where(s > 0, s, 0.0)
        pattern = (np.floor(hit[..., 0] * 3) + np.floor(hit[..., 1] * 3)) % 2
        img = np.stack([pattern * 200 + 30, 80 + 40 * np.sin(hit[..., 0]), 120 + 0 * u], -1)
        Ks.append(K)
        w2cs.append(w2c)
        depths.append(depth)
        images.append(np.clip(img, 0, 255).astype(np.uint8))
    return {
        "images": np.stack(images),
        "depth": np.stack(depths).astype(np.float32),
        "K": np.stack(Ks).astype(np.float32),
        "w2c": np.stack(w2cs),
    }
