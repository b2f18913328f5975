"""What ``--resume`` checks in a checkpoint before it is chosen (issue 30, items 9 and 14c): every
state file must load (a valid zip whose pickle was changed, a zip of garbage, broken random states
or custom state), ``--resume latest`` falls back past such a checkpoint with one warning, a named
one is one error line, and an exported model folder (``final/``) is named as what it is."""

from __future__ import annotations

import os
import shutil
import zipfile

import pytest
import torch
from safetensors.torch import load_file

from depthpe.config import ConfigError
from depthpe.run.checkpoints import checkpoint_problem
from depthpe.run.trainer import train
from tests.helpers.training import run_config


@pytest.fixture(scope="module")
def finished_run(synth_root, tmp_path_factory):
    """A finished 5-step run with checkpoints at steps 2 and 4, and its final weights."""
    out = tmp_path_factory.mktemp("resume_checks") / "run"
    train(run_config(synth_root, out, train={"steps": 5, "checkpoint_every": 2, "keep_checkpoints": 0}))
    return out, load_file(out / "final" / "model.safetensors")


def _changed_pickle(path):
    """Rewrite the torch.save archive ``path`` with the middle of its pickle (data.pkl) zeroed: still
    a valid zip with a central directory."""
    with zipfile.ZipFile(path) as archive:
        members = [(info, archive.read(info.filename)) for info in archive.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for info, data in members:
            if info.filename.endswith("/data.pkl"):
                data = data[:2] + bytes(len(data) - 4) + data[-2:]
            archive.writestr(info, data)


def _garbage_zip(path):
    """Replace ``path`` with a zip archive laid out like torch.save's whose pickle is random bytes."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{path.stem}/data.pkl", os.urandom(256))
        archive.writestr(f"{path.stem}/version", "3\n")


BREAKS = {
    "optimizer-pickle-changed": ("state/optimizer.bin", _changed_pickle),
    "optimizer-zip-of-garbage": ("state/optimizer.bin", _garbage_zip),
    "random-states-changed": ("state/random_states_0.pkl", _changed_pickle),
    "custom-state-garbage": ("state/custom_checkpoint_0.pkl", _garbage_zip),
}


@pytest.mark.parametrize("case", list(BREAKS))
def test_a_state_file_that_does_not_load_makes_latest_fall_back(case, finished_run, synth_root, tmp_path, capsys):
    source, reference = finished_run
    out = tmp_path / "run"
    shutil.copytree(source, out)
    name, breaks = BREAKS[case]
    broken = out / "checkpoints" / "step_0000004"
    assert zipfile.is_zipfile(broken / "state" / "optimizer.bin") and checkpoint_problem(broken) is None
    breaks(broken / name)
    assert zipfile.is_zipfile(broken / name)  # what the old check looked at: it passed
    with pytest.raises(ConfigError) as err:
        train(run_config(synth_root, out, train={"steps": 5}), resume=str(broken))
    assert "\n" not in str(err.value)
    assert str(err.value).startswith(f"--resume {broken}: {broken} is broken: {name}: a zip archive that "
                                     "torch.load cannot read ("), str(err.value)
    capsys.readouterr()
    resumed = load_file(train(run_config(synth_root, out, train={"steps": 5}), resume="latest") / "model.safetensors")
    printed = capsys.readouterr().out
    warnings = [line for line in printed.splitlines() if line.startswith("skipping checkpoint")]
    assert len(warnings) == 1 and warnings[0].startswith(f"skipping checkpoint {broken}: {name}: "), printed
    assert warnings[0].endswith("; falling back to the previous one")
    assert f"resumed from {out / 'checkpoints' / 'step_0000002'} at step 2" in printed
    assert all(torch.equal(reference[k], resumed[k]) for k in reference)  # bit-exact: the random states held


def test_resume_from_an_exported_model_says_it_is_no_checkpoint(finished_run, synth_root, tmp_path):
    source, _ = finished_run
    out = tmp_path / "run"
    shutil.copytree(source, out)
    for folder, instead in [(out / "final", f"{out / 'checkpoints' / 'step_N'}"),
                            (out / "checkpoints" / "step_0000002" / "model", f"{out / 'checkpoints' / 'step_0000002'}")]:
        with pytest.raises(ConfigError) as err:
            train(run_config(synth_root, out, train={"steps": 5}), resume=str(folder))
        assert str(err.value) == (f"--resume {folder}: {folder} is an exported model ({folder.name}/), not a "
                                  f"training checkpoint: pass {instead} or 'latest'")
