"""Issue 15's end-to-end check: tiny runs of two encodings x two seeds validate with the paper-style
protocol (random draw, small N) on byte-identical manifests, keep val_history.jsonl, and
`depthpe compare` on their evaluations prints mean +- std, the baseline ratios and the paired
interval."""

import json

import pytest

from depthpe.cli import main
from depthpe.run.trainer import train
from depthpe.run.validation import read_val_history
from tests.helpers.training import MICRO_MODEL, run_config


@pytest.mark.slow
def test_two_encodings_validate_on_one_manifest_and_compare(synth_root, tmp_path, capsys):
    val = {"sources": [{"name": "synth", "root": str(synth_root), "split": "val"}], "every": 2, "views": 3,
           "selection": "random", "max_scenes": 2, "seed": 1, "panels": 0}
    first_manifest = tmp_path / "rope_s0" / "val_manifest.json"
    runs = []
    for pe in ("rope", "prope"):
        for seed in (0, 1):
            out = tmp_path / f"{pe}_s{seed}"
            shared = {} if not runs else {"manifest": str(first_manifest)}
            train(run_config(synth_root, out, seed=seed, model={**MICRO_MODEL, "global_pe": pe},
                             train={"steps": 2, "checkpoint_every": 0}, val={**val, **shared}))
            runs.append(out)
            history = read_val_history(out)
            assert [(h["step"], h["dataset"]) for h in history] == [(2, "synth")]  # end-of-run validation
            assert history[0]["metrics"]["native"]["n_scenes"] == 2 and history[0]["loss"]["total"] > 0
    assert not any((r / "val_manifest.json").exists() for r in runs[1:])  # all used the first run's file
    manifest = json.loads(first_manifest.read_text())["scenes"]
    common = ["--data", str(synth_root), "--views", "3", "--panels", "0", "--num-workers", "0", "--cpu",
              "--manifest", str(first_manifest)]
    for run in runs:
        assert main(["eval", "--model", str(run / "final"), *common, "--out", str(run / "eval")]) == 0
        assert json.loads((run / "eval" / "manifest.json").read_text())["scenes"] == manifest
    capsys.readouterr()
    assert main(["compare", *map(str, runs), "--bootstrap", "500", "--out", str(tmp_path / "cmp")]) == 0
    printed = capsys.readouterr().out
    assert "| rope | 2 |" in printed and "| prope | 2 |" in printed and "±" in printed
    result = json.loads((tmp_path / "cmp" / "compare.json").read_text())["result"]["datasets"]["synth"]
    for label in ("rope", "prope"):
        stats = result[label]["stats"]
        assert result[label]["n_seeds"] == 2 and len(stats["native_abs_rel"]["values"]) == 2
        assert stats["native_abs_rel"]["std"] > 0  # two seeds, two different models
        assert stats["ratio_global_constant"]["mean"] > 0 and stats["ratio_scene_constant"]["mean"] > 0
    paired = result["prope"]["paired"]
    assert paired["n_scenes"] == len(manifest) and paired["low"] <= paired["mean"] <= paired["high"]
