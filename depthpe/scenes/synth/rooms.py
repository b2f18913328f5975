"""Drawing a random scene of a ``SynthParams`` distribution: the room and its openings, its
textured primitives, the light and the sky (``random_scene``)."""

from __future__ import annotations

import colorsys

import numpy as np

from .params import DEFAULT_PARAMS, SynthParams, _log_uniform
from .scene import _FACE_UV_AXES, PRIMITIVE_KINDS, TEXTURE_KINDS, Primitive, Scene, Texture

__all__ = ["random_scene"]


def _random_color(rng: np.random.Generator) -> np.ndarray:
    h, s, v = rng.uniform(0, 1), rng.uniform(0.1, 0.9), rng.uniform(0.3, 1.0)
    return np.array(colorsys.hsv_to_rgb(h, s, v))


def _color_pair(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two random RGB colours (3,) in [0, 1] with some contrast, so that a pattern of them is visible."""
    a = _random_color(rng)
    b = _random_color(rng)
    if np.abs(a - b).sum() < 0.3:
        b = np.clip(1.0 - a + rng.uniform(-0.1, 0.1, 3), 0, 1)
    return a, b


def _random_texture(rng: np.random.Generator, scale: float) -> Texture:
    kind = TEXTURE_KINDS[rng.integers(len(TEXTURE_KINDS))]
    a, b = _color_pair(rng)
    period = scale * np.exp(rng.uniform(np.log(0.03), np.log(0.3)))
    return Texture(
        kind=kind,
        color_a=a,
        color_b=b,
        scale=float(period),
        angle=float(rng.uniform(0, np.pi)),
        seed=int(rng.integers(0, 2**31 - 1)),
        detail=float(rng.uniform(0.05, 0.35)),
    )


def _random_rotation(rng: np.random.Generator) -> np.ndarray:
    """Uniformly random rotation (QR of a Gaussian matrix with sign fix), det +1."""
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def _yaw_rotation(yaw: float) -> np.ndarray:
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _half_extent(prim: Primitive) -> np.ndarray:
    """(3,) half-size of the world axis-aligned bounding box of a primitive."""
    R, size = prim.rotation, prim.size
    if prim.kind == "sphere":
        return np.full(3, size[0])
    if prim.kind == "box":
        return np.abs(R) @ size
    axis = R[:, 2]  # cylinder: disc of radius r around the axis plus the axis half-length
    return np.abs(axis) * size[2] + size[0] * np.sqrt(np.clip(1 - axis**2, 0, 1))


def random_scene(rng: np.random.Generator, params: SynthParams = DEFAULT_PARAMS) -> Scene:
    """Draw a random room with 3-8 primitives (with the default ``params``).

    The global scale ``s`` is log-uniform in [3, 10]; the room is ``r * U(0.6, 1)`` wide and deep
    and ``r * U(0.35, 0.7)`` high with ``r = s`` (or ``r`` drawn from ``params.room_scale``), at a
    random offset from the origin. About 60% of the scenes have one or two openings (missing wall,
    window or skylight). Primitives lie fully inside the room, either resting on the floor or floating.
    """
    s = _log_uniform(rng, params.scale)
    r = s if params.room_scale is None else _log_uniform(rng, params.room_scale)
    dims = r * np.array([rng.uniform(0.6, 1.0), rng.uniform(0.6, 1.0), rng.uniform(0.35, 0.7)])
    room_min = rng.uniform(-r, r, 3) - dims / 2
    room_max = room_min + dims
    textures = [_random_texture(rng, r) for _ in range(6)]
    holes = _random_openings(rng, room_min, room_max)
    primitives: list[Primitive] = []
    lo, hi = params.object_count
    for _ in range(int(rng.integers(lo, hi + 1))):
        prim = _random_primitive(rng, s, dims, room_min, room_max, params)
        if prim is not None:
            primitives.append(prim)
    light = np.array([rng.uniform(-0.6, 0.6), rng.uniform(-0.6, 0.6), 1.0])
    return Scene(
        room_min=room_min,
        room_max=room_max,
        face_textures=textures,
        holes=holes,
        primitives=primitives,
        light_dir=light / np.linalg.norm(light),
        ambient=_ambient(rng, params),
        sky_horizon=np.clip(_random_color(rng) * 0.3 + 0.7, 0, 1),
        sky_zenith=_random_color(rng),
        scale=s,
    )


def _ambient(rng: np.random.Generator, params: SynthParams) -> float:
    """Ambient light in [0.25, 0.45] (drawn in every style, so the random stream stays the same),
    1.0 with ``params.flat_shading``."""
    ambient = float(rng.uniform(0.25, 0.45))
    return 1.0 if params.flat_shading else ambient


def _random_openings(rng: np.random.Generator, room_min: np.ndarray,
                     room_max: np.ndarray) -> list[tuple[int, tuple[float, float, float, float]]]:
    """0-2 openings of the room as ``(face, (u0, u1, v0, v1))`` rectangles in the face's (u, v) axes:
    a missing wall, a window in the upper part of a wall, or a skylight; the floor is never open."""
    holes: list[tuple[int, tuple[float, float, float, float]]] = []
    n_openings = int(rng.choice([0, 1, 2], p=[0.25, 0.55, 0.2]))
    for face in rng.permutation(6)[:n_openings]:
        face = int(face)
        if face == 4:
            face = 5  # never open the floor: skylight instead
        if any(f == face for f, _ in holes):
            continue
        ua, va = _FACE_UV_AXES[face]
        lo_u, hi_u = room_min[ua], room_max[ua]
        lo_v, hi_v = room_min[va], room_max[va]
        if face < 4 and rng.uniform() < 0.4:  # missing wall
            holes.append((face, (lo_u - 1, hi_u + 1, lo_v - 1, hi_v + 1)))
            continue
        # window (walls: upper part of the wall, may reach the ceiling) or skylight (ceiling)
        fu = np.sort(rng.uniform(0.05, 0.95, 2))
        fv = np.sort(rng.uniform(0.05, 0.95, 2) if face == 5 else rng.uniform(0.2, 1.05, 2))
        fu[1] = max(fu[1], fu[0] + 0.3)
        fv[1] = max(fv[1], fv[0] + 0.3)
        u0, u1 = lo_u + fu * (hi_u - lo_u)
        v0, v1 = lo_v + fv * (hi_v - lo_v)
        holes.append((face, (float(u0), float(u1), float(v0), float(v1))))
    return holes


def _random_primitive(rng: np.random.Generator, s: float, dims: np.ndarray, room_min: np.ndarray,
                      room_max: np.ndarray, params: SynthParams = DEFAULT_PARAMS) -> Primitive | None:
    """One random box, sphere or cylinder (``params.object_kinds``) of size ~``s * U(0.05, 0.14)``
    (``params.object_size``) placed fully inside the room (size ``dims``), resting on the floor (60%)
    or floating; None if it is too big for the room."""
    kind = params.object_kinds[rng.integers(len(params.object_kinds))]
    if kind not in PRIMITIVE_KINDS:
        raise ValueError(f"unknown primitive kind {kind!r}; expected one of {PRIMITIVE_KINDS}")
    c = s * rng.uniform(*params.object_size)
    if kind == "box":
        size = c * rng.uniform(0.5, 1.5, 3)
        R = _yaw_rotation(rng.uniform(0, 2 * np.pi)) if rng.uniform() < 0.5 else _random_rotation(rng)
    elif kind == "sphere":
        size = np.full(3, c)
        R = _random_rotation(rng)
    else:
        r = c * rng.uniform(0.4, 1.0)
        size = np.array([r, r, c * rng.uniform(0.5, 2.0)])
        R = _yaw_rotation(rng.uniform(0, 2 * np.pi)) if rng.uniform() < 0.6 else _random_rotation(rng)
    prim = Primitive(kind, np.zeros(3), R, size, _random_texture(rng, s))
    ext = _half_extent(prim)
    if np.any(2 * ext >= dims * 0.9):
        return None  # too big for this room
    center = rng.uniform(room_min + ext, room_max - ext)
    if rng.uniform() < 0.6:  # resting on the floor
        center[2] = room_min[2] + ext[2]
    prim.center = center
    return prim
