"""Repetitive textures of `depthpe synth --texture stripes|checkers` (docs/data.md): one pattern on every
surface, repeating every `--texture-period` patches at the median depth, aligned with the baseline.
Measured in rendered images of a camera pair facing a wall, and in generated scenes."""

from __future__ import annotations

import numpy as np
import pytest

from depthpe.scenes.synth import Scene, Texture, generate_scene, render_views, scene_seed, style_params
from depthpe.scenes.synth.params import PATCH_PX, knob_params
from depthpe.scenes.synth.repetitive import repetitive_textures
from depthpe.scenes.synth.textures import _texture_color
from depthpe.scenes.synth.trajectories import intrinsics_from_fov, look_at_w2c

SIDE = 168  # 4 periods of 3 patches
DISTANCE = 3.0


def wall_pair() -> tuple[Scene, np.ndarray, np.ndarray]:
    """An empty room and two cameras 0.6 apart (along -y, their x axis) facing the wall x = 6
    head-on from 3 units away; the wall fills both views."""
    plain = Texture("noise", np.zeros(3), np.ones(3), 1.0, 0.0, 0, 0.0)
    scene = Scene(room_min=np.array([-6.0, -6.0, 0.0]), room_max=np.array([6.0, 6.0, 6.0]),
                  face_textures=[plain] * 6, holes=[], scale=10.0)
    centers = np.array([[3.0, 0.3, 3.0], [3.0, -0.3, 3.0]])
    w2c = np.stack([look_at_w2c(c, c + [1.0, 0.0, 0.0]) for c in centers])
    K = np.stack([intrinsics_from_fov(np.deg2rad(60), SIDE, SIDE)] * 2)
    return scene, K, w2c


def dominant_period(gray: np.ndarray, axis: int) -> tuple[float, float]:
    """(period in pixels of the strongest frequency along ``axis``, its share of the variance along it)."""
    profile = gray - gray.mean(axis=axis, keepdims=True)
    power = (np.abs(np.fft.rfft(profile, axis=axis)) ** 2).mean(axis=1 - axis)
    k = int(np.argmax(power[1:])) + 1
    return gray.shape[axis] / k, float(power[k] / max(power[1:].sum(), 1e-12))


def rendered_wall(texture: str, seed: int) -> tuple[np.ndarray, Texture]:
    scene, K, w2c = wall_pair()
    params = knob_params(style_params("geometry"), rig="stereo", texture=texture, texture_period=(3.0, 3.0))
    scene = repetitive_textures(np.random.default_rng(seed), scene, K, w2c, SIDE, SIDE, params)
    images, depth = render_views(scene, K, w2c, SIDE, SIDE)
    np.testing.assert_allclose(depth, DISTANCE, rtol=1e-9)  # head-on: one depth
    return images[0].astype(np.float64).mean(axis=2), scene.face_textures[1]  # face 1: the wall x = 6


@pytest.mark.parametrize("seed", range(4))
def test_stripes_repeat_every_three_patches_across_or_along_the_baseline(seed):
    gray, tex = rendered_wall("stripes", seed)
    assert tex.kind == "stripes" and tex.detail == 0.0
    across = np.isclose(np.cos(tex.angle), -1.0)  # the baseline runs along -y, the wall's u axis
    # across: the colour repeats along the image rows (the epipolar lines) and is constant down a column
    vary, flat = (1, 0) if across else (0, 1)
    period, share = dominant_period(gray, vary)
    assert period == pytest.approx(3 * PATCH_PX, abs=1.0) and share > 0.7
    assert gray.std(axis=flat).max() < 1.0


def test_checkers_repeat_every_three_patches_along_and_across_the_baseline():
    gray, tex = rendered_wall("checkers", 0)
    assert tex.kind == "checker" and tex.detail == 0.0
    for axis in (0, 1):
        period, share = dominant_period(gray, axis)
        assert period == pytest.approx(3 * PATCH_PX, abs=1.0) and share > 0.5


def test_both_stripe_orientations_occur_and_the_texture_function_repeats():
    scene, K, w2c = wall_pair()
    params = knob_params(style_params("geometry"), rig="stereo", texture="stripes")
    angles = [t.angle for s in range(4) for t in repetitive_textures(np.random.default_rng(s), scene, K, w2c, SIDE,
                                                                      SIDE, params).face_textures]
    turned = [abs(np.sin(a)) > 0.99 for a in angles[1::6]]  # wall x = 6: angle pi (across) or pi/2 (along)
    assert any(turned) and not all(turned)
    tex = repetitive_textures(np.random.default_rng(0), scene, K, w2c, SIDE, SIDE, params).face_textures[1]
    direction = np.array([np.cos(tex.angle), np.sin(tex.angle)])
    uv = (np.linspace(0, 5, 401) + 0.003)[:, None] * direction * tex.scale  # off the stripe edges
    np.testing.assert_allclose(_texture_color(tex, uv + tex.scale * direction), _texture_color(tex, uv), atol=1e-9)
    half = _texture_color(tex, uv + 0.5 * tex.scale * direction)
    assert np.abs(half - _texture_color(tex, uv)).max() > 0.1  # not constant: a period, not a multiple


def test_generated_scenes_get_the_period_at_their_median_depth():
    for texture, kind in (("stripes", "stripes"), ("checkers", "checker")):
        params = knob_params(style_params("geometry"), rig="line", texture=texture)
        for i in range(3):
            out = generate_scene(scene_seed(2, "val", i), 3, 56, 56, params)
            textures = out["scene"].face_textures + [p.texture for p in out["scene"].primitives]
            assert {t.kind for t in textures} == {kind} and {t.detail for t in textures} == {0.0}
            depth = out["depth"]
            pixels_per_unit = out["K"][0, 0, 0] / np.median(depth[depth > 0])
            period = np.array([t.scale * (1 if kind == "stripes" else 2) for t in textures]) * pixels_per_unit
            assert (period >= 2 * PATCH_PX / 1.3).all() and (period <= 4 * PATCH_PX * 1.3).all()
