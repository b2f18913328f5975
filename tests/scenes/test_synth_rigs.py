"""The camera rigs of `depthpe synth --rig` (docs/data.md): stereo and line share one viewing direction,
their baseline is perpendicular to it and follows `--depth-ratio`; `--rotation-jitter` turns each camera
by at most the given angle; the parallax helper measures what the rigs produce."""

from __future__ import annotations

import numpy as np
import pytest

from depthpe.scenes.synth import generate_scene, scene_seed, style_params
from depthpe.scenes.synth.parallax import PATCH_PX, pair_parallax, parallax_patches, parallax_quantiles
from depthpe.scenes.synth.params import knob_params

SIDE = 56


def rig_scenes(rig: str, n: int, views: int, **knobs) -> list[dict]:
    params = knob_params(style_params("geometry"), rig=rig, **knobs)
    return [generate_scene(scene_seed(7, "val", i), views, SIDE, SIDE, params) for i in range(n)]


def centers_of(w2c: np.ndarray) -> np.ndarray:
    return -np.einsum("vji,vj->vi", w2c[:, :, :3], w2c[:, :, 3])


def depth_over_baseline(scene: dict) -> float:
    """Median valid z-depth of all views over the distance from the first to the last camera."""
    c = centers_of(scene["w2c"])
    depth = scene["depth"]
    return float(np.median(depth[depth > 0])) / float(np.linalg.norm(c[-1] - c[0]))


def turn_deg(Ra: np.ndarray, Rb: np.ndarray) -> float:
    """The angle (degrees) of the rotation between two rotation matrices."""
    return float(np.degrees(np.arccos(np.clip((np.trace(Ra @ Rb.T) - 1) / 2, -1, 1))))


def test_stereo_is_rectified_and_keeps_the_depth_ratio():
    for scene in rig_scenes("stereo", 6, 3, depth_ratio=(3.0, 6.0)):
        R, K = scene["w2c"][:, :, :3], scene["K"]
        assert np.array_equal(R, np.repeat(R[:1], 3, axis=0)) and np.array_equal(K, np.repeat(K[:1], 3, axis=0))
        offsets = (centers_of(scene["w2c"]) - centers_of(scene["w2c"])[0]) @ R[0].T  # in camera 0's frame
        np.testing.assert_allclose(offsets[:, 1:], 0, atol=1e-9)  # along the x axis: image rows
        np.testing.assert_allclose(offsets[:, 0], np.linspace(0, offsets[-1, 0], 3), atol=1e-9)  # evenly
        assert 3.0 / 1.05 <= depth_over_baseline(scene) <= 6.0 * 1.05


def test_depth_ratio_sets_the_parallax_of_a_stereo_pair():
    """rho = 4: median depth / baseline within 5% of 4 on every scene, and the parallax helper's median is
    f / (rho * patch); its values are the disparities f b / z of a rectified pair."""
    for scene in rig_scenes("stereo", 4, 2, depth_ratio=(4.0, 4.0)):
        assert depth_over_baseline(scene) == pytest.approx(4.0, rel=0.05)
        f = scene["K"][0, 0, 0]
        b = np.linalg.norm(np.diff(centers_of(scene["w2c"]), axis=0))
        z = scene["depth"][0, ::4, ::4]
        z = z[z > 0]
        values = pair_parallax(scene["depth"][0], scene["K"][0], scene["w2c"][0], scene["K"][1], scene["w2c"][1])
        disparity = f * b / z
        # pixels that project outside view 1 are left out: the kept ones are among the disparities
        assert len(values) > 0.5 * len(z)
        assert np.isin(np.round(values, 6), np.round(disparity, 6)).all()
        quantiles = parallax_quantiles(parallax_patches(scene["depth"], scene["K"], scene["w2c"]))
        assert quantiles["p10"] <= quantiles["p50"] <= quantiles["p90"]
        assert quantiles["p50"] == pytest.approx(f / (4.0 * PATCH_PX), rel=0.3)


def test_line_rig_is_straight_perpendicular_to_the_view_and_jitters_as_asked():
    for scene in rig_scenes("line", 4, 5, depth_ratio=(2.0, 3.0)):
        R = scene["w2c"][:, :, :3]
        assert np.array_equal(R, np.repeat(R[:1], 5, axis=0))  # no jitter by default
        c = centers_of(scene["w2c"])
        axis = (c[-1] - c[0]) / np.linalg.norm(c[-1] - c[0])
        along = (c - c[0]) @ axis
        np.testing.assert_allclose(c - c[0], along[:, None] * axis, atol=1e-9)  # one straight line
        assert (np.diff(along) > 0).all()
        assert abs(axis @ R[0, 2]) < 1e-9  # perpendicular to the shared viewing direction
        assert 2.0 / 1.05 <= depth_over_baseline(scene) <= 3.0 * 1.05
    for scene in rig_scenes("line", 3, 4, rotation_jitter=5.0):
        R = scene["w2c"][:, :, :3]
        turns = [turn_deg(R[i], R[j]) for i in range(4) for j in range(i + 1, 4)]
        assert 0 < max(turns) <= 2 * 5.0 * np.sqrt(3)  # each camera within 5 degrees per axis of the rig's


def test_rotation_jitter_zero_aligns_the_curve_and_the_default_curve_is_the_geometry_style():
    for scene in rig_scenes("curve", 3, 4, rotation_jitter=0.0):
        R = scene["w2c"][:, :, :3]
        assert max(turn_deg(R[0], R[i]) for i in range(4)) < 1e-6
    assert knob_params(style_params("geometry"), rig="curve", depth_ratio=(2, 12)) == style_params("geometry")


def test_knobs_refuse_what_they_cannot_do():
    geometry, default = style_params("geometry"), style_params("default")
    cases = [
        (dict(depth_ratio=(2, 8)), default, "add --rig"),
        (dict(rotation_jitter=2.0), default, "add --rig"),
        (dict(rig="stereo", rotation_jitter=2.0), geometry, "rectified"),
        (dict(rig="line", depth_ratio=(8, 2)), geometry, "0 < LO <= HI"),
        (dict(rig="line", depth_ratio=(2,)), geometry, "two numbers"),
        (dict(rig="orbit"), geometry, "--rig must be one of"),
        (dict(texture="dots"), geometry, "--texture must be one of"),
        (dict(texture_period=(2, 3)), geometry, "add one of them"),
    ]
    for knobs, params, message in cases:
        with pytest.raises(ValueError, match=message):
            knob_params(params, **knobs)
