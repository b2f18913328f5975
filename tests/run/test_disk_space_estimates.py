"""The sizes and reasons of depthpe/run/disk_space.py: the next checkpoint is as large as the
previous one when there is one (else the tensors' bytes), and a ``torch.save`` error without an
errno is the file-size limit only when ``ulimit -f`` is below the bytes needed."""

from __future__ import annotations

import resource
import shutil
from collections import namedtuple

import pytest
import torch

from depthpe.run.disk_space import (check_free_space, expected_checkpoint_bytes, format_bytes, space_error,
                                   state_bytes)

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
    assert expected_checkpoint_bytes(tmp_path / "gone", model) == 2 * 96  # nor is a missing one


@pytest.fixture
def plenty_of_space(monkeypatch):
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(10**13, 0, 10**13))


@pytest.mark.parametrize("soft, hard, file_size_limit", [
    (10**6, 10**6, True), (10**12, 10**12, False), (resource.RLIM_INFINITY, resource.RLIM_INFINITY, False),
    (10**6, resource.RLIM_INFINITY, True),  # the soft limit is the one a write meets
    (10**12, 10**6, False),
    (10**9, 10**9, False),  # a limit of exactly the bytes needed lets them be written
])
def test_an_error_without_errno_is_the_file_size_limit_only_below_the_needed_bytes(
        tmp_path, monkeypatch, plenty_of_space, soft, hard, file_size_limit):
    monkeypatch.setattr(resource, "getrlimit", lambda which: (soft, hard))
    problem = space_error(RuntimeError("file write failed"), tmp_path, 10**9, "checkpoint step 3")
    if file_size_limit:
        assert str(problem) == (f"the file-size limit of this process (ulimit -f) was reached on {tmp_path} while "
                                "writing checkpoint step 3 (needs about 1 GB); raise the limit, then continue "
                                "with --resume latest")
    else:
        assert problem is None  # enough space and a limit above the size: not about space


@pytest.mark.parametrize("n, text", [(0, "0 B"), (999, "999 B"), (1000, "1 kB"), (12_345, "12 kB"),
                                     (999_999, "1 MB"), (1_200_000, "1.2 MB"), (35e6, "35 MB"),
                                     (2.5e9, "2.5 GB"), (999.9e9, "1 TB"), (1.2e12, "1.2 TB")])
def test_sizes_are_told_in_decimal_units_with_two_digits(n, text):
    assert format_bytes(n) == text


def test_exactly_the_needed_bytes_free_is_enough(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(10**13, 10**13 - 500, 500))
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY,) * 2)
    check_free_space(tmp_path / "not" / "yet", 500, "checkpoint step 1")  # its nearest existing parent is asked
    assert space_error(RuntimeError("file write failed"), tmp_path, 500, "checkpoint step 1") is None
    with pytest.raises(OSError, match=r"^no space left on .* for checkpoint step 1 \(needs about 501 B, 500 B free\)"):
        check_free_space(tmp_path, 501, "checkpoint step 1")
    assert "no space left" in str(space_error(RuntimeError("file write failed"), tmp_path, 501, "checkpoint step 1"))
