"""``depthpe eval --model`` that cannot be loaded is one line naming what to pass instead (reliability
IV item 10): a typo, a folder without model.safetensors, a training checkpoint or run folder."""

from __future__ import annotations

import pytest

from depthpe.cli import main
from depthpe.config import ConfigError
from depthpe.model.depth_model import model_files


def _layout(root, *files):
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("{}")
    return root


@pytest.mark.parametrize("files, message", [
    (("state/optimizer.bin", "trainer_state.json", "model/config.json"), "is a training checkpoint, not an exported model; pass its model folder"),
    (("final/config.json", "config.yaml"), "is a run folder, not an exported model; pass"),
    (("config.json",), "is not a depthpe model folder: missing model.safetensors"),
])
def test_a_folder_that_is_not_a_model_says_what_to_pass(tmp_path, files, message):
    folder = _layout(tmp_path / "m", *files)
    with pytest.raises(ConfigError, match=f"^--model {folder} {message}") as err:
        model_files(str(folder))
    assert "\n" not in str(err.value)


def test_a_typo_and_a_file(tmp_path):
    with pytest.raises(ConfigError, match=r"^--model ./runs/nope/final does not exist \(pass a model folder"):
        model_files("./runs/nope/final")
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a model folder"):
        model_files(str(tmp_path / "f.txt"))


def test_depthpe_eval_prints_one_line_and_exits_2(tmp_path, capsys):
    data = tmp_path / "data" / "synth" / "val"
    data.mkdir(parents=True)
    (data / "index.json").write_text('{"dataset": "synth", "split": "val", "scenes": []}')
    folder = _layout(tmp_path / "ckpt", "state/x.bin", "trainer_state.json")
    code = main(["eval", "--model", str(folder), "--data", str(tmp_path / "data"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "is a training checkpoint, not an exported model" in err and "Traceback" not in err
