"""``depthpe probe attention`` on a tiny trained model, and the correspondence lift as a validation
metric (``val.correspondence``) that ``depthpe plot`` draws from val_history.jsonl."""

from __future__ import annotations

import csv
import json
import math

import pytest

from depthpe.cli import main
from depthpe.run.validation import read_val_history
from tests.helpers.training import MICRO_MODEL, run_config


@pytest.fixture(scope="module")
def probed_run(tmp_path_factory, synth_root):
    """A tiny URoPE model trained for 2 steps, validated at the end with ``val.correspondence`` on."""
    from depthpe.run.trainer import train

    out = tmp_path_factory.mktemp("run")
    val = {"sources": [{"name": "synth", "root": str(synth_root), "split": "val"}], "every": 0, "views": 3,
           "max_scenes": 2, "panels": 0, "correspondence": True}
    train(run_config(synth_root, out, model={**MICRO_MODEL, "global_pe": "urope", "pe_options": {"anchors": [1.0, 4.0]}},
                     train={"steps": 2, "checkpoint_every": 0}, val=val))
    return out


def test_validation_logs_the_lift_and_plot_draws_it(probed_run, tmp_path, capsys):
    lines = read_val_history(probed_run)
    assert len(lines) == 1
    row = lines[0]["metrics"]["correspondence"]
    layers = MICRO_MODEL["num_blocks"]
    assert {"lift_r0", "lift_r1", "same_position_lift_r0", "pairs"} <= set(row)
    assert {f"lift_r1_layer{i}" for i in range(layers)} <= set(row)
    assert row["pairs"] > 0 and math.isfinite(row["lift_r0"]) and row["lift_r0"] > 0
    assert "native" in lines[0]["metrics"]  # the ordinary rows are still there
    summary = json.loads((probed_run / "val_summary.json").read_text())["summary"]
    assert "correspondence" not in summary["synth"]  # the model card's table is unchanged
    assert main(["plot", str(probed_run), "--metrics", "lift_r0", "lift_r1", "--rows", "correspondence",
                 "--out", str(tmp_path)]) == 0
    assert "(2 panels)" in capsys.readouterr().out and (tmp_path / "curves_synth.png").is_file()


def test_probe_command_writes_tables_and_figures(probed_run, synth_root, tmp_path, capsys):
    out = tmp_path / "probe"
    argv = ["probe", "attention", "--model", str(probed_run / "final"), "--data", str(synth_root), "--out", str(out),
            "--views", "3", "--scenes", "2"]
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "correspondence lift of the global attention (2 scenes)" in said
    rows = list(csv.DictReader((out / "lift.csv").open()))
    heads, layers = MICRO_MODEL["num_heads"], MICRO_MODEL["num_blocks"]
    assert len(rows) == layers * heads * 2  # radii 0 and 1
    assert {int(r["layer"]) for r in rows} == set(range(layers)) and all(float(r["lift"]) > 0 for r in rows)
    doc = json.loads((out / "summary.json").read_text())
    synth = doc["datasets"]["synth"]
    assert doc["meta"]["global_pe"] == "urope" and doc["meta"]["anchors"] == [1.0, 4.0]
    assert len(synth["anchors"]) == layers * 2 * 2  # layers x radii x anchors
    # the validation at the end saw the same model on the same scenes and views
    val = read_val_history(probed_run)[0]["metrics"]["correspondence"]
    assert synth["scalars"]["lift_r1"] == pytest.approx(val["lift_r1"], rel=1e-6)
    for name in ("summary.md", "lift_synth.png", "lift_synth.svg", "anchors_synth.png"):
        assert (out / name).is_file(), name


def test_probe_command_errors(tmp_path, capsys):
    assert main(["probe", "attention", "--model", str(tmp_path), "--data", str(tmp_path), "--out",
                 str(tmp_path / "o")]) == 2
    assert f"error: --model {tmp_path} is not a depthpe model folder" in capsys.readouterr().err  # named first
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"")
    assert main(["probe", "attention", "--model", str(model), "--data", str(tmp_path), "--out",
                 str(tmp_path / "o")]) == 2
    assert "error: no dataset with a 'val' split" in capsys.readouterr().err
    assert main(["probe", "attention", "--model", "m", "--data", "d", "--out", "o", "--radii", "-1"]) == 2
    assert "error: --radii must be one or more integers >= 0" in capsys.readouterr().err
