"""Procedural MegaSynth-like multi-view scenes: an exact numpy ray caster and a dataset writer.

A scene is a box-shaped room (floor, walls, ceiling) with procedural textures (checker, stripes,
value noise, colour bands), usually with one or two openings (a missing wall, a window or a
skylight) through which rays escape to a sky, plus 3-8 textured primitives (rotated boxes, spheres,
finite capped cylinders). Cameras either orbit a point of interest or walk through the room along a
smooth path. Rendering is exact ray casting at the pixel centres, vectorized over all pixels of a
view, in float64, with Lambertian shading (key light + ambient) and shadows cast by the primitives.

Conventions (docs/conventions.md):

* world frame: right-handed, **z up** (the floor is ``z = room_min[2]``); units are arbitrary
  "scene" units (``depth_units="scene"``, ``metric=False``).
* ``K``: (V, 3, 3) pixel intrinsics, OpenCV (pixel centres at integer coordinates, zero skew), so the
  ray through pixel (u, v) is ``K^-1 [u, v, 1]``.
* ``w2c``: (V, 3, 4) OpenCV world-to-camera (x right, y down, z forward): ``x_cam = R x_world + t``.
* depth: (V, H, W) float32 **z-depth** (distance along the optical axis, not ray length); 0 where a
  ray escapes through an opening (the image shows the sky there). Never NaN or inf.
* images: (V, H, W, 3) uint8 RGB.

Everything in a scene (room, primitives, texture scales, camera distances) is drawn relative to one
global scale ``s`` in [3, 10] units, so a single image carries no cue about ``s``: recovering the
scale of the depth needs the camera translations (the multi-view geometry).

The distribution is set by ``SynthParams`` (defaults: the distribution described above);
``shift_params`` builds the named distribution shifts of ``SHIFTS`` (``depthpe synth --shift NAME``),
which change room size, camera baseline, camera path, field of view or object statistics.

Per-scene randomness comes from ``numpy.random.SeedSequence(seed, spawn_key=(split, index))``, so a
scene depends only on (seed, split, index): runs are deterministic, resumable and train/val scenes
never share a random stream.
"""

from __future__ import annotations

import colorsys
import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

__all__ = [
    "Texture",
    "Primitive",
    "Scene",
    "SceneGenerationError",
    "SynthParams",
    "SHIFTS",
    "shift_names",
    "shift_label",
    "shift_params",
    "STYLES",
    "style_params",
    "DATASET_NAME",
    "SOURCE",
    "DEFAULT_HEIGHT",
    "DEFAULT_WIDTH",
    "DEFAULT_VIEWS",
    "DEFAULT_TRAIN_SCENES",
    "DEFAULT_VAL_SCENES",
    "scene_seed",
    "random_scene",
    "random_cameras",
    "look_at_w2c",
    "intrinsics_from_fov",
    "camera_rays",
    "cast_rays",
    "render_views",
    "render_view",
    "surface_distance",
    "free_space_clearance",
    "generate_scene",
    "write_synth_dataset",
    "format_summary",
]

DATASET_NAME = "synth"
SOURCE = "depthpe procedural v1"
# Defaults: 140 px = 1.25 x 112, so a 0.8-scale augmentation crop still covers a 112 px training
# image without upsampling (the quickstart trains at 112); 12 views per scene.
DEFAULT_HEIGHT = 140
DEFAULT_WIDTH = 140
DEFAULT_VIEWS = 12
DEFAULT_TRAIN_SCENES = 64
DEFAULT_VAL_SCENES = 16

SPLIT_KEYS = {"train": 0, "val": 1, "test": 2}
TEXTURE_KINDS = ("checker", "stripes", "noise", "gradient")
PRIMITIVE_KINDS = ("box", "sphere", "cylinder")
# Room faces in this order: -x, +x, -y, +y, floor (-z), ceiling (+z). Face f lies on axis f // 2.
FACE_NAMES = ("wall_x0", "wall_x1", "wall_y0", "wall_y1", "floor", "ceiling")
_FACE_UV_AXES = ((1, 2), (1, 2), (0, 2), (0, 2), (0, 1), (0, 1))
_SKY = -1  # surface id of rays that escape


class SceneGenerationError(RuntimeError):
    """No valid camera trajectory could be drawn for a random scene (should be very rare)."""


# --------------------------------------------------------------------------------------------
# Scene description
# --------------------------------------------------------------------------------------------


@dataclass
class Texture:
    """A procedural texture, a pure function of 2D surface coordinates (in scene units).

    kind: one of "checker", "stripes", "noise", "gradient"; color_a/color_b: (3,) RGB in [0, 1];
    scale: pattern period in scene units; angle: pattern rotation (radians); seed: lattice seed of
    the value noise; detail: amplitude in [0, 1) of a fine multiplicative noise on top.
    """

    kind: str
    color_a: np.ndarray
    color_b: np.ndarray
    scale: float
    angle: float
    seed: int
    detail: float


@dataclass
class Primitive:
    """A solid primitive in the room.

    kind: "box" | "sphere" | "cylinder"; center: (3,) world position; rotation: (3, 3) local-to-world
    rotation; size: (3,) box half-extents (local x, y, z), sphere (r, r, r), cylinder
    (r, r, half_height) with the cylinder axis along local z (capped at z = +-half_height).
    """

    kind: str
    center: np.ndarray
    rotation: np.ndarray
    size: np.ndarray
    texture: Texture


@dataclass
class Scene:
    """A room with primitives, lighting and an optional opening.

    room_min/room_max: (3,) corners of the axis-aligned room interior (z up).
    face_textures: 6 textures in FACE_NAMES order. holes: list of (face, (u0, u1, v0, v1)): rays
    leaving the room through that rectangle of face ``face`` escape (no hit, depth 0); (u, v) are
    the face's two world coordinates in ``_FACE_UV_AXES`` order. light_dir: (3,) unit vector towards
    the key light; ambient in [0, 1]; sky_horizon/sky_zenith: (3,) RGB of the background.
    scale: the global scale the scene was drawn with (scene units).
    """

    room_min: np.ndarray
    room_max: np.ndarray
    face_textures: list[Texture]
    holes: list[tuple[int, tuple[float, float, float, float]]]
    primitives: list[Primitive] = field(default_factory=list)
    light_dir: np.ndarray = field(default_factory=lambda: np.array([0.3, 0.2, 0.93]))
    ambient: float = 0.35
    sky_horizon: np.ndarray = field(default_factory=lambda: np.array([0.85, 0.9, 1.0]))
    sky_zenith: np.ndarray = field(default_factory=lambda: np.array([0.35, 0.55, 0.9]))
    scale: float = 5.0


@dataclass(frozen=True)
class SynthParams:
    """The parameters of the scene distribution; the defaults are the training distribution.

    Ranges are (low, high). scale: the global scale ``s`` (log-uniform) that sets the size of the
    objects, the textures and the camera motion; room_scale: the scale of the room (walls, floor,
    ceiling and their textures), log-uniform, or None for the room to use ``s``; the room is
    ``U(0.6, 1)`` x that scale wide and deep and ``U(0.35, 0.7)`` x it high. object_count: number of
    primitives drawn (inclusive range; a primitive too big for the room is dropped); object_size:
    primitive size in units of ``s``; object_kinds: the shapes drawn (uniformly; repeat a name to
    weight it). paths: camera path styles, drawn uniformly per trajectory ("orbit", "walk", "dolly":
    straight line looking along the motion, "truck": straight line looking sideways, "rig": the
    geometry-only path of ``_rig_trajectory``); orbit_object_p:
    probability that an orbit circles a primitive (else a random point of the room); orbit_radius:
    orbit distance in units of ``s``; orbit_arc_deg: azimuth covered by an orbit; orbit_wobble:
    multiplier of the orbit's smooth radius (+-20%) and elevation (+-10 deg) variation;
    walk_length: length of a walk, dolly or truck path in units of ``s``. hfov_deg: ranges of the
    horizontal field of view in degrees; one range is drawn uniformly per scene, then a value in it.
    depth_ratio: the ratio ``rho`` of ``s`` to the length of a "rig" path (log-uniform; the other
    paths ignore it). flat_shading: light every surface fully (ambient 1: no shading, no shadows).
    """

    scale: tuple[float, float] = (3.0, 10.0)
    room_scale: tuple[float, float] | None = None
    object_count: tuple[int, int] = (3, 8)
    object_size: tuple[float, float] = (0.05, 0.14)
    object_kinds: tuple[str, ...] = ("box", "sphere", "cylinder")
    paths: tuple[str, ...] = ("orbit", "walk")
    orbit_object_p: float = 0.75
    orbit_radius: tuple[float, float] = (0.2, 0.45)
    orbit_arc_deg: tuple[float, float] = (30.0, 180.0)
    orbit_wobble: float = 1.0
    walk_length: tuple[float, float] = (0.15, 0.45)
    hfov_deg: tuple[tuple[float, float], ...] = ((45.0, 70.0),)
    depth_ratio: tuple[float, float] = (2.0, 12.0)
    flat_shading: bool = False


# Named distribution shifts: the SynthParams fields each one changes (``depthpe synth --shift``).
SHIFTS: dict[str, dict] = {
    # rooms 12-30 units instead of 3-10 around objects and camera paths of the default size: far
    # walls, so scene depth is no longer proportional to the camera motion; orbits always circle an
    # object (an orbit around empty space of a big room sees different far walls from each view)
    "scale": {"room_scale": (12.0, 30.0), "orbit_object_p": 1.0},
    # about 5x less camera motion relative to the scene: short orbit arcs, little wobble, short walks
    "baseline": {"orbit_arc_deg": (5.0, 15.0), "orbit_wobble": 0.15, "walk_length": (0.03, 0.08)},
    # straight-line paths (forward dolly, sideways truck) instead of orbits and walks
    "path": {"paths": ("dolly", "truck")},
    # narrow (30-40 deg) or wide (80-95 deg) horizontal field of view instead of 45-70 deg
    "fov": {"hfov_deg": ((30.0, 40.0), (80.0, 95.0))},
    # clutter: 10-16 smaller spheres and cylinders (no boxes) instead of 3-8 boxes/spheres/cylinders
    "objects": {"object_count": (10, 16), "object_size": (0.03, 0.08), "object_kinds": ("sphere", "cylinder")},
}


def shift_names(names: Sequence[str]) -> tuple[str, ...]:
    """Validate shift names (``SHIFTS`` keys or "all") -> the distinct shifts in ``SHIFTS`` order."""
    unknown = sorted(set(names) - set(SHIFTS) - {"all"})
    if unknown:
        raise ValueError(f"unknown shift(s) {unknown}; expected some of {[*SHIFTS, 'all']}")
    chosen = set(SHIFTS) if "all" in names else set(names)
    return tuple(name for name in SHIFTS if name in chosen)


def shift_label(names: Sequence[str]) -> str | None:
    """The label recorded for a set of shifts: "all", the names joined by "-", or None for none."""
    names = shift_names(names)
    if not names:
        return None
    return "all" if len(names) == len(SHIFTS) else "-".join(names)


def shift_params(names: Sequence[str] = ()) -> SynthParams:
    """The ``SynthParams`` of the default distribution with the named shifts applied (see ``SHIFTS``)."""
    changes: dict = {}
    for name in shift_names(names):
        changes.update(SHIFTS[name])
    return replace(SynthParams(), **changes)


# Named scene styles (``depthpe synth --style NAME``): the SynthParams fields each one changes.
STYLES: dict[str, dict] = {
    "default": {},
    # geometry-only scenes: the depth / camera-path ratio is drawn on its own (log-uniform, 6x range),
    # the cameras look along one random direction (rotations say nothing of the content), surfaces
    # are flat-lit (no shading or shadow cue) and object sizes vary more
    "geometry": {"paths": ("rig",), "depth_ratio": (2.0, 12.0), "flat_shading": True,
                 "object_size": (0.04, 0.18)},
}


def style_params(style: str = "default", shifts: Sequence[str] = ()) -> SynthParams:
    """The ``SynthParams`` of scene style ``style`` (``STYLES``), with the named shifts applied to the
    default style (a shift changes fields the geometry style sets, so the two do not combine)."""
    if style not in STYLES:
        raise ValueError(f"unknown synth style {style!r}; expected one of {sorted(STYLES)}")
    if style != "default" and shift_names(shifts):
        raise ValueError(f"synth style {style!r} cannot be combined with --shift; use one or the other")
    return replace(shift_params(shifts), **STYLES[style])


DEFAULT_PARAMS = SynthParams()


def _log_uniform(rng: np.random.Generator, lo_hi: tuple[float, float]) -> float:
    return float(np.exp(rng.uniform(np.log(lo_hi[0]), np.log(lo_hi[1]))))


def scene_seed(seed: int, split: str, index: int) -> np.random.SeedSequence:
    """The SeedSequence of scene ``index`` of ``split`` for a dataset ``seed``.

    Built as ``SeedSequence(seed, spawn_key=(split_key, index))`` so that every (split, index)
    gets an independent stream: train and val scenes never coincide and a scene does not depend on
    how many scenes are generated.
    """
    if split not in SPLIT_KEYS:
        raise ValueError(f"unknown split {split!r}; expected one of {sorted(SPLIT_KEYS)}")
    if seed < 0 or index < 0:
        raise ValueError(f"seed and index must be non-negative, got seed={seed}, index={index}")
    return np.random.SeedSequence(int(seed), spawn_key=(SPLIT_KEYS[split], int(index)))


# --------------------------------------------------------------------------------------------
# Random scene
# --------------------------------------------------------------------------------------------


def _random_color(rng: np.random.Generator) -> np.ndarray:
    h, s, v = rng.uniform(0, 1), rng.uniform(0.1, 0.9), rng.uniform(0.3, 1.0)
    return np.array(colorsys.hsv_to_rgb(h, s, v))


def _random_texture(rng: np.random.Generator, scale: float) -> Texture:
    kind = TEXTURE_KINDS[rng.integers(len(TEXTURE_KINDS))]
    a = _random_color(rng)
    b = _random_color(rng)
    if np.abs(a - b).sum() < 0.3:  # keep some contrast so that the pattern is visible
        b = np.clip(1.0 - a + rng.uniform(-0.1, 0.1, 3), 0, 1)
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


# --------------------------------------------------------------------------------------------
# Textures
# --------------------------------------------------------------------------------------------


def _hash01(ix: np.ndarray, iy: np.ndarray, seed: int) -> np.ndarray:
    """Deterministic pseudo-random values in [0, 1) on an integer lattice (integer hash)."""
    h = ix.astype(np.int64).astype(np.uint64) * np.uint64(0x9E3779B1)
    h ^= iy.astype(np.int64).astype(np.uint64) * np.uint64(0x85EBCA77)
    h ^= np.uint64((int(seed) * 0xC2B2AE3D) & 0xFFFFFFFFFFFFFFFF)
    h ^= h >> np.uint64(15)
    h *= np.uint64(0x2C1B3C6D)
    h ^= h >> np.uint64(12)
    h *= np.uint64(0x297A2D39)
    h ^= h >> np.uint64(15)
    return (h & np.uint64(0xFFFFFF)).astype(np.float64) / float(1 << 24)


def _value_noise(u: np.ndarray, v: np.ndarray, seed: int) -> np.ndarray:
    """Smooth value noise in [0, 1) at (u, v) (lattice period 1)."""
    iu, iv = np.floor(u), np.floor(v)
    fu, fv = u - iu, v - iv
    fu = fu * fu * (3 - 2 * fu)
    fv = fv * fv * (3 - 2 * fv)
    n00 = _hash01(iu, iv, seed)
    n10 = _hash01(iu + 1, iv, seed)
    n01 = _hash01(iu, iv + 1, seed)
    n11 = _hash01(iu + 1, iv + 1, seed)
    return (n00 * (1 - fu) + n10 * fu) * (1 - fv) + (n01 * (1 - fu) + n11 * fu) * fv


def _fbm(u: np.ndarray, v: np.ndarray, seed: int, octaves: int = 3) -> np.ndarray:
    total, amp, norm = np.zeros_like(u), 1.0, 0.0
    for o in range(octaves):
        total += amp * _value_noise(u * 2**o, v * 2**o, seed + 7919 * o)
        norm += amp
        amp *= 0.5
    return total / norm


def _texture_color(tex: Texture, uv: np.ndarray) -> np.ndarray:
    """Evaluate a texture at surface coordinates uv (N, 2) in scene units -> (N, 3) RGB in [0, 1]."""
    c, s = np.cos(tex.angle), np.sin(tex.angle)
    u = (c * uv[:, 0] + s * uv[:, 1]) / tex.scale
    v = (-s * uv[:, 0] + c * uv[:, 1]) / tex.scale
    if tex.kind == "checker":
        m = ((np.floor(u) + np.floor(v)) % 2).astype(np.float64)
    elif tex.kind == "stripes":
        m = ((u - np.floor(u)) < 0.5).astype(np.float64)
    elif tex.kind == "noise":
        m = _fbm(u, v, tex.seed)
    elif tex.kind == "gradient":
        m = 0.5 + 0.5 * np.sin(2 * np.pi * u / 4 + 3 * _value_noise(u / 4, v / 4, tex.seed))
    else:
        raise ValueError(f"unknown texture kind {tex.kind!r}; expected one of {TEXTURE_KINDS}")
    color = tex.color_a[None, :] * (1 - m[:, None]) + tex.color_b[None, :] * m[:, None]
    fine = _value_noise(uv[:, 0] * 8 / tex.scale, uv[:, 1] * 8 / tex.scale, tex.seed + 1)
    return color * (1 - tex.detail + tex.detail * fine)[:, None]


# --------------------------------------------------------------------------------------------
# Ray casting
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Geometry queries (camera placement and tests)
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Cameras
# --------------------------------------------------------------------------------------------


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
    direction (yaw uniform, pitch -15..10 degrees) with a smooth jitter of a few degrees. Nothing
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
    yaw = rng.uniform(0, 2 * np.pi) + np.deg2rad(4) * _smooth_noise(rng, views)
    pitch = np.deg2rad(rng.uniform(-15, 10) + 3 * _smooth_noise(rng, views))
    return centers, centers + _look_vectors(yaw, pitch)


_PATH_STYLES = {
    "orbit": _orbit_trajectory, "walk": _walk_trajectory, "dolly": _dolly_trajectory, "truck": _truck_trajectory,
    "rig": _rig_trajectory,
}


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


def generate_scene(seed: int | np.random.SeedSequence, views: int, height: int, width: int,
                   params: SynthParams = DEFAULT_PARAMS) -> dict:
    """Draw and render one random scene of the distribution ``params`` (default: the training one).

    seed: an int or a SeedSequence (see ``scene_seed``). Returns dict(images (V, H, W, 3) uint8
    RGB, depth (V, H, W) float32 z-depth (0 = sky), K (V, 3, 3) float64, w2c (V, 3, 4) float64
    OpenCV world-to-camera, scene: the Scene). Deterministic for a seed. If a scene admits no
    valid camera trajectory (rare), a new scene is drawn from the same stream.
    """
    if views < 1 or height < 8 or width < 8:
        raise ValueError(f"need views >= 1 and height, width >= 8; got {views}, {height}, {width}")
    rng = np.random.default_rng(seed)
    for _ in range(20):
        scene = random_scene(rng, params)
        try:
            K, w2c = random_cameras(rng, scene, views, height, width, params=params)
        except SceneGenerationError:
            continue
        images, depth = render_views(scene, K, w2c, height, width)
        return {"images": images, "depth": depth, "K": K, "w2c": w2c, "scene": scene}
    raise SceneGenerationError("could not draw a scene with valid cameras in 20 attempts")


# --------------------------------------------------------------------------------------------
# Dataset writer
# --------------------------------------------------------------------------------------------


def _scene_id(split: str, index: int, shift: str | None = None, style: str | None = None) -> str:
    """``f"{split}_{index:06d}"``, ``f"{split}_shift-{shift}_{index:06d}"`` for a shifted scene or
    ``f"{split}_{style}_{index:06d}"`` for a scene of another style than the default."""
    if style is not None:
        return f"{split}_{style}_{index:06d}"
    return f"{split}_{index:06d}" if shift is None else f"{split}_shift-{shift}_{index:06d}"


def _existing_entry(path: Path, seed: int, views: int, height: int, width: int,
                    shift: str | None = None, style: str | None = None) -> dict | None:
    """Index entry of a complete scene file made by this generator with the same seed, shape,
    shift and style, or None if the file is missing, unreadable or was made with other settings
    (then it is redone)."""
    from depthpe.data.format.scene_file import read_attrs

    attrs = read_attrs(path)
    if attrs is None:
        return None
    same = (
        attrs.get("source") == SOURCE
        and attrs.get("synth_seed") == seed
        and (attrs["num_frames"], attrs["height"], attrs["width"]) == (views, height, width)
        and attrs.get("shift") == shift
        and attrs.get("style") == style
    )
    if not same:
        return None
    entry = {
        "path": path.name,
        "scene_id": attrs["scene_id"],
        "num_frames": views,
        "height": height,
        "width": width,
        "metric": False,
        "depth_units": "scene",
    }
    return _with_labels(entry, shift, style)


def _with_labels(entry: dict, shift: str | None, style: str | None) -> dict:
    """The index entry with ``"shift": shift`` / ``"style": style`` added for a shifted scene or one
    of another style (unchanged for a default one)."""
    labels = {key: value for key, value in (("shift", shift), ("style", style)) if value is not None}
    return {**entry, **labels}


def _label_attrs(shift: str | None, style: str | None) -> dict:
    """Extra scene-file attributes of a shifted scene or one of another style: ``shift`` / ``style``
    (the labels) and ``synth_params`` (the full ``SynthParams`` as JSON); none for a default scene,
    whose files stay as they always were."""
    if shift is None and style is None:
        return {}
    labels = {key: value for key, value in (("shift", shift), ("style", style)) if value is not None}
    return {**labels, "synth_params": json.dumps(asdict(_label_params(shift, style)))}


def _label_params(shift: str | None, style: str | None = None) -> SynthParams:
    """The ``SynthParams`` of a ``shift_label`` and a style (None, None: the default distribution)."""
    if shift is None and style is None:
        return DEFAULT_PARAMS
    return style_params(style or "default", [] if shift is None else shift.split("-"))


def _make_scene_file(job: tuple) -> tuple[dict, str, float, float]:
    """Worker: render and write one scene unless a complete file exists.

    Returns (index entry, "written" | "skipped", render seconds, write seconds).
    """
    from depthpe.data.format.scene_file import write_scene

    split_dir, split, index, seed, views, height, width, shift, style = job
    scene_id = _scene_id(split, index, shift, style)
    path = Path(split_dir) / f"{scene_id}.h5"
    entry = _existing_entry(path, seed, views, height, width, shift, style)
    if entry is not None:
        return entry, "skipped", 0.0, 0.0
    t0 = time.perf_counter()
    out = generate_scene(scene_seed(seed, split, index), views, height, width, _label_params(shift, style))
    t1 = time.perf_counter()
    entry = write_scene(
        path,
        images=out["images"],
        depth=out["depth"],
        K=out["K"],
        w2c=out["w2c"],
        dataset=DATASET_NAME,
        scene_id=scene_id,
        split=split,
        metric=False,
        depth_units="scene",
        source=SOURCE,
        extra_attrs={"synth_seed": int(seed), "synth_index": int(index), **_label_attrs(shift, style)},
    )
    return _with_labels(entry, shift, style), "written", t1 - t0, time.perf_counter() - t1


def write_synth_dataset(
    out_dir: str | os.PathLike,
    *,
    train_scenes: int = DEFAULT_TRAIN_SCENES,
    val_scenes: int = DEFAULT_VAL_SCENES,
    views: int = DEFAULT_VIEWS,
    height: int = DEFAULT_HEIGHT,
    width: int = DEFAULT_WIDTH,
    seed: int = 0,
    workers: int = 1,
    progress: bool = True,
    shift: Sequence[str] = (),
    style: str = "default",
) -> dict:
    """Write ``out_dir/synth/{train,val}/<scene_id>.h5`` and an ``index.json`` per split.

    Scene ``i`` of split ``split`` is ``generate_scene(scene_seed(seed, split, i), ...)``, with
    scene id ``f"{split}_{i:06d}"``. With ``shift`` (names of ``SHIFTS`` or "all") the scenes are
    drawn from ``shift_params(shift)`` with the same random streams, their id is
    ``f"{split}_shift-{label}_{i:06d}"`` (label: ``shift_label``), and the label is recorded as the
    ``shift`` attribute of the file (with the parameters as ``synth_params``) and of its index entry.
    With ``style`` other than "default" (``STYLES``; not combined with ``shift``) the scenes are
    drawn from ``style_params(style)``, named ``f"{split}_{style}_{i:06d}"`` and labelled ``style``
    the same way.
    Files are written atomically by ``scene_file.write_scene``
    (attrs dataset="synth", metric=False, depth_units="scene", source=SOURCE, plus synth_seed and
    synth_index); an existing complete file with the same seed, frame count and size is skipped, so
    an interrupted run can be resumed (a file made with other settings is regenerated).
    ``workers > 1`` renders scenes in a process pool. Returns a summary dict with, per split, the
    number of scenes written and skipped, and the summed render/write seconds and wall time.
    """
    if train_scenes < 0 or val_scenes < 0:
        raise ValueError(f"scene counts must be >= 0, got train={train_scenes}, val={val_scenes}")
    if views < 2:
        raise ValueError(f"views must be >= 2 for a multi-view dataset, got {views}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    label = shift_label(shift)
    style_params(style, shift)  # unknown style or style with shift: ValueError before any work
    style_label = None if style == "default" else style
    root = Path(out_dir) / DATASET_NAME
    summary: dict = {
        "root": str(root), "views": views, "height": height, "width": width, "seed": seed, "splits": {}
    }
    if label is not None:
        summary["shift"] = label
    if style_label is not None:
        summary["style"] = style_label
    t_start = time.perf_counter()
    pool = None
    if workers > 1:
        import multiprocessing as mp

        pool = mp.get_context("spawn").Pool(workers)
    try:
        for split, count in (("train", train_scenes), ("val", val_scenes)):
            jobs = [(str(root / split), split, i, seed, views, height, width, label, style_label)
                    for i in range(count)]
            summary["splits"][split] = _write_split(root / split, split, jobs, pool, progress)
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    summary["wall_s"] = time.perf_counter() - t_start
    return summary


def _write_split(split_dir: Path, split: str, jobs: list[tuple], pool, progress: bool) -> dict:
    """Make (or keep) the scene file of every job of one split, in ``pool`` if given, then write the
    split's ``index.json``; returns the split's stats (scenes, written, skipped, render_s, write_s)."""
    from depthpe.data.format.scene_file import write_index

    split_dir.mkdir(parents=True, exist_ok=True)
    results = pool.imap(_make_scene_file, jobs) if pool else map(_make_scene_file, jobs)
    if progress:
        from tqdm import tqdm

        results = tqdm(results, total=len(jobs), desc=f"synth {split}", unit="scene")
    stats = {"scenes": len(jobs), "written": 0, "skipped": 0, "render_s": 0.0, "write_s": 0.0}
    entries = []
    for entry, status, t_render, t_write in results:
        entries.append(entry)
        stats[status] += 1
        stats["render_s"] += t_render
        stats["write_s"] += t_write
    write_index(split_dir, entries, dataset=DATASET_NAME, split=split)
    return stats


def format_summary(summary: dict) -> str:
    """One human-readable line per split of a ``write_synth_dataset`` summary."""
    lines = []
    for split, st in summary["splits"].items():
        lines.append(
            f"{split}: {st['scenes']} scenes ({st['written']} written, {st['skipped']} skipped) "
            f"-> {summary['root']}/{split}"
        )
    keys = ("views", "height", "width", "seed", "shift", "style")
    settings = json.dumps({k: summary[k] for k in keys if k in summary})
    lines.append(f"{settings}  {summary['wall_s']:.1f}s")
    return "\n".join(lines)
