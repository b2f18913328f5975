"""Drawing the V cameras of a scene (``random_cameras``): a path style, the field of view, rolls and
principal points, each trajectory checked for clearance and for views that see geometry."""

from __future__ import annotations

import numpy as np

from .clearance import free_space_clearance
from .params import DEFAULT_PARAMS, SynthParams
from .raycast import probe_depths
from .rigs import STRAIGHT_RIGS, straight_rig
from .scene import Scene, SceneGenerationError
from .trajectories import _PATH_STYLES, intrinsics_from_fov, look_at_w2c

__all__ = ["random_cameras"]


def _views_ok(scene: Scene, K: np.ndarray, w2c: np.ndarray, height: int, width: int) -> bool:
    """Cheap check on an 8x8 ray grid: most rays hit something, not everything is very close."""
    t, hit = probe_depths(scene, K, w2c, height, width)
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
    sizes and the field of view ranges; the "stereo" and "line" rigs are drawn by ``rigs.straight_rig``
    (one K, no roll). Returns K (V, 3, 3) and w2c (V, 3, 4) float64.
    Raises SceneGenerationError after ``max_tries`` failed trajectories.
    """
    hfov = _random_hfov(rng, params)
    for attempt in range(max_tries):
        path = params.paths[int(rng.uniform() * len(params.paths))]
        if path in STRAIGHT_RIGS:
            drawn = straight_rig(rng, scene, views, height, width, hfov, params, path)
            drawn = None if drawn is None or not _clear(scene, drawn[0]) else drawn[1:]
        else:
            drawn = _path_cameras(rng, scene, views, height, width, hfov, params, path)
        if drawn is not None and _views_ok(scene, *drawn, height, width):
            return drawn
    raise SceneGenerationError(f"no valid camera trajectory for this scene after {max_tries} tries")


def _clear(scene: Scene, centers: np.ndarray) -> bool:
    """Whether every camera centre (V, 3) is at least ``0.04 * scene.scale`` from every surface."""
    return not (free_space_clearance(scene, centers) < 0.04 * scene.scale).any()


def _path_cameras(rng: np.random.Generator, scene: Scene, views: int, height: int, width: int, hfov: float,
                  params: SynthParams, path: str) -> tuple[np.ndarray, np.ndarray] | None:
    """K (V, 3, 3) and w2c (V, 3, 4) along a path of ``_PATH_STYLES``: roll within +-4 degrees (or
    +-``params.rotation_jitter_deg``), +-3% zoom and a principal point within 2% of the image size
    of its centre per view; None when a centre is too close to a surface or a view looks (almost)
    straight up or down."""
    centers, targets = _PATH_STYLES[path](rng, scene, views, params)
    if not _clear(scene, centers):
        return None
    fwd = targets - centers
    fwd /= np.linalg.norm(fwd, axis=1, keepdims=True)
    if (np.abs(fwd[:, 2]) > 0.97).any():
        return None
    roll_deg = 4 if params.rotation_jitter_deg is None else params.rotation_jitter_deg
    rolls = np.deg2rad(rng.uniform(-roll_deg, roll_deg, views))
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
    return K, w2c
