"""Small bad inputs of training and the commands (issue 23, item 9): an interrupted final publish,
a source of single-frame scenes, a seed outside numpy's range, a read-only or file output path."""

from __future__ import annotations

import json

import pytest
from safetensors.torch import load_file

from depthpe.cli import main
from depthpe.config import ConfigError
from depthpe.run import RunConfig, dump_run_config
from depthpe.run.checkpoints import remove_incomplete
from depthpe.run.trainer import train
from tests.helpers.training import run_config


def test_an_interrupted_final_publish_is_completed_by_the_next_start(synth_root, tmp_path):
    out = tmp_path / "run"
    final = train(run_config(synth_root, out))
    weights = load_file(final / "model.safetensors")
    # killed inside the publish: the old final/ renamed away, the complete .tmp_final not yet renamed
    final.rename(out / ".tmp_final")
    assert remove_incomplete(out) == [f"completed the interrupted publish of {final} (from {out / '.tmp_final'})"]
    assert not (out / ".tmp_final").exists() and load_file(final / "model.safetensors").keys() == weights.keys()
    assert json.loads((final / "trainer_state.json").read_text())["step"] == 4
    # an incomplete one (no trainer_state.json) is deleted, and the message names where it was
    (out / ".tmp_final").mkdir()
    (out / "checkpoints" / ".tmp_step_0000009").mkdir()
    assert remove_incomplete(out) == [
        f"removed {out / 'checkpoints' / '.tmp_step_0000009'}: an interrupted checkpoint save or deletion",
        f"removed {out / '.tmp_final'}: an interrupted checkpoint save or deletion"]
    # the rerun with --resume completes the publish before anything else and logs the right path
    final.rename(out / ".tmp_final")
    train(run_config(synth_root, out, train={"steps": 5}), resume="latest")
    log = (out / "train.log").read_text()
    assert f"completed the interrupted publish of {final} (from {out / '.tmp_final'})" in log
    assert "checkpoints/.tmp_final" not in log


def test_a_source_of_single_frame_scenes_says_scenes_need_two_frames(synth_root, tmp_path, capsys):
    from depthpe.scenes.format.scene_file import read_index, write_index

    root = tmp_path / "data"
    split = root / "synth" / "train"
    split.mkdir(parents=True)
    entries = [dict(e, num_frames=1) for e in read_index(synth_root / "synth" / "train")][:1]
    write_index(split, entries, dataset="synth", split="train")
    config = tmp_path / "run.yaml"
    config.write_text(dump_run_config(run_config(root, tmp_path / "run")))
    assert main(["train", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: data.sources.0: source 0 (synth) has 1 scene(s) in ") and "\n" not in err, err
    assert "but none with >= 2 frames" in err and not (tmp_path / "run").exists()


@pytest.mark.parametrize("workers", [0, 1])
def test_training_data_with_no_readable_scene_is_one_error_line(workers, synth_root, tmp_path, capsys):
    import shutil

    root = tmp_path / "data"
    shutil.copytree(synth_root / "synth" / "train", root / "synth" / "train")
    for scene in (root / "synth" / "train").glob("*.h5"):
        scene.write_bytes(b"not an HDF5 file")  # every listed scene unreadable
    config = tmp_path / "run.yaml"
    config.write_text(dump_run_config(run_config(root, tmp_path / "run", train={"num_workers": workers})))
    assert main(["train", "--config", str(config)]) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.split("\n") if "error:" in line]  # split("\n"): a "\r" of the bar would count
    assert len(lines) == 1 and lines[0].startswith("error: no usable sample after "), err  # a line of its own
    assert "run `depthpe check`" in lines[0] and "Traceback" not in err
    logged = [line for line in (tmp_path / "run" / "train.log").read_text().splitlines() if "error:" in line]
    assert len(logged) == 1 and logged[0].endswith(lines[0]), logged  # and in train.log, the same line


@pytest.mark.parametrize("content", [b"not a checkpoint", b"\x80\x04K\x01."])  # junk; a pickle of no tensors
def test_backbone_weights_that_cannot_be_read_are_one_error_line(content, synth_root, tmp_path, capsys):
    """model.backbone_weights names a file that exists (preflight passes) but holds no weights: the
    model cannot be built; one line (torch's own message is many lines), status 1, no traceback."""
    (tmp_path / "bad.pt").write_bytes(content)
    config = tmp_path / "run.yaml"
    config.write_text(dump_run_config(run_config(synth_root, tmp_path / "run")))
    assert main(["train", "--config", str(config), f"model.backbone_weights={tmp_path / 'bad.pt'}"]) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.split("\n") if "error:" in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"error: could not read weights file '{tmp_path / 'bad.pt'}' (") or \
        lines[0] == f"error: '{tmp_path / 'bad.pt'}' does not hold a state dict of tensors", lines


def test_a_scene_of_1x1_pixels_fails_check_and_training_skips_and_counts_it(synth_root, tmp_path):
    from depthpe.scenes.format.check import check_scene
    from depthpe.scenes.format.limits import frame_size_problem
    from depthpe.scenes.format.scene_file import write_index, write_scene
    from tests.helpers.scenes import plane_scene

    split = tmp_path / "data" / "tiny" / "train"
    split.mkdir(parents=True)
    s = plane_scene(4, 1, 1)
    entry = write_scene(split / "s0.h5", images=s["images"], depth=s["depth"], K=s["K"], w2c=s["w2c"], dataset="tiny",
                        scene_id="s0", split="train", metric=True, depth_units="m", image_format="png")
    write_index(split, [entry], dataset="tiny", split="train")
    problem = frame_size_problem(1, 1)
    assert problem.startswith("frames of 1x1 pixels (HxW) are too small: a usable scene has at least MIN_FRAME_SIDE")
    assert check_scene(split / "s0.h5").problems == [problem]
    sources = [{"name": "tiny", "root": str(tmp_path / "data"), "split": "train"},
               {"name": "synth", "root": str(synth_root), "split": "train"}]
    final = train(run_config(synth_root, tmp_path / "run", data={"sources": sources},
                             train={"steps": 2, "checkpoint_every": 0}))
    state = json.loads((final / "trainer_state.json").read_text())
    assert state["counters"]["bad_files"] == 1 and state["counters"]["skipped_files"] >= 1
    assert state["bad_files"] == {str(split / "s0.h5"): f"{split / 's0.h5'}: {problem}"}


@pytest.mark.parametrize("seed", [-1, 2**40, 2**32])
def test_a_seed_outside_numpys_range_is_a_config_error(seed):
    with pytest.raises(ConfigError, match=r"seed must be an integer in \[0, 2\*\*32 - 1\]"):
        RunConfig.from_dict({"seed": seed})
    assert RunConfig.from_dict({"seed": 2**32 - 1}).seed == 2**32 - 1


def test_the_rescaled_k_note_names_the_cameras_size_and_the_images():
    import numpy as np

    from depthpe.scenes.cameras import FrameCamera
    from depthpe.prediction.api import _match_cameras

    K = np.array([[50.0, 0, 27.5], [0, 50.0, 27.5], [0, 0, 1]])
    cams = {"a.png": FrameCamera("a.png", K, np.eye(4)[:3], 56, 56)}
    (cam,), notes = _match_cameras(["a.png"], [(112, 112)], cams)
    assert notes == ["a.png: K rescaled from 56x56 to the image's 112x112"]
    assert cam.K[0, 0] == 100.0 and (cam.width, cam.height) == (112, 112)


OUT_COMMANDS = {  # command line with OUT where the output folder goes; the status of a bad one
    "train": (["train", "--config", "CONFIG", "output_dir=OUT"], 2),
    "eval": (["eval", "--model", "MODEL", "--data", "DATA", "--out", "OUT"], 2),
    "predict": (["predict", "--model", "MODEL", "--images", "DATA", "--out", "OUT"], 2),
    "synth": (["synth", "--out", "OUT", "--train-scenes", "1", "--val-scenes", "0", "--quiet"], 2),
    "convert": (["convert", "folder", "--src", "DATA", "--out", "OUT"], 2),
}


def _argv(command, out, tmp_path, synth_root):
    config = tmp_path / "run.yaml"
    config.write_text(dump_run_config(run_config(synth_root, tmp_path / "unused")))
    values = {"OUT": str(out), "CONFIG": str(config), "MODEL": str(tmp_path / "no_model"), "DATA": str(synth_root)}
    argv, status = OUT_COMMANDS[command]
    return [values.get(a, a.replace("OUT", str(out))) for a in argv], status


@pytest.mark.parametrize("command", [c for c in OUT_COMMANDS if c != "train"])
def test_out_naming_a_file_is_one_error_line(command, synth_root, tmp_path, capsys):
    target = tmp_path / "a_file"
    target.write_text("keep me")
    argv, status = _argv(command, target, tmp_path, synth_root)
    assert main(argv) == status
    printed = capsys.readouterr()
    text = (printed.err + printed.out).strip()
    assert f"error: --out {target} is a file, not a folder (give a folder path)" in text, text
    assert "Traceback" not in text and target.read_text() == "keep me"


@pytest.mark.parametrize("command", list(OUT_COMMANDS))
def test_a_read_only_output_folder_is_one_error_line(command, synth_root, tmp_path, capsys, monkeypatch):
    import os

    parent = tmp_path / "read_only"
    parent.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(parent) else real(p, mode, **kw))
    argv, status = _argv(command, parent / "out", tmp_path, synth_root)
    assert main(argv) == status
    printed = capsys.readouterr()
    text = (printed.err + printed.out).strip()
    label = "output_dir" if command == "train" else "--out"
    assert (f"error: {label} {parent / 'out'}: {parent} is not writable (a read-only file system or no permission); "
            "choose a folder you can write to") in text, text
    assert "Traceback" not in text and not (parent / "out").exists()


def test_synth_with_a_very_tall_image_is_one_error_line(tmp_path, capsys):
    status = main(["synth", "--out", str(tmp_path / "data"), "--height", "280", "--width", "28", "--train-scenes", "1",
                   "--val-scenes", "0", "--workers", "1", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert status == 1 and "\n" not in err and "Traceback" not in err, err
    assert err.startswith("error: could not draw a scene with valid cameras in 20 attempts at 280x28 pixels "
                          "(height/width 10): ") and "--height 56" in err, err
