import csv
import json

import pytest
import torch

from depthpe.evaluation.heldout import HeldOutProtocol, ViewDraw, InputSize, resolve_held_out
from depthpe.evaluation.loop import EvalOptions, evaluate
from depthpe.evaluation.protocol import discover_sources
from depthpe.eval import main
from depthpe.metrics import BASELINE_MODES, MODES
from tests.helpers.tables import nested_close




def test_evaluate_script_writes_all_files(synth_root, saved_model, tmp_path, capsys):
    out = tmp_path / "eval"
    main(["--model", str(saved_model), "--data", str(synth_root), "--views", "3", "--image-width", "42",
          "--out", str(out), "--panels", "1", "--num-workers", "0", "--cpu"])
    printed = capsys.readouterr().out
    assert "| synth | native |" in printed and "| synth | global_constant |" in printed
    summary = json.loads((out / "summary.json").read_text())
    rows = summary["summary"]["synth"]
    assert set(MODES) | set(BASELINE_MODES) <= set(rows)
    assert rows["native"]["n_scenes"] == 2 and rows["native"]["n_images"] == 6
    with open(out / "metrics_per_image.csv") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 2 * 3 * (len(MODES) + len(BASELINE_MODES))
    manifest = json.loads((out / "manifest.json").read_text())["scenes"]
    assert sorted(manifest) == ["synth/val_000000", "synth/val_000001"]
    assert all(len(v) == 3 for v in manifest.values())
    assert len(list((out / "panels").glob("*.png"))) == 1
    assert (out / "summary.md").read_text().startswith("| dataset |")

    # the manifest reproduces the same views and numbers, whatever the seed
    out2 = tmp_path / "eval2"
    main(["--model", str(saved_model), "--data", str(synth_root), "--views", "3", "--image-width", "42",
          "--out", str(out2), "--panels", "0", "--num-workers", "0", "--cpu", "--seed", "5",
          "--manifest", str(out / "manifest.json")])
    assert json.loads((out2 / "manifest.json").read_text())["scenes"] == manifest
    assert json.loads((out2 / "summary.json").read_text())["summary"] == summary["summary"]


def test_perfect_prediction_scores_zero(synth_root):
    class Oracle(torch.nn.Module):
        """Returns the GT depth it was handed (set per scene by the test)."""

        def __init__(self):
            super().__init__()
            self.p = torch.nn.Parameter(torch.zeros(1))
            self.gt = None

        def forward(self, images, K, w2c):
            return {"depth": self.gt}

    from depthpe.loader.datasets import SceneEvalDataset

    sources = discover_sources(synth_root, "val")
    ds = SceneEvalDataset(sources, views=3, image_width=42)
    oracle = Oracle()
    gts = [ds[i]["depth"][None] for i in range(len(ds))]
    calls = iter(gts + gts)  # evaluate reads each scene once for the model

    def forward(images, K, w2c):
        return {"depth": next(calls)}

    oracle.forward = forward
    result = evaluate(oracle, resolve_held_out(sources, HeldOutProtocol(ViewDraw(3)), InputSize(42)), EvalOptions(progress=False))
    native = result.summary["synth"]["native"]
    assert native["abs_rel"] == pytest.approx(0, abs=1e-7) and native["delta1"] == 1.0
    assert result.summary["synth"]["global_constant"]["abs_rel"] > 0.05


def test_discover_sources_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="depthpe synth"):
        discover_sources(tmp_path, "val")


@pytest.mark.slow
def test_two_processes_give_the_same_table(synth_root, saved_model, tmp_path):
    """accelerate launch with 2 CPU processes (gloo) splits the scenes and writes the same summary."""
    import os
    import socket
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "eval" / "evaluate.py"
    args = ["--model", str(saved_model), "--data", str(synth_root), "--views", "3", "--image-width", "42",
            "--panels", "0", "--num-workers", "0", "--cpu"]
    main([*args, "--out", str(tmp_path / "one")])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(port), str(script), *args, "--out", str(tmp_path / "two")]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    one = json.loads((tmp_path / "one" / "summary.json").read_text())
    two = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert two["meta"]["processes"] == 2 and one["meta"]["processes"] == 1
    assert nested_close(two["summary"], one["summary"])


def test_unusable_scene_is_reported_not_fatal(synth_root, saved_model, tmp_path):
    import shutil

    root = tmp_path / "data"
    shutil.copytree(synth_root / "synth" / "val", root / "synth" / "val")
    (root / "synth" / "val" / "val_000001.h5").write_bytes(b"not an hdf5 file")
    from depthpe.model import DepthModel

    result = evaluate(DepthModel.from_pretrained(saved_model),
                      resolve_held_out(discover_sources(root, "val"), HeldOutProtocol(ViewDraw(3)), InputSize(42)))
    assert [f["scene"] for f in result.failures] == ["synth/val_000001"]
    assert result.summary["synth"]["native"]["n_scenes"] == 1


def test_eval_defaults_to_the_width_the_model_was_trained_at(synth_root, saved_model, tmp_path, capsys):
    import shutil

    from depthpe.model.training_inputs import TrainingInputs, write_training_inputs

    model = tmp_path / "model"
    shutil.copytree(saved_model, model)
    write_training_inputs(model, TrainingInputs(42, (1.0, 1.0), (2, 3)))
    common = ["--model", str(model), "--data", str(synth_root), "--views", "3", "--num-workers", "0", "--cpu",
              "--panels", "0"]
    assert main([*common, "--out", str(tmp_path / "default")]) == 0
    assert "image width 42 and aspect 1.0 from the model's training inputs" in capsys.readouterr().out
    assert main([*common, "--out", str(tmp_path / "explicit"), "--image-width", "42"]) == 0
    assert main([*common, "--out", str(tmp_path / "other"), "--image-width", "56"]) == 0
    table = {name: (tmp_path / name / "summary.md").read_text() for name in ("default", "explicit", "other")}
    assert table["default"] == table["explicit"] != table["other"]
    capsys.readouterr()
    assert main([*common, "--out", str(tmp_path / "bad"), "--image-width", "50"]) == 2
    assert capsys.readouterr().err.strip().startswith("error: --image-width must be a positive multiple of 14")
