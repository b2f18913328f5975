"""Repetitive textures of ``depthpe synth --texture stripes|checkers`` (``repetitive_textures``): one
pattern on every surface, repeating every few patches in the image and aligned with the baseline,
so that along an epipolar line the content alone does not tell which repeat is the match."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .params import PATCH_PX, SynthParams
from .raycast import probe_depths
from .rooms import _color_pair
from .scene import _FACE_UV_AXES, Scene, Texture

__all__ = ["repetitive_textures", "baseline_axis", "face_angle"]

_REPETITIVE_KINDS = {"stripes": "stripes", "checkers": "checker"}  # --texture NAME -> Texture.kind


def baseline_axis(w2c: np.ndarray) -> np.ndarray:
    """(3,) unit world direction from the first camera centre to the last one; the first camera's x
    axis when they (almost) coincide. w2c: (V, 3, 4) OpenCV world-to-camera."""
    R, t = w2c[:, :, :3], w2c[:, :, 3]
    centers = -np.einsum("vji,vj->vi", R, t)
    axis = centers[-1] - centers[0]
    norm = np.linalg.norm(axis)
    return R[0, 0] if norm < 1e-9 * max(1.0, float(np.abs(centers).max())) else axis / norm


def face_angle(axis: np.ndarray, face: int) -> float:
    """The ``Texture.angle`` (radians) at which a pattern on room face ``face`` varies along the
    projection of the unit world direction ``axis`` onto the face; 0 when ``axis`` is (almost)
    perpendicular to it (within 3 degrees)."""
    ua, va = _FACE_UV_AXES[face]
    if np.hypot(axis[ua], axis[va]) < 0.05:
        return 0.0
    return float(np.arctan2(axis[va], axis[ua]))


def repetitive_textures(rng: np.random.Generator, scene: Scene, K: np.ndarray, w2c: np.ndarray, height: int,
                        width: int, params: SynthParams) -> Scene:
    """``scene`` with every face and primitive textured by ``params.texture`` ("stripes" or "checkers").

    K: (V, 3, 3) pixel intrinsics at ``height`` x ``width`` (the output size); w2c: (V, 3, 4). Each
    surface draws its own colour pair and period: ``p`` patches, ``p`` uniform in
    ``params.texture_period``, i.e. ``p * PATCH_PX`` pixels at the median z-depth ``d`` of an 8 x 8
    probe of every view and the median focal length ``f`` (pixels): ``p * PATCH_PX * d / f`` scene
    units (checkers: two squares per period). No fine noise (``detail`` 0). On the room's faces the
    pattern is aligned with the baseline (``baseline_axis``): checkers' edges along and across it,
    stripes across it (the colour repeats along the baseline) or, on half of the faces, along it (the
    colour is constant along it); on primitives it follows their own surface coordinates (angle 0).
    """
    if params.texture not in _REPETITIVE_KINDS:
        raise ValueError(f"repetitive textures are {sorted(_REPETITIVE_KINDS)}, got {params.texture!r}")
    t, hit = probe_depths(scene, K, w2c, height, width)
    depth = float(np.median(t[hit])) if hit.any() else scene.scale
    units_per_px = depth / float(np.median(K[:, 0, 0]))
    axis = baseline_axis(w2c)

    def texture(angle: float) -> Texture:
        period = PATCH_PX * rng.uniform(*params.texture_period) * units_per_px
        stripes = params.texture == "stripes"
        if stripes and rng.uniform() < 0.5:
            angle += np.pi / 2  # stripes along the baseline
        a, b = _color_pair(rng)
        return Texture(kind=_REPETITIVE_KINDS[params.texture], color_a=a, color_b=b,
                       scale=float(period if stripes else period / 2), angle=float(angle),
                       seed=int(rng.integers(0, 2**31 - 1)), detail=0.0)

    faces = [texture(face_angle(axis, face)) for face in range(6)]
    primitives = [replace(prim, texture=texture(0.0)) for prim in scene.primitives]
    return replace(scene, face_textures=faces, primitives=primitives)
