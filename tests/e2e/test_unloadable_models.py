"""A model folder whose weights cannot be loaded (a cut-short download: the safetensors header is
damaged; or weights of another architecture than config.json) is one `error:` line, status 2, in every
command that loads a model by path: eval, predict, probe and view (it was a traceback of
CheckpointMismatchError, a RuntimeError that those commands did not catch)."""

from __future__ import annotations

import json
import shutil

import pytest

from depthpe.cli import main
from depthpe.view.config import ViewConfig
from depthpe.view.serve import scene_for


@pytest.fixture(params=["cut", "other_architecture"])
def broken_model(request, saved_model, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(saved_model, folder)
    weights = folder / "model.safetensors"
    if request.param == "cut":
        weights.write_bytes(weights.read_bytes()[:40])
    else:
        config = json.loads((folder / "config.json").read_text())
        config["head_features"] *= 2  # a head twice as wide as the weights
        (folder / "config.json").write_text(json.dumps(config))
    return folder


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.split("\n") if line.strip() and not line.startswith(("eval", "predict", "\r"))]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def test_every_command_that_loads_a_model_says_it_in_one_line(broken_model, synth_root, inputs, tmp_path, capsys):
    commands = [["eval", "--model", str(broken_model), "--data", str(synth_root), "--out", str(tmp_path / "e"),
                 "--views", "2", "--image-width", "42", "--cpu"],
                ["probe", "attention", "--model", str(broken_model), "--data", str(synth_root),
                 "--out", str(tmp_path / "p"), "--views", "2", "--image-width", "42", "--cpu"],
                ["predict", "--model", str(broken_model), "--images", str(inputs / "images"), "--cameras",
                 str(inputs / "cams.json"), "--out", str(tmp_path / "o")]]
    for argv in commands:
        assert main(argv) == 2, argv
        assert str(broken_model) in _one_error_line(capsys)
    with pytest.raises(Exception) as err:  # depthpe view: a ConfigError, printed as one line by the command
        scene_for(ViewConfig(model=str(broken_model), data=str(synth_root)))
    assert type(err.value).__name__ == "ConfigError" and "\n" not in str(err.value)


def test_an_evaluation_whose_model_did_not_load_leaves_nothing_in_the_way(saved_model, synth_root, tmp_path, capsys):
    """Nothing was evaluated, so nothing is kept: once the model is fixed the same command runs (no
    "other settings" refusal, no --restart needed)."""
    model = tmp_path / "model"
    shutil.copytree(saved_model, model)
    weights = (model / "model.safetensors").read_bytes()
    (model / "model.safetensors").write_bytes(weights[:40])
    argv = ["eval", "--model", str(model), "--data", str(synth_root), "--out", str(tmp_path / "e"), "--views", "2",
            "--image-width", "42", "--cpu"]
    assert main(argv) == 2
    capsys.readouterr()
    assert not (tmp_path / "e" / "partial").exists()
    (model / "model.safetensors").write_bytes(weights)
    assert main(argv) == 0, capsys.readouterr().err
    assert (tmp_path / "e" / "summary.json").is_file()
