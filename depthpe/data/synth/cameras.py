"""Drawing the V cameras of a scene (``random_cameras``): a path style, the field of view, rolls and
principal points, each trajectory checked for clearance and for views that see geometry."""

from __future__ import annotations

import numpy as np

from .clearance import free_space_clearance
from .params import DEFAULT_PARAMS, SynthParams
from .raycast import camera_rays, cast_rays
from .scene import _SKY, Scene, SceneGenerationError
from .trajectories import _PATH_STYLES, intrinsics_from_fov, look_at_w2c

__all__ = ["random_cameras"]


def _views_ok(scene: Scene, K: np.ndarray, w2c: np.ndarray, height: int, width: int) -> bool:
    """Cheap check on an 8x8 ray grid: most rays hit something, not everything is very close."""
    Ks = K.copy()  # same field of view at 8x8 pixels
    Ks[:, 0] *= 8 / width
    Ks[:, 1] *= 8 / height
    O, D = camera_rays(Ks, w2c, 8, 8)
    t, surface = cast_rays(scene, O.reshape(-1, 3), D.reshape(-1, 3))
    t = t.reshape(len(K), -1)
    hit = (surface != _SKY).reshape(len(K), -1)
    if (hit.mean(axis=1) < 0.5).any():
        return False
    med = np.array([np.median(ti[h]) for ti, h in zip(t, hit)])
    return bool((med > 0.15 * scene.scale).all())


def _random_hfov(rng: np.random.Generator, params: SynthParams) -> float:
    """A horizontal field of view (radians): one of ``params.hfov_deg``'s ranges (uniformly, no draw
    when there is one), then a uniform value in it."""
    ranges = params.hfov_deg
    lo, hi = ranges[int(rng.integers(len(ranges)))] if len(ranges) > 1 else ranges[0]
    return np.deg2rad(rng.uniform(lo, hi))


def random_cameras(
    rng: np.random.Generator, scene: Scene, views: int, height: int, width: int, max_tries: int = 40,
    params: SynthParams = DEFAULT_PARAMS,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw V cameras for a scene; with the default ``params``, in one of two styles (50% each):

    * orbit: around a primitive (or a random point), 30-180 degrees of azimuth over the V views, at
      0.2-0.45 s distance and 5-45 degrees elevation (both varying smoothly), looking at the target;
    * walk: along a gently curving path of 0.15-0.45 s, looking forward-ish (heading +-45 degrees,
      pitch -20..10 degrees), or in half of the scenes with openings roughly towards an opening.

    Horizontal FOV ~U(45, 70) degrees per scene with +-3% per-view zoom jitter, principal point at
    the image centre jittered by up to 2% of the image size, roll within +-4 degrees. Every camera
    centre is inside the room and at least ``0.04 * scene.scale`` from every surface, and an 8x8
    probe of each view sees mostly geometry. ``params`` (``SynthParams``) sets the path styles, their
    sizes and the field of view ranges. Returns K (V, 3, 3) and w2c (V, 3, 4) float64.
    Raises SceneGenerationError after ``max_tries`` failed trajectories.
    """
    hfov = _random_hfov(rng, params)
    margin = 0.04 * scene.scale
    for attempt in range(max_tries):
        style = _PATH_STYLES[params.paths[int(rng.uniform() * len(params.paths))]]
        centers, targets = style(rng, scene, views, params)
        if (free_space_clearance(scene, centers) < margin).any():
            continue
        fwd = targets - centers
        fwd /= np.linalg.norm(fwd, axis=1, keepdims=True)
        if (np.abs(fwd[:, 2]) > 0.97).any():
            continue
        rolls = np.deg2rad(rng.uniform(-4, 4, views))
        w2c = np.stack([look_at_w2c(c, t, r) for c, t, r in zip(centers, targets, rolls)])
        K = np.stack(
            [
                intrinsics_from_fov(
                    hfov * rng.uniform(0.97, 1.03),
                    height,
                    width,
                    cx=(width - 1) / 2 + rng.uniform(-0.02, 0.02) * width,
                    cy=(height - 1) / 2 + rng.uniform(-0.02, 0.02) * height,
                )
                for _ in range(views)
            ]
        )
        if _views_ok(scene, K, w2c, height, width):
            return K, w2c
    raise SceneGenerationError(f"no valid camera trajectory for this scene after {max_tries} tries")
