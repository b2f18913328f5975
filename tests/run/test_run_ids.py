"""One run per run folder (issue 30, items 2 and 8): every run has an id (run.json, the
trainer_state.json of its checkpoints and of final/); a new run into a folder that holds a run is
refused unless --overwrite moves that run aside; --resume refuses a checkpoint of another run and a
changed setting that changes what the run trains for, and logs every other changed setting,
data.* and val.* included."""

from __future__ import annotations

import json
import shutil

import pytest

from depthpe.config import ConfigError
from depthpe.run import dump_run_config
from depthpe.run.checkpoints import STATE_FILE
from depthpe.run.trainer import train
from depthpe.train import main
from tests.helpers.training import run_config


def _run_id(folder) -> str | None:
    """The run id a run folder records in run.json (None without one)."""
    path = folder / "run.json"
    return json.loads(path.read_text())["run_id"] if path.is_file() else None


def _state_id(folder) -> str | None:
    return json.loads((folder / STATE_FILE).read_text()).get("run_id")


def test_a_new_run_into_a_folder_that_holds_a_run_is_refused_and_overwrite_moves_it_aside(synth_root, tmp_path, capsys):
    out = tmp_path / "run"
    config = tmp_path / "run.yaml"
    config.write_text(dump_run_config(run_config(synth_root, out)))
    assert main(["--config", str(config)]) == 0
    first = _run_id(out)
    assert len(first) == 32 and int(first, 16) >= 0
    assert _state_id(out / "final") == first and _state_id(out / "checkpoints" / "step_0000002") == first
    kept = {p: p.read_bytes() for p in (out / "config.yaml", out / "final" / "model.safetensors",
                                        out / "final" / STATE_FILE)}
    capsys.readouterr()

    assert main(["--config", str(config), "train.steps=2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: output_dir {out} already holds a run (checkpoints/ (1), final/): resume it with --resume "
                   f"latest, choose another output_dir, or pass --overwrite to move that run aside to "
                   f"{out}.old-TIMESTAMP and start a new one")
    assert all(p.read_bytes() == data for p, data in kept.items())  # nothing of the run was touched
    assert main(["--config", str(config), "--overwrite", "--resume", "latest"]) == 2
    assert capsys.readouterr().err.strip() == ("error: --overwrite starts a new run and cannot be combined with "
                                               "--resume latest (drop one of them)")

    assert main(["--config", str(config), "--overwrite", "train.steps=1", "train.checkpoint_every=0"]) == 0
    (aside,) = tmp_path.glob("run.old-*")
    assert _run_id(aside) == first and (aside / "checkpoints" / "step_0000002").is_dir()
    assert all((aside / p.relative_to(out)).read_bytes() == data for p, data in kept.items())
    second = _run_id(out)
    assert second not in (None, first) and _state_id(out / "final") == second
    assert not (out / "checkpoints").exists() and (out / ".lock").is_file()
    log = (out / "train.log").read_text()
    assert f"--overwrite: moved the earlier run in {out} aside to {aside}" in log and "resumed from" not in log


def test_resume_refuses_a_checkpoint_of_another_run_and_takes_an_older_ones(synth_root, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    train(run_config(synth_root, a, train={"steps": 2, "checkpoint_every": 1}))
    train(run_config(synth_root, b, train={"steps": 4, "checkpoint_every": 3}))
    id_a, id_b = _run_id(a), _run_id(b)
    foreign = a / "checkpoints" / "step_0000003"
    shutil.copytree(b / "checkpoints" / "step_0000003", foreign)  # copied in from run b
    for resume, checkpoint in [("latest", foreign), (str(b / "checkpoints" / "step_0000003"), b / "checkpoints" / "step_0000003")]:
        with pytest.raises(ConfigError) as err:
            train(run_config(synth_root, a, train={"steps": 4}), resume=resume)
        assert str(err.value) == (f"--resume: the checkpoint {checkpoint} belongs to another run (run id {id_b}) than "
                                  f"the one in output_dir {a} (run id {id_a}): resume from a checkpoint of this run "
                                  "(--resume latest after removing the other one), or resume that checkpoint into a "
                                  "new output_dir")
    assert _state_id(a / "final") == id_a  # refused before anything was written
    # run b's checkpoint resumed into a folder of its own continues run b
    final = train(run_config(synth_root, tmp_path / "c", train={"steps": 4}), resume=str(foreign))
    assert _run_id(tmp_path / "c") == id_b and _state_id(final) == id_b
    # a checkpoint written before run ids existed resumes, and the run keeps the folder's id
    shutil.rmtree(foreign)
    older = a / "checkpoints" / "step_0000001"
    doc = json.loads((older / STATE_FILE).read_text())
    del doc["run_id"]
    (older / STATE_FILE).write_text(json.dumps(doc))
    assert _state_id(train(run_config(synth_root, a, train={"steps": 3}), resume=str(older))) == id_a
    # ... and in a folder without run.json (an older version's) the run is given a new id
    (a / "run.json").unlink()
    final = train(run_config(synth_root, a, train={"steps": 3}), resume=str(older))
    assert _run_id(a) not in (None, id_a) and _state_id(final) == _run_id(a)


def test_resume_logs_changed_data_and_val_settings_and_refuses_what_changes_the_task(synth_root, tmp_path, capsys):
    out = tmp_path / "run"
    val = {"sources": [{"name": "synth", "root": str(synth_root), "split": "val"}], "every": 0, "views": 2,
           "max_scenes": 1, "panels": 0}
    train(run_config(synth_root, out, train={"steps": 2, "checkpoint_every": 1}, val=val))
    checkpoint = out / "checkpoints" / "step_0000001"
    for data, line in [({"image_width": 56}, "data.image_width changed from 42 to 56"),
                       ({"scale_reference": "all"}, "data.scale_reference changed from 'others' to 'all'")]:
        with pytest.raises(ConfigError) as err:
            train(run_config(synth_root, out, train={"steps": 2, "checkpoint_every": 1}, val=val, data=data),
                  resume="latest")
        key = line.split()[0]
        assert str(err.value) == (f"--resume: {line} since the checkpoint {checkpoint}, which changes what the run "
                                  f"trains the model for (keep the run's value, train into a new output_dir, or pass "
                                  f"--allow-config-change {key} to resume anyway)")
    with pytest.raises(ConfigError, match=r"^--allow-config-change train.steps: not a setting that a resume refuses"):
        train(run_config(synth_root, out, val=val), resume="latest", allow_config_change=("train.steps",))
    capsys.readouterr()
    sources = [{"name": "synth", "root": str(synth_root), "split": "train", "weight": 2.0}]
    train(run_config(synth_root, out, train={"steps": 2, "checkpoint_every": 1},
                     data={"image_width": 56, "views": [2, 2], "sources": sources},
                     val={**val, "views": 3, "image_width": 28, "max_scenes": 2}),
          resume="latest", allow_config_change=("data.image_width",))
    printed = capsys.readouterr().out
    log = (out / "train.log").read_text()
    for change in ["data.image_width: 42 -> 56 (allowed by --allow-config-change)", "data.sources.0.weight: 1.0 -> 2.0",
                   "data.views: (2, 3) -> (2, 2)", "val.views: 2 -> 3", "val.image_width: None -> 28",
                   "val.max_scenes: 1 -> 2"]:
        assert f"resuming with a changed setting: {change}" in printed and change in log, change
