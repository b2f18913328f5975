"""`depthpe study camera-noise`: every model at every level on one manifest, the table that
`depthpe compare SWEEP` prints, the figure of `depthpe plot SWEEP`, resuming, and one-line errors."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from depthpe.studies.camera_noise.runner import CameraNoiseSweepConfig, model_labels
from depthpe.cli import main
from tests.helpers.training import MICRO_MODEL

EVAL_ARGS = ["--views", "3", "--image-width", "42", "--cpu", "--bootstrap", "200"]
LEVELS = ["--rotation-levels", "0", "5", "--translation-levels", "0", "0.2"]


def _save(root, name: str, pe: str):
    """The micro model with ``pe`` in its global attention (random weights) in ``root/name/final``."""
    from depthpe.model import DepthModel
    from depthpe.run import RunConfig

    torch.manual_seed(0)
    model = DepthModel(RunConfig.from_dict({"model": {**MICRO_MODEL, "global_pe": pe}}).model_config())
    path = root / name / "final"
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, synth_root):
    """A finished sweep of a RoPE and a PRoPE model at 2 levels (no noise; 5 degrees + 0.2 baselines)."""
    root = tmp_path_factory.mktemp("sweep")
    models = [_save(root, "rope_s0", "rope"), _save(root, "prope_s0", "prope")]
    out = root / "out"
    torch.set_num_threads(1)
    code = main(["bench", "camera-noise", *map(str, models), "--data", str(synth_root), "--out", str(out),
                 *LEVELS, *EVAL_ARGS])
    assert code == 0
    return out, models


def _native(eval_dir) -> list[str]:
    with open(eval_dir / "metrics_per_image.csv") as f:
        return [r["abs_rel"] for r in csv.DictReader(f) if r["mode"] == "native"]


def test_every_model_is_evaluated_at_every_level_on_one_manifest(sweep):
    out, _ = sweep
    plan = json.loads((out / "sweep.json").read_text())
    assert [m["label"] for m in plan["models"]] == ["rope_s0", "prope_s0"]
    assert plan["levels"] == [{"rotation_deg": 0.0, "translation": 0.0, "focal": 0.0},
                              {"rotation_deg": 5.0, "translation": 0.2, "focal": 0.0}]
    scenes = {json.dumps(json.loads((out / e / "manifest.json").read_text())["scenes"], sort_keys=True)
              for m in plan["models"] for e in m["evals"]}
    assert len(scenes) == 1
    noisy = json.loads((out / "prope_s0" / "level_1" / "summary.json").read_text())["meta"]
    assert noisy["camera_noise"] == {"rotation_deg": 5.0, "translation": 0.2, "focal": 0.0, "seed": 0}
    assert "camera_noise" not in json.loads((out / "prope_s0" / "level_0" / "summary.json").read_text())["meta"]


def test_rope_ignores_the_noise_and_prope_does_not(sweep):
    out, _ = sweep
    assert _native(out / "rope_s0" / "level_0") == _native(out / "rope_s0" / "level_1")
    assert _native(out / "prope_s0" / "level_0") != _native(out / "prope_s0" / "level_1")
    result = json.loads((out / "compare.json").read_text())["result"]
    rope, prope = result["datasets"]["synth"]["rope"], result["datasets"]["synth"]["prope"]
    assert rope[1]["vs_first_level"]["mean"] == 0.0
    assert prope[1]["vs_first_level"]["mean"] != 0.0
    # the table's numbers are the evaluations' own
    summary = json.loads((out / "prope_s0" / "level_1" / "summary.json").read_text())["summary"]["synth"]
    assert prope[1]["stats"]["native_abs_rel"]["mean"] == pytest.approx(summary["native"]["abs_rel"], rel=1e-12)
    # against the reference (the first group, rope) at the same level: rope-only equals prope - rope
    assert prope[0]["vs_reference"]["n_scenes"] == 2 and result["reference"] == "rope"


def test_compare_and_plot_read_the_sweep_folder(sweep, tmp_path, capsys):
    out, _ = sweep
    assert (out / "report.html").is_file() and (out / "noise_synth.png").is_file()
    capsys.readouterr()
    assert main(["compare", str(out), "--bootstrap", "200"]) == 0
    printed = capsys.readouterr().out
    assert printed.strip() == (out / "compare.md").read_text().strip()
    assert "| prope | 5° / 0.2 / 0 | 1 |" in printed
    assert main(["plot", str(out), "--out", str(tmp_path / "plots")]) == 0
    line = capsys.readouterr().out
    assert (tmp_path / "plots" / "noise_synth.png").stat().st_size > 1000
    assert "(2 panels)" in line  # native abs_rel and delta1; the validation loss has no place in a sweep


def test_rerun_resumes_without_evaluating_again(sweep, synth_root, capsys):
    out, models = sweep
    before = (out / "prope_s0" / "level_1" / "metrics_per_image.csv").read_bytes()
    capsys.readouterr()
    assert main(["bench", "camera-noise", *map(str, models), "--data", str(synth_root), "--out", str(out),
                 *LEVELS, *EVAL_ARGS]) == 0
    printed = capsys.readouterr().out
    assert printed.count("already holds a complete evaluation") == 4
    assert (out / "prope_s0" / "level_1" / "metrics_per_image.csv").read_bytes() == before


def test_an_unfinished_sweep_and_a_mix_of_kinds_are_one_line(sweep, tmp_path, capsys):
    import shutil

    out, _ = sweep
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    shutil.rmtree(broken / "prope_s0" / "level_1")
    capsys.readouterr()
    assert main(["compare", str(broken)]) == 2
    err = capsys.readouterr().err.strip()
    assert "prope_s0 at level 1 is missing" in err and "rerun the same" in err and len(err.splitlines()) == 1
    assert main(["compare", str(out), str(out / "rope_s0" / "level_0")]) == 2
    assert "folders of one kind" in capsys.readouterr().err


def test_level_lists_must_match_and_labels_are_safe_and_unique():
    with pytest.raises(ValueError, match="same number of levels"):
        CameraNoiseSweepConfig(model=["m"], data="d", out="o", rotation_levels=[0, 1, 2], translation_levels=[0, 1])
    with pytest.raises(ValueError, match="--rotation-levels must be at most 180"):
        CameraNoiseSweepConfig(model=["m"], data="d", out="o", rotation_levels=[0, 200], translation_levels=[0])
    cfg = CameraNoiseSweepConfig(model=["m"], data="d", out="o", rotation_levels=[0, 2], translation_levels=[0.1])
    assert cfg.levels() == [{"rotation_deg": 0.0, "translation": 0.1, "focal": 0.0},
                            {"rotation_deg": 2.0, "translation": 0.1, "focal": 0.0}]
    labels = [label for label, _ in model_labels(["runs/a/final", "other/a/final", "org/b c", "../.."])]
    assert labels[:2] == ["a", "a-2"]
    assert all("/" not in label and label not in ("", ".", "..") for label in labels)
    assert len(set(labels)) == 4
