"""The straight camera rigs of ``depthpe synth --rig``: ``stereo`` and ``line`` (``straight_rig``), with
one viewing direction shared by all cameras and the distance from the first to the last camera set
from the depth the rig sees (``SynthParams.depth_ratio``); their rotation jitter (``jittered``)."""

from __future__ import annotations

import numpy as np

from .params import SynthParams, _log_uniform
from .raycast import probe_depths
from .scene import Scene
from .trajectories import _look_vectors, intrinsics_from_fov, look_at_w2c

__all__ = ["STRAIGHT_RIGS", "straight_rig", "jittered"]

STRAIGHT_RIGS = ("stereo", "line")
_MIN_HIT = 0.5  # the share of the centre view's probe rays that must hit geometry to set the baseline


def straight_rig(rng: np.random.Generator, scene: Scene, views: int, height: int, width: int, hfov: float,
                 params: SynthParams, path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Centres (V, 3), K (V, 3, 3) and w2c (V, 3, 4) of a ``stereo`` or ``line`` rig, or None when the
    rig's centre sees too little geometry to set its baseline.

    A centre in the middle half of the room, one viewing direction (yaw uniform, pitch -15..10
    degrees, roll 0) and one K (horizontal FOV ``hfov`` radians, principal point at the image
    centre) for all cameras. The cameras lie on a line through the centre, perpendicular to the
    viewing direction, from -extent/2 to +extent/2 with ``extent = median z-depth / rho``: the median
    over a 16 x 16 probe of the centre view, then once more (32 x 32) of the V views where they stand (the
    extent rescaled by their median depth over the centre's), ``rho`` log-uniform in
    ``params.depth_ratio``. stereo:
    evenly spaced along the camera x axis, identical rotations (rectified: epipolar lines are image
    rows); line: along a random direction of the image plane, the inner cameras at uniform random
    positions (sorted), each rotation jittered by ``params.rotation_jitter_deg`` (``jittered``)."""
    if path not in STRAIGHT_RIGS:
        raise ValueError(f"unknown straight rig {path!r}; expected one of {STRAIGHT_RIGS}")
    lo, hi = scene.room_min, scene.room_max
    dims = hi - lo
    center = rng.uniform(lo + 0.25 * dims, hi - 0.25 * dims)
    forward = _look_vectors(np.array([rng.uniform(0, 2 * np.pi)]), np.deg2rad([rng.uniform(-15, 10)]))[0]
    w2c0 = look_at_w2c(center, center + forward)
    K = intrinsics_from_fov(hfov, height, width)
    t, hit = probe_depths(scene, K[None], w2c0[None], height, width, side=16)
    if hit.mean() < _MIN_HIT:
        return None
    depth = float(np.median(t[hit]))
    extent = depth / _log_uniform(rng, params.depth_ratio)
    R = w2c0[:, :3]
    if path == "stereo":
        axis, offsets = R[0], np.linspace(-0.5, 0.5, views)
    else:
        angle = rng.uniform(0, np.pi)
        axis = np.cos(angle) * R[0] + np.sin(angle) * R[1]
        offsets = np.concatenate([[-0.5], np.sort(rng.uniform(-0.5, 0.5, views - 2)), [0.5]])
    rotations = jittered(rng, R, views, params.rotation_jitter_deg or 0.0)
    Ks = np.repeat(K[None], views, axis=0)
    centers = center + extent * offsets[:, None] * axis
    t, hit = probe_depths(scene, Ks, _w2c(rotations, centers), height, width, side=32)
    if hit.any():  # once more from where the cameras are: the median depth they see sets the ratio
        centers = center + extent * float(np.median(t[hit])) / depth * offsets[:, None] * axis
    return centers, Ks, _w2c(rotations, centers)


def _w2c(rotations: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """(V, 3, 4) world-to-camera of rotations (V, 3, 3) at centres (V, 3)."""
    return np.concatenate([rotations, -np.einsum("vij,vj->vi", rotations, centers)[:, :, None]], axis=2)


def jittered(rng: np.random.Generator, R: np.ndarray, views: int, jitter_deg: float) -> np.ndarray:
    """(V, 3, 3) world-to-camera rotations: ``R`` (3, 3) turned in the camera frame by a yaw (about
    the camera y axis), a pitch (x) and a roll (z) each uniform within +-``jitter_deg`` degrees,
    independently per view; exactly ``R`` for every view when ``jitter_deg`` is 0 (no draw)."""
    if jitter_deg == 0:
        return np.repeat(R[None], views, axis=0)
    yaw, pitch, roll = np.deg2rad(rng.uniform(-jitter_deg, jitter_deg, (3, views)))
    return np.stack([_camera_turn(y, p, r) @ R for y, p, r in zip(yaw, pitch, roll)])


def _camera_turn(yaw: float, pitch: float, roll: float) -> np.ndarray:
    """Rotation (3, 3) of camera coordinates: roll about z, then pitch about x, then yaw about y."""
    cy, sy, cp, sp, cr, sr = np.cos(yaw), np.sin(yaw), np.cos(pitch), np.sin(pitch), np.cos(roll), np.sin(roll)
    Ry = np.array([[cy, 0.0, sy], [0.0, 1.0, 0.0], [-sy, 0.0, cy]])
    Rx = np.array([[1.0, 0.0, 0.0], [0.0, cp, -sp], [0.0, sp, cp]])
    Rz = np.array([[cr, -sr, 0.0], [sr, cr, 0.0], [0.0, 0.0, 1.0]])
    return Ry @ Rx @ Rz
