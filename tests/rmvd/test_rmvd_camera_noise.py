"""``depthpe rmvd --model`` with noisy input cameras: zero noise is the run without noise bit for bit,
noise moves the predictions of a camera model but never the ground truth, the same seed gives the
same predictions, the levels are recorded and a resume with other levels is refused."""

import json

import numpy as np
import pytest

from depthpe.rmvd.config import RmvdConfig
from depthpe.testing.rmvd_samples import write_sample_list
from tests.helpers.rmvd import csv_rows, depth, run_rmvd

NOISE = ["--rotation-noise", "5", "--translation-noise", "0.2", "--focal-noise", "0.1"]


@pytest.fixture(scope="module")
def lists(tmp_path_factory):
    return write_sample_list(tmp_path_factory.mktemp("lists"), num_samples=2, num_views=3, baseline=0.5, images=True)


def _run(capsys, lists, model, out, *extra):
    status, _, err = run_rmvd(capsys, "--samples", lists, "--model", model, "--out", out, "--burn-in", "0", *extra)
    assert status == 0, err
    return out


def test_noise_moves_the_prediction_not_the_ground_truth(tmp_path, capsys, lists, rmvd_camera_model):
    clean = _run(capsys, lists, rmvd_camera_model, tmp_path / "clean")
    zero = _run(capsys, lists, rmvd_camera_model, tmp_path / "zero", "--rotation-noise", "0", "--noise-seed", "4")
    noisy = _run(capsys, lists, rmvd_camera_model, tmp_path / "noisy", *NOISE, "--noise-seed", "3")
    again = _run(capsys, lists, rmvd_camera_model, tmp_path / "again", *NOISE, "--noise-seed", "3")
    other = _run(capsys, lists, rmvd_camera_model, tmp_path / "other", *NOISE, "--noise-seed", "4")
    for sample in ("toy_000", "toy_001"):
        np.testing.assert_array_equal(depth(zero, None, sample), depth(clean, None, sample))
        np.testing.assert_array_equal(depth(again, None, sample), depth(noisy, None, sample))
        assert not np.array_equal(depth(noisy, None, sample), depth(clean, None, sample))
        assert not np.array_equal(depth(other, None, sample), depth(noisy, None, sample))
    assert [r["abs_rel"] for r in csv_rows(noisy)] != [r["abs_rel"] for r in csv_rows(clean)]
    meta = json.loads((noisy / "summary.json").read_text())["meta"]
    assert meta["camera_noise"] == {"rotation_deg": 5.0, "translation": 0.2, "focal": 0.1, "seed": 3}
    assert "camera_noise" not in json.loads((zero / "summary.json").read_text())["meta"]


def test_a_model_that_ignores_cameras_is_unmoved(tmp_path, capsys, lists, rmvd_micro_model):
    clean = _run(capsys, lists, rmvd_micro_model, tmp_path / "clean")
    noisy = _run(capsys, lists, rmvd_micro_model, tmp_path / "noisy", "--rotation-noise", "5", "--focal-noise", "0.1")
    # rope reads neither K nor the rotations; the metric scale comes from the (unmoved) centres
    np.testing.assert_array_equal(depth(noisy, None, "toy_000"), depth(clean, None, "toy_000"))


def test_another_noise_level_into_the_same_out_is_refused(tmp_path, capsys, lists, rmvd_camera_model):
    out = _run(capsys, lists, rmvd_camera_model, tmp_path / "out", "--rotation-noise", "2")
    status, _, err = run_rmvd(capsys, "--samples", lists, "--model", rmvd_camera_model, "--out", out,
                              "--rotation-noise", "5", "--burn-in", "0")
    assert status == 2 and err.count("\n") == 1, err
    assert "camera noise" in err and "--restart" in err


def test_noise_needs_a_model_in_known_poses():
    with pytest.raises(ValueError, match="pass --model and --setting known_poses"):
        RmvdConfig(samples=["s.json"], predictions="p", out="o", rotation_noise=2.0)
    with pytest.raises(ValueError, match="pass --model and --setting known_poses"):
        RmvdConfig(samples=["s.json"], model="m", out="o", settings=["single_view"], translation_noise=0.1)
    with pytest.raises(ValueError, match="--rotation-noise must be a finite number >= 0"):
        RmvdConfig(samples=["s.json"], model="m", out="o", rotation_noise=-1.0)
