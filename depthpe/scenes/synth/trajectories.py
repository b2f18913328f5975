"""Camera paths through a scene (orbit, walk, dolly, truck, rig: centres and look-at targets), the
look-at world-to-camera matrix and intrinsics from a field of view. The straight rigs (stereo, line),
whose baseline follows the depth they see, are in ``rigs.py``."""

from __future__ import annotations

import numpy as np

from .params import DEFAULT_PARAMS, SynthParams, _log_uniform
from .scene import _FACE_UV_AXES, Scene

__all__ = ["look_at_w2c", "intrinsics_from_fov"]


def look_at_w2c(center: np.ndarray, target: np.ndarray, roll: float = 0.0) -> np.ndarray:
    """OpenCV world-to-camera (3, 4) of a camera at ``center`` looking at ``target``, z-up world.

    Rows of R: x right = forward x up, y down = forward x right, z forward; then a roll (radians)
    about the optical axis. Raises ValueError if the view direction is (almost) vertical.
    """
    f = np.asarray(target, dtype=np.float64) - center
    f = f / np.linalg.norm(f)
    right = np.cross(f, [0.0, 0.0, 1.0])
    nr = np.linalg.norm(right)
    if nr < 1e-6:
        raise ValueError("look_at_w2c: the view direction is vertical, the camera roll is undefined")
    right /= nr
    down = np.cross(f, right)
    c, s = np.cos(roll), np.sin(roll)
    x, y = c * right + s * down, -s * right + c * down
    R = np.stack([x, y, f])
    return np.concatenate([R, (-R @ center)[:, None]], axis=1)


def intrinsics_from_fov(
    hfov: float, height: int, width: int, cx: float | None = None, cy: float | None = None
) -> np.ndarray:
    """(3, 3) pixel intrinsics with horizontal field of view ``hfov`` (radians), square pixels and
    principal point (cx, cy) (default: the image centre ((W-1)/2, (H-1)/2), OpenCV convention)."""
    fx = (width / 2) / np.tan(hfov / 2)
    cx = (width - 1) / 2 if cx is None else cx
    cy = (height - 1) / 2 if cy is None else cy
    return np.array([[fx, 0.0, cx], [0.0, fx, cy], [0.0, 0.0, 1.0]])


def _smooth_noise(rng: np.random.Generator, n: int) -> np.ndarray:
    """A smooth random curve in about [-1, 1] sampled at n points (sum of two random sinusoids)."""
    x = np.linspace(0, 1, n)
    out = np.zeros(n)
    for k in (1, 2):
        out += rng.uniform(0.3, 0.7) / k * np.sin(2 * np.pi * (k * rng.uniform(0.3, 1.0) * x + rng.uniform()))
    return out


def _orbit_trajectory(rng: np.random.Generator, scene: Scene, views: int,
                      params: SynthParams = DEFAULT_PARAMS) -> tuple[np.ndarray, np.ndarray]:
    """Camera centres (V, 3) and look-at targets (V, 3) on an arc around a point of interest."""
    s = scene.scale
    if scene.primitives and rng.uniform() < params.orbit_object_p:
        target = scene.primitives[rng.integers(len(scene.primitives))].center.copy()
    else:
        lo, hi = scene.room_min, scene.room_max
        target = rng.uniform(0.7 * lo + 0.3 * hi, 0.3 * lo + 0.7 * hi)
    wobble = params.orbit_wobble
    radius = s * rng.uniform(*params.orbit_radius) * (1 + 0.2 * wobble * _smooth_noise(rng, views))
    elev = np.deg2rad(rng.uniform(5, 45) + 10 * wobble * _smooth_noise(rng, views))
    arc = np.deg2rad(rng.uniform(*params.orbit_arc_deg))
    step = arc / max(views - 1, 1)
    az = rng.uniform(0, 2 * np.pi) + np.linspace(0, arc, views) + rng.uniform(-0.2, 0.2, views) * step
    offs = np.stack([np.cos(az) * np.cos(elev), np.sin(az) * np.cos(elev), np.sin(elev)], axis=1)
    centers = target + radius[:, None] * offs
    targets = target + rng.normal(scale=0.03 * s, size=(views, 3))
    return centers, targets


def _walk_trajectory(rng: np.random.Generator, scene: Scene, views: int,
                     params: SynthParams = DEFAULT_PARAMS) -> tuple[np.ndarray, np.ndarray]:
    """Camera centres (V, 3) along a cubic Bezier path and look-at targets (V, 3) ahead of them."""
    lo, hi = scene.room_min, scene.room_max
    dims = hi - lo
    mid, length, heading = _path_start(rng, scene, params)
    # A gently curving path: control points along a random heading, with lateral wiggle.
    along = np.array([np.cos(heading), np.sin(heading), 0.0])
    side = np.array([-along[1], along[0], 0.0])
    k = np.arange(4)[:, None] / 3 - 0.5
    ctrl = (
        mid
        + length * k * along
        + rng.uniform(-0.15, 0.15, (4, 1)) * length * side
        + rng.uniform(-0.05, 0.05, (4, 1)) * dims[2] * np.array([0.0, 0.0, 1.0])
    )
    tau = np.linspace(0, 1, views)[:, None]
    bez = np.array([1, 3, 3, 1])
    basis = np.stack([bez[k] * tau[:, 0] ** k * (1 - tau[:, 0]) ** (3 - k) for k in range(4)], axis=1)
    dbasis = np.stack(
        [3 * ((1 - tau[:, 0]) ** 2), 6 * tau[:, 0] * (1 - tau[:, 0]), 3 * tau[:, 0] ** 2], axis=1
    )
    centers = basis @ ctrl
    tangent = dbasis @ (ctrl[1:] - ctrl[:-1])
    yaw = np.arctan2(tangent[:, 1], tangent[:, 0]) + rng.uniform(-0.8, 0.8) + 0.15 * _smooth_noise(rng, views)
    pitch = np.deg2rad(rng.uniform(-20, 10) + 8 * _smooth_noise(rng, views))
    if scene.holes and rng.uniform() < 0.5:  # look out of an opening, roughly
        face, (u0, u1, v0, v1) = scene.holes[rng.integers(len(scene.holes))]
        ua, va = _FACE_UV_AXES[face]
        hole = np.empty(3)
        hole[face // 2] = (scene.room_max if face % 2 else scene.room_min)[face // 2]
        hole[ua] = np.clip((u0 + u1) / 2, lo[ua], hi[ua])
        hole[va] = np.clip((v0 + v1) / 2, lo[va], hi[va])
        to_hole = hole - centers
        yaw = np.arctan2(to_hole[:, 1], to_hole[:, 0]) + rng.uniform(-0.4, 0.4)
        yaw = yaw + 0.2 * _smooth_noise(rng, views)
        elev = np.arctan2(to_hole[:, 2], np.hypot(to_hole[:, 0], to_hole[:, 1]))
        pitch = np.clip(elev, np.deg2rad(-25), np.deg2rad(50)) + np.deg2rad(rng.uniform(-10, 10))
    return centers, centers + _look_vectors(yaw, pitch)


def _path_start(rng: np.random.Generator, scene: Scene, params: SynthParams) -> tuple[np.ndarray, float, float]:
    """Middle point (in the central 40% of the room), length (``params.walk_length`` x ``s``) and
    heading (radians) of a walk, dolly or truck path."""
    lo, hi = scene.room_min, scene.room_max
    dims = hi - lo
    mid = rng.uniform(lo + 0.3 * dims, hi - 0.3 * dims)
    length = scene.scale * rng.uniform(*params.walk_length)
    return mid, length, rng.uniform(0, 2 * np.pi)


def _look_vectors(yaw: np.ndarray, pitch: np.ndarray) -> np.ndarray:
    """(V, 3) unit viewing directions for yaw (about +z, from +x) and pitch (up from horizontal)."""
    return np.stack([np.cos(yaw) * np.cos(pitch), np.sin(yaw) * np.cos(pitch), np.sin(pitch)], axis=1)


def _line_trajectory(rng: np.random.Generator, scene: Scene, views: int, params: SynthParams,
                     sideways: bool) -> tuple[np.ndarray, np.ndarray]:
    """Camera centres (V, 3) evenly spaced on a horizontal straight segment and look-at targets (V, 3):
    looking along the motion (dolly) or perpendicular to it (truck, ``sideways``), with a fixed
    offset of up to +-0.15 rad in yaw, pitch -15..10 degrees and a small smooth yaw wobble."""
    mid, length, heading = _path_start(rng, scene, params)
    along = np.array([np.cos(heading), np.sin(heading), 0.0])
    centers = mid + length * (np.linspace(0, 1, views) - 0.5)[:, None] * along
    side = np.pi / 2 * rng.choice([-1.0, 1.0]) if sideways else 0.0
    yaw = heading + side + rng.uniform(-0.15, 0.15) + 0.05 * _smooth_noise(rng, views)
    pitch = np.full(views, np.deg2rad(rng.uniform(-15, 10)))
    return centers, centers + _look_vectors(yaw, pitch)


def _dolly_trajectory(rng: np.random.Generator, scene: Scene, views: int,
                      params: SynthParams = DEFAULT_PARAMS) -> tuple[np.ndarray, np.ndarray]:
    """A straight forward-moving path (``_line_trajectory`` looking along the motion)."""
    return _line_trajectory(rng, scene, views, params, sideways=False)


def _truck_trajectory(rng: np.random.Generator, scene: Scene, views: int,
                      params: SynthParams = DEFAULT_PARAMS) -> tuple[np.ndarray, np.ndarray]:
    """A straight sideways-moving path (``_line_trajectory`` looking perpendicular to the motion)."""
    return _line_trajectory(rng, scene, views, params, sideways=True)


def _rig_trajectory(rng: np.random.Generator, scene: Scene, views: int,
                    params: SynthParams = DEFAULT_PARAMS) -> tuple[np.ndarray, np.ndarray]:
    """Camera centres (V, 3) and look-at targets (V, 3) of a geometry-only rig.

    The centres lie on a gently curving path of length ``s / rho`` (``rho`` log-uniform in
    ``params.depth_ratio``) through a random point of the room's middle, heading in a random
    direction (up to 20 degrees out of the horizontal); every camera looks along one random
    direction (yaw uniform, pitch -15..10 degrees) with a smooth jitter of a few degrees (or, with
    ``params.rotation_jitter_deg``, yaw and pitch uniform within +- that many degrees per view). Nothing
    of it depends on the scene content, so the cameras carry no cue about the depth (a fixation
    point where the optical axes meet, as in an orbit, would give it away) and ``rho`` is
    independent of every camera quantity (docs/data.md)."""
    lo, hi = scene.room_min, scene.room_max
    dims = hi - lo
    start = rng.uniform(lo + 0.25 * dims, hi - 0.25 * dims)
    length = scene.scale / _log_uniform(rng, params.depth_ratio)
    az, el = rng.uniform(0, 2 * np.pi), np.deg2rad(rng.uniform(-20, 20))
    along = np.array([np.cos(az) * np.cos(el), np.sin(az) * np.cos(el), np.sin(el)])
    side = np.array([-np.sin(az), np.cos(az), 0.0])
    tau = np.linspace(0, 1, views) - 0.5
    centers = start + length * (tau[:, None] * along + 0.1 * _smooth_noise(rng, views)[:, None] * side)
    jitter = params.rotation_jitter_deg
    if jitter is None:
        yaw = rng.uniform(0, 2 * np.pi) + np.deg2rad(4) * _smooth_noise(rng, views)
        pitch = np.deg2rad(rng.uniform(-15, 10) + 3 * _smooth_noise(rng, views))
    else:
        yaw = rng.uniform(0, 2 * np.pi) + np.deg2rad(rng.uniform(-jitter, jitter, views))
        pitch = np.deg2rad(rng.uniform(-15, 10) + rng.uniform(-jitter, jitter, views))
    return centers, centers + _look_vectors(yaw, pitch)


_PATH_STYLES = {
    "orbit": _orbit_trajectory, "walk": _walk_trajectory, "dolly": _dolly_trajectory, "truck": _truck_trajectory,
    "rig": _rig_trajectory,
}
