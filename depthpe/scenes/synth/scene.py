"""The description of a procedural scene: textures, primitives and the room (``Scene``), the constants
that name their kinds and the room's faces, and ``SceneGenerationError``. Plain dataclasses of numpy
arrays; the conventions (z-up world, scene units) are those of the package docstring."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["TEXTURE_KINDS", "PRIMITIVE_KINDS", "FACE_NAMES", "SceneGenerationError", "Texture", "Primitive", "Scene"]

TEXTURE_KINDS = ("checker", "stripes", "noise", "gradient")
PRIMITIVE_KINDS = ("box", "sphere", "cylinder")
# Room faces in this order: -x, +x, -y, +y, floor (-z), ceiling (+z). Face f lies on axis f // 2.
FACE_NAMES = ("wall_x0", "wall_x1", "wall_y0", "wall_y1", "floor", "ceiling")
_FACE_UV_AXES = ((1, 2), (1, 2), (0, 2), (0, 2), (0, 1), (0, 1))
_SKY = -1  # surface id of rays that escape


class SceneGenerationError(RuntimeError):
    """No valid camera trajectory could be drawn for a random scene (should be very rare)."""


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
