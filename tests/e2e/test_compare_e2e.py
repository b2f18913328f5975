"""``depthpe compare`` on two real tiny evaluations (untrained micro models on synthetic scenes)."""

import json

import pytest
import torch

from depthpe.cli import main
from tests.helpers.training import MICRO_MODEL


def make_run(root, name, pe, seed):
    """A run folder with config.yaml and an untrained micro model exported to final/."""
    from depthpe.model import DepthModel
    from depthpe.run import RunConfig, save_run_config

    run = root / name
    cfg = RunConfig.from_dict({"output_dir": str(run), "seed": seed, "model": {**MICRO_MODEL, "global_pe": pe}})
    torch.manual_seed(seed)
    DepthModel(cfg.model_config()).save_pretrained(run / "final")
    save_run_config(cfg, run / "config.yaml")
    return run


def test_compare_two_real_evaluations(synth_root, tmp_path, capsys):
    runs = [make_run(tmp_path, "rope_s0", "rope", 0), make_run(tmp_path, "prope_s0", "prope", 0)]
    common = ["--data", str(synth_root), "--views", "3", "--image-width", "42", "--panels", "0",
              "--num-workers", "0", "--cpu"]
    assert main(["eval", "--model", str(runs[0] / "final"), *common, "--out", str(runs[0] / "eval")]) == 0
    assert main(["eval", "--model", str(runs[1] / "final"), *common, "--out", str(runs[1] / "eval"),
                 "--manifest", str(runs[0] / "eval" / "manifest.json")]) == 0
    capsys.readouterr()
    out = tmp_path / "cmp"
    assert main(["compare", str(runs[0]), str(runs[1] / "eval"), "--bootstrap", "500", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "### synth" in printed and "| rope | 1 |" in printed and "| prope | 1 |" in printed
    assert "Manifests: identical." in printed
    result = json.loads((out / "compare.json").read_text())["result"]["datasets"]["synth"]
    summaries = [json.loads((r / "eval" / "summary.json").read_text())["summary"]["synth"] for r in runs]
    for label, summary in zip(("rope", "prope"), summaries):
        stats = result[label]["stats"]
        assert stats["native_abs_rel"]["mean"] == pytest.approx(summary["native"]["abs_rel"], rel=1e-9)
        assert stats["ratio_global_constant"]["mean"] == pytest.approx(
            summary["native"]["abs_rel"] / summary["global_constant"]["abs_rel"], rel=1e-9)
    paired = result["prope"]["paired"]
    # every scene is paired, so the mean per-scene difference is the difference of the dataset means
    assert paired["n_scenes"] == summaries[0]["native"]["n_scenes"] == 2
    assert paired["mean"] == pytest.approx(summaries[1]["native"]["abs_rel"] - summaries[0]["native"]["abs_rel"],
                                           rel=1e-9, abs=1e-12)
    assert paired["low"] <= paired["mean"] <= paired["high"]
