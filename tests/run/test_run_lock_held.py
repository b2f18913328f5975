"""A training output folder whose lock a live process holds (depthpe/run/lock.py): the preflight's
``lock_problem`` names the holder, and ``run_lock`` stops every process with ``ConfigError`` when
the main process could not take the lock; a free folder is locked and released."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch

from depthpe.config import ConfigError
from depthpe.run.lock import OWNER_FILE, lock_problem, run_lock
from tests.helpers.locks import HOLD_LOCK


class _Accelerator:
    """The part of ``accelerate.Accelerator`` that ``run_lock`` uses, for one rank of ``processes``:
    ``reduce`` adds the failures of the other ranks (``others``, 0 or 1 each) to this one's."""

    def __init__(self, is_main_process: bool = True, others: float = 0.0):
        self.is_main_process, self.others, self.device = is_main_process, others, torch.device("cpu")

    def reduce(self, tensor: torch.Tensor, reduction: str) -> torch.Tensor:
        assert reduction == "sum"
        return tensor + self.others


@pytest.fixture
def held(tmp_path):
    """(output folder, pid): a child process holds the folder's lock until the test ends."""
    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(out)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield out, holder.pid
    finally:
        holder.kill()
        holder.wait()


def _in_use(out, pid) -> str:
    return (rf"^output_dir {re.escape(str(out))} is in use by another training run \(pid {pid} on [^,]+, since "
            r"[^)]+\) \(wait for it to finish, or use another output_dir\)$")


def test_lock_problem_names_the_live_holder(held):
    out, pid = held
    problem = lock_problem(out)
    assert problem is not None and re.match(_in_use(out, pid), problem), problem


def test_lock_problem_of_a_free_folder_is_none(tmp_path):
    assert lock_problem(tmp_path) is None and lock_problem(tmp_path / "not yet made") is None
    assert not (tmp_path / "not yet made").exists()


def test_run_lock_refuses_a_folder_a_live_process_holds(held):
    out, pid = held
    with pytest.raises(ConfigError, match=_in_use(out, pid)):
        with run_lock(out, _Accelerator()):
            pytest.fail("run_lock let a second run into a locked output_dir")
    assert f'"pid": {pid}' in (out / OWNER_FILE).read_text()  # the holder's record is left alone


def test_every_process_stops_when_the_main_one_could_not_lock(tmp_path):
    """A rank other than the main one learns the main process's failure from the reduced count."""
    with pytest.raises(ConfigError, match=f"^the main process could not lock {re.escape(str(tmp_path))}$"):
        with run_lock(tmp_path, _Accelerator(is_main_process=False, others=1.0)):
            pytest.fail("a rank went on although the main process holds no lock")


def test_run_lock_of_a_free_folder_holds_it_for_the_duration(tmp_path):
    out = tmp_path / "run"
    with run_lock(out, _Accelerator()) as took_over:
        assert took_over is None and (out / OWNER_FILE).is_file()
        assert lock_problem(out) is not None  # held: a second run would be refused
    assert lock_problem(out) is None and not (out / OWNER_FILE).exists()
