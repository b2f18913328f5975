"""The sizes and reasons of depthpe/run/disk_space.py: the next checkpoint is as large as the
previous one when there is one (else the tensors' bytes), and a ``torch.save`` error without an
errno is the file-size limit only when ``ulimit -f`` is below the bytes needed."""

from __future__ import annotations

import resource
import shutil
from collections import namedtuple

import pytest
import torch

from depthpe.run.disk_space import expected_checkpoint_bytes, space_error, state_bytes

Usage = namedtuple("Usage", "total used free")
ODD = (1237, 5, 40_001)  # file sizes of a previous checkpoint folder, one nested


def _model() -> torch.nn.Module:
    return torch.nn.Linear(7, 3)  # 24 float32 parameters: 96 bytes, twice in a checkpoint


def test_the_previous_checkpoint_size_is_the_estimate(tmp_path):
    previous = tmp_path / "step_0000010"
    (previous / "state").mkdir(parents=True)
    for i, size in enumerate(ODD):
        (previous / ("state" if i else "") / f"f{i}").write_bytes(b"x" * size)
    model = _model()
    assert state_bytes(model) == 2 * 24 * 4
    assert expected_checkpoint_bytes(previous, model) == sum(ODD)


def test_without_a_previous_checkpoint_the_tensors_are_counted(tmp_path):
    model = _model()
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.ones(2, 7)).sum().backward()
    optimizer.step()  # two moments per parameter, and a step counter each
    expected = 2 * 96 + 2 * 96 + sum(s["step"].numel() * s["step"].element_size() for s in optimizer.state.values())
    assert expected_checkpoint_bytes(None, model, optimizer) == expected
    (tmp_path / "empty").mkdir()
    assert expected_checkpoint_bytes(tmp_path / "empty", model) == 2 * 96  # an empty folder is no size


@pytest.fixture
def plenty_of_space(monkeypatch):
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(10**13, 0, 10**13))


@pytest.mark.parametrize("limit, file_size_limit", [(10**6, True), (10**12, False), (resource.RLIM_INFINITY, False)])
def test_an_error_without_errno_is_the_file_size_limit_only_below_the_needed_bytes(
        tmp_path, monkeypatch, plenty_of_space, limit, file_size_limit):
    monkeypatch.setattr(resource, "getrlimit", lambda which: (limit, limit))
    problem = space_error(RuntimeError("file write failed"), tmp_path, 10**9, "checkpoint step 3")
    if file_size_limit:
        assert str(problem) == (f"the file-size limit of this process (ulimit -f) was reached on {tmp_path} while "
                                "writing checkpoint step 3 (needs about 1 GB); raise the limit, then continue "
                                "with --resume latest")
    else:
        assert problem is None  # enough space and a limit above the size: not about space
