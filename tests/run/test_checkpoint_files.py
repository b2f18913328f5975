"""The readability check of a checkpoint folder (depthpe/run/checkpoint_files.py) on small folders
built here: what trainer_state.json must hold, which files of Accelerate's and DeepSpeed's state
are checked, and the opcode check of a pickle that ``weights_only`` will not build."""

from __future__ import annotations

import json
import pickle
import zipfile

import pytest
import torch
from safetensors.torch import save_file

from depthpe.run.checkpoint_files import _opcode_problem, checkpoint_problem, state_files


@pytest.fixture
def checkpoint(tmp_path):
    """A readable checkpoint folder: trainer state, exported model and an optimizer state."""
    folder = tmp_path / "step_0000003"
    (folder / "model").mkdir(parents=True)
    (folder / "state").mkdir()
    (folder / "trainer_state.json").write_text(json.dumps({"step": 3, "counters": {"seen": 6}}))
    save_file({"w": torch.ones(2)}, folder / "model" / "model.safetensors")
    torch.save({"state": {0: {"exp_avg": torch.zeros(2)}}}, folder / "state" / "optimizer.bin")
    return folder


def test_a_readable_checkpoint_has_no_problem(checkpoint):
    assert checkpoint_problem(checkpoint) is None


@pytest.mark.parametrize("doc, why", [
    ({"step": 3}, "no integer 'step' or no 'counters'"),
    ({"counters": {}}, "no integer 'step' or no 'counters'"),
    ({"step": "3", "counters": {}}, "no integer 'step' or no 'counters'"),
    ({"step": 3, "counters": []}, "no integer 'step' or no 'counters'"),
    ([3], "'list' object has no attribute 'get'"),
])
def test_the_trainer_state_needs_an_integer_step_and_counters(checkpoint, doc, why):
    (checkpoint / "trainer_state.json").write_text(json.dumps(doc))
    assert checkpoint_problem(checkpoint) == f"trainer_state.json: {why}"


def test_the_first_missing_or_broken_file_is_named_with_its_folder(checkpoint):
    (checkpoint / "state" / "optimizer.bin").write_bytes(b"PK\x03\x04 cut off")
    assert checkpoint_problem(checkpoint) == "state/optimizer.bin: truncated or not a torch.save archive"
    (checkpoint / "model" / "model.safetensors").unlink()
    assert checkpoint_problem(checkpoint) == "model/model.safetensors: missing"  # the model is checked first


def test_deepspeed_state_files_are_those_of_the_tag_folder_latest_names(tmp_path):
    state = tmp_path / "state"
    tag = state / "pytorch_model" / "global_step4"
    tag.mkdir(parents=True)
    for name in ("mp_rank_00_model_states.pt", "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt", "notes.txt"):
        (tag / name).write_bytes(b"")
    (state / "pytorch_model" / "latest").write_text("global_step4\n")
    for name in ("random_states_0.pkl", "zero_to_fp32.py", "latest"):
        (state / name).write_text("pytorch_model")
    expected = [tag / "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt", tag / "mp_rank_00_model_states.pt",
                state / "random_states_0.pkl"]
    assert state_files(state) == expected  # the top-level latest names an existing folder: not a file to load
    (state / "latest").write_text("global_step9")
    assert state_files(state) == [state / "global_step9", *expected]  # a missing tag folder: reported missing
    (state / "latest").write_text("  \n")
    assert state_files(state) == [state / "latest (empty)", *expected]


def _archive(path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def test_the_opcode_check_reads_the_pickle_of_the_archive(tmp_path):
    path = tmp_path / "custom_checkpoint_0.pkl"
    _archive(path, {"archive/data.pkl": pickle.dumps({"seen": 4}), "archive/version": b"3\n"})
    assert _opcode_problem(path) is None
    _archive(path, {"archive/version": b"3\n"})
    assert _opcode_problem(path) == "a zip archive without a pickle (no */data.pkl)"
    _archive(path, {"archive/data.pkl": pickle.dumps({"seen": 4})[:-1]})  # no STOP opcode
    assert _opcode_problem(path).startswith("a zip archive whose pickle is malformed (")


@pytest.mark.parametrize("error, reason", [
    (pickle.UnpicklingError("Weights only load failed.\nWeightsUnpickler error: Unsupported operand 0\nmore"),
     "Unsupported operand 0"),
    (pickle.UnpicklingError("invalid load key, '\\x00'.\nsecond line"), "invalid load key, '\\x00'."),
    (pickle.UnpicklingError(""), "unpickling failed"),
    (RuntimeError("PytorchStreamReader failed reading zip archive\nstack"),
     "RuntimeError: PytorchStreamReader failed reading zip archive"),
])
def test_a_failed_load_is_told_by_its_first_line(checkpoint, monkeypatch, error, reason):
    import accelerate.utils

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(accelerate.utils, "load", fail)
    assert checkpoint_problem(checkpoint) == f"state/optimizer.bin: a zip archive that torch.load cannot read ({reason})"
