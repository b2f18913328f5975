"""Geometry-only scenes (`depthpe synth --style geometry`, docs/data.md): deterministic, the default
style unchanged, and the depth / baseline ratio independent of everything the cameras reveal (the
cameras-only regressor of `depthpe study cameras-only` does no better than a constant)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from depthpe.studies.geometry.cameras_only import FEATURES, sample_record, score_cameras_only, stack_records
from depthpe.scenes.synth import SynthParams, generate_scene, scene_seed, style_params

N_GEOMETRY, N_DEFAULT, V, SIDE = 150, 60, 3, 8


def records(style: str, n: int) -> list[tuple]:
    params = style_params(style)
    out = []
    for i in range(n):
        scene = generate_scene(scene_seed(5, "val", i), V, SIDE, SIDE, params)
        out.append(sample_record(scene["K"], scene["w2c"], scene["depth"], (SIDE, SIDE)))
    return out


@pytest.fixture(scope="module")
def geometry_records() -> list[tuple]:
    return records("geometry", N_GEOMETRY)


def feature_correlations(recs: list[tuple]) -> dict[str, float]:
    """|Pearson correlation| of each camera feature with the log median normalized depth."""
    X, y, _ = stack_records(recs)
    return {name: abs(float(np.corrcoef(X[:, j], y)[0, 1])) if X[:, j].std() > 0 else 0.0
            for j, name in enumerate(FEATURES)}


def test_default_style_is_unchanged():
    """Pinned values of two default scenes, generated before the styles existed."""
    assert style_params("default") == SynthParams()
    pinned = [
        ([[-3.235764913, -6.078974505, -5.193068181], [-2.568173153, -6.018482408, -4.913344197],
          [-2.655245149, -6.192891952, -4.005023683]], 1307.9081387519836, 190556),
        ([[-1.565718186, 6.523620026, 2.413216935], [-1.208130484, 6.40266809, 2.430428907],
          [-1.042092472, 6.530880648, 2.186309301]], 1203.305416047573, 125955),
    ]
    for i, (t, depth_sum, image_sum) in enumerate(pinned):
        out = generate_scene(scene_seed(3, "val", i), 3, 16, 16)
        np.testing.assert_allclose(out["w2c"][:, :, 3], t, atol=1e-8)
        assert out["depth"].astype(np.float64).sum() == pytest.approx(depth_sum, rel=1e-6)
        assert abs(int(out["images"].astype(np.int64).sum()) - image_sum) <= 3 * 16 * 16 * 3 * 1e-3


def test_geometry_scenes_are_deterministic_flat_lit_and_scale_free():
    params = style_params("geometry")
    a = generate_scene(scene_seed(0, "train", 4), 4, 16, 16, params)
    b = generate_scene(scene_seed(0, "train", 4), 4, 16, 16, params)
    c = generate_scene(scene_seed(0, "train", 5), 4, 16, 16, params)
    for key in ("images", "depth", "K", "w2c"):
        assert np.array_equal(a[key], b[key]), key
    assert not np.array_equal(a["depth"], c["depth"])
    assert a["scene"].ambient == 1.0  # no shading or shadow cue
    centers = -np.einsum("vji,vj->vi", a["w2c"][:, :, :3], a["w2c"][:, :, 3])
    path = np.linalg.norm(centers[-1] - centers[0])  # ends of the path: ~ its length s / rho
    assert 2.0 / 1.2 < a["scene"].scale / path < 12.0 * 1.2
    with pytest.raises(ValueError, match="cannot be combined"):
        style_params("geometry", ["fov"])
    with pytest.raises(ValueError, match="unknown synth style"):
        style_params("parallax")


def test_depth_ratio_is_independent_of_every_camera_feature(geometry_records):
    """Over many geometry scenes no camera feature correlates with the normalized depth; on the
    default scenes the relative rotations do (the orbit's cameras look at the object)."""
    corr = feature_correlations(geometry_records)
    assert max(corr.values()) < 0.3, corr
    default = feature_correlations(records("default", N_DEFAULT))
    assert default["rotation_mean_rad"] > 0.3, default


def test_cameras_only_regressor_is_no_better_than_a_constant(geometry_records):
    train, val = geometry_records[:100], geometry_records[100:]
    report = score_cameras_only(stack_records(train), stack_records(val))
    constant = min(report["global_constant"], report["train_median"])
    assert report["cameras_only"] > 0.9 * constant, report
    assert report["cameras_only_calibrated"] > 0.9 * report["best_train_constant"], report
    assert report["r2_val"] < 0.1, report
    assert report["scene_constant"] < 0.7 * constant  # the oracle scale is what parallax can reach


def test_cli_writes_labelled_geometry_scenes_and_refuses_a_shift(tmp_path, capsys):
    from depthpe.cli import main

    args = ["synth", "--out", str(tmp_path), "--train-scenes", "2", "--val-scenes", "1", "--views", "3",
            "--height", "16", "--width", "16", "--workers", "1", "--quiet"]
    assert main(args + ["--style", "geometry"]) == 0
    index = json.loads((tmp_path / "synth" / "train" / "index.json").read_text())
    assert [e["path"] for e in index["scenes"]] == ["train_geometry_000000.h5", "train_geometry_000001.h5"]
    assert all(e["style"] == "geometry" for e in index["scenes"])
    assert main(args + ["--style", "geometry"]) == 0  # a rerun keeps the complete files
    assert "(0 written, 2 skipped)" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="cannot be combined with --shift"):
        main(args + ["--style", "geometry", "--shift", "fov"])
    assert main(["bench", "cameras-only", "--data", str(tmp_path), "--views", "3", "--draws", "2"]) == 0
    assert "| cameras_only |" in capsys.readouterr().out
