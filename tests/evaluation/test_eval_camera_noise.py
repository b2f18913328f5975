"""`depthpe eval` with noisy input cameras: zero noise is today's evaluation bit for bit, the
ground truth is never perturbed, the same seed gives the same perturbation, and the levels are
recorded in summary.json, the manifest and the settings fingerprint."""

from __future__ import annotations

import csv
import json

import pytest
import torch

import depthpe.evaluation.loop as loop
from depthpe.cli import main
from depthpe.config.camera_noise import CameraNoise, scene_noise_seed
from depthpe.geometry import perturb_cameras
from tests.helpers.training import MICRO_MODEL

ARGS = ["--views", "3", "--image-width", "42", "--panels", "0", "--worst", "0", "--num-workers", "0", "--cpu"]


def _eval(saved_model, synth_root, out, *extra) -> int:
    """One `depthpe eval` with one torch thread: runs compared bit for bit must use the same thread
    count (a module fixture runs before conftest's per-test thread reset)."""
    torch.set_num_threads(1)
    return main(["eval", "--model", str(saved_model), "--data", str(synth_root), "--out", str(out), *ARGS, *extra])


def _rows(out) -> list[dict]:
    with open(out / "metrics_per_image.csv") as f:
        return list(csv.DictReader(f))


NOISE = ["--rotation-noise", "5", "--translation-noise", "0.2", "--focal-noise", "0.1"]


@pytest.fixture(scope="module")
def camera_model(tmp_path_factory):
    """The micro model with PRoPE in its global attention (it sees the cameras), random weights."""
    from depthpe.model import DepthModel
    from depthpe.run import RunConfig

    torch.manual_seed(0)
    model = DepthModel(RunConfig.from_dict({"model": {**MICRO_MODEL, "global_pe": "prope"}}).model_config())
    path = tmp_path_factory.mktemp("prope_model")
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def clean(camera_model, synth_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("clean") / "eval"
    assert _eval(camera_model, synth_root, out) == 0
    return out


@pytest.fixture(scope="module")
def noisy(camera_model, synth_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("noisy") / "eval"
    assert _eval(camera_model, synth_root, out, *NOISE, "--noise-seed", "3") == 0
    return out


def test_zero_noise_is_todays_evaluation_bit_for_bit(clean, camera_model, synth_root, tmp_path, capsys):
    out = tmp_path / "zero"
    capsys.readouterr()
    assert _eval(camera_model, synth_root, out, "--rotation-noise", "0", "--noise-seed", "5") == 0
    printed = capsys.readouterr().out
    assert (out / "metrics_per_image.csv").read_bytes() == (clean / "metrics_per_image.csv").read_bytes()
    assert "camera_noise" not in json.loads((out / "summary.json").read_text())["meta"]
    assert "camera noise" not in printed and (out / "summary.md").read_text().startswith("| dataset |")
    # --panels 0 --worst 0: the files written are named, and no folder that was not written
    wrote = next(line for line in printed.splitlines() if line.startswith("wrote "))
    assert "summary.md" in wrote and "panels/" not in wrote and "worst/" not in wrote
    assert not (out / "panels").exists() and not (out / "worst").exists()


def test_noise_changes_the_prediction_but_never_the_ground_truth(clean, noisy):
    before, after = _rows(clean), _rows(noisy)
    assert [(r["scene"], r["mode"]) for r in before] == [(r["scene"], r["mode"]) for r in after]
    gt_only = ("scene_constant", "global_constant")  # baselines made from the GT alone
    for a, b in zip(before, after):
        if a["mode"] in gt_only:
            assert a == b, a["mode"]
    native = lambda rows: [r["abs_rel"] for r in rows if r["mode"] == "native"]  # noqa: E731
    assert native(before) != native(after)
    doc = json.loads((noisy / "summary.json").read_text())
    levels = {"rotation_deg": 5.0, "translation": 0.2, "focal": 0.1, "seed": 3}
    assert doc["meta"]["camera_noise"] == levels and doc["fingerprint"]["camera_noise"] == levels
    assert json.loads((noisy / "manifest.json").read_text())["camera_noise"] == levels
    assert "camera_noise" in (noisy / "report.html").read_text()


def test_the_same_seed_gives_the_same_perturbation_and_another_seed_another(noisy, camera_model, synth_root,
                                                                            tmp_path, capsys):
    again, other = tmp_path / "again", tmp_path / "other"
    capsys.readouterr()
    assert _eval(camera_model, synth_root, again, *NOISE, "--noise-seed", "3") == 0
    # the console and summary.md say that the cameras were perturbed, and how much
    note = ("camera noise: the model was given perturbed input cameras (rotation 5 deg, translation 0.2 x the "
            "mean baseline, focal x (1 +- 0.1), noise seed 3); ground truth untouched")
    assert note in capsys.readouterr().out
    assert (again / "summary.md").read_text().startswith(note + "\n\n| dataset |")
    assert (again / "metrics_per_image.csv").read_bytes() == (noisy / "metrics_per_image.csv").read_bytes()
    assert _eval(camera_model, synth_root, other, *NOISE, "--noise-seed", "4") == 0
    assert (other / "metrics_per_image.csv").read_bytes() != (noisy / "metrics_per_image.csv").read_bytes()


def test_a_model_that_ignores_cameras_is_not_moved_by_their_noise(saved_model, synth_root, tmp_path):
    """The saved micro model uses RoPE (no cameras): its native rows do not change with noise."""
    assert _eval(saved_model, synth_root, tmp_path / "a") == 0
    assert _eval(saved_model, synth_root, tmp_path / "b", *NOISE) == 0
    assert _rows(tmp_path / "a") == _rows(tmp_path / "b")


def _batch() -> dict:
    """One scene of 3 views of 14 x 14 pixels: random images and depth, cameras 1 apart."""
    gen = torch.Generator().manual_seed(0)
    batch = {"images": torch.rand(1, 3, 3, 14, 14, generator=gen), "depth": torch.rand(1, 3, 14, 14, generator=gen),
             "valid": torch.ones(1, 3, 14, 14, dtype=torch.bool), "K": torch.eye(3).repeat(1, 3, 1, 1) * 20,
             "w2c": torch.eye(4).repeat(1, 3, 1, 1)}
    batch["K"][..., 2, 2] = 1
    batch["w2c"][0, 1, 0, 3], batch["w2c"][0, 2, 1, 3] = -1.0, -1.0
    return batch


def test_only_the_cameras_of_the_batch_change():
    batch = _batch()
    options = loop.EvalOptions(camera_noise=CameraNoise(rotation_deg=2, translation=0.1), noise_seed=1)
    noisy = loop.noisy_cameras(batch, options, "synth/scene_0")
    assert all(noisy[k] is batch[k] for k in ("images", "depth", "valid"))
    assert not torch.equal(noisy["w2c"], batch["w2c"]) and torch.equal(noisy["w2c"][0, 0], batch["w2c"][0, 0])
    assert loop.noisy_cameras(batch, loop.EvalOptions(), "synth/scene_0") is batch


def test_each_scene_key_has_its_own_documented_draw():
    batch, noise = _batch(), CameraNoise(rotation_deg=2, translation=0.1, focal=0.05)
    options = loop.EvalOptions(camera_noise=noise, noise_seed=1)
    draws = {}
    for key in ("synth/scene_0", "synth/scene_1"):
        noisy = loop.noisy_cameras(batch, options, key)
        generator = torch.Generator().manual_seed(scene_noise_seed(1, key))
        K, w2c = perturb_cameras(batch["K"], batch["w2c"], rotation_deg=2, translation=0.1, focal=0.05,
                                 generator=generator)
        assert torch.equal(noisy["K"], K) and torch.equal(noisy["w2c"], w2c)
        draws[key] = noisy["w2c"]
    assert not torch.equal(draws["synth/scene_0"], draws["synth/scene_1"])


def test_another_noise_level_into_the_same_out_is_refused(noisy, camera_model, synth_root, capsys):
    assert _eval(camera_model, synth_root, noisy, "--rotation-noise", "1", "--noise-seed", "3") == 2
    captured = capsys.readouterr()
    assert "the camera noise (--rotation-noise" in captured.err + captured.out


@pytest.mark.parametrize("flag,value,message", [("--rotation-noise", "-1", "--rotation-noise must be a finite number >= 0"),
                                                ("--rotation-noise", "200", "at most 180"),
                                                ("--focal-noise", "1.5", "--focal-noise must be below 1")])
def test_bad_noise_levels_are_one_line(flag, value, message, saved_model, synth_root, tmp_path, capsys):
    assert _eval(saved_model, synth_root, tmp_path / "x", flag, value) == 2
    captured = capsys.readouterr()
    assert message in captured.err + captured.out
