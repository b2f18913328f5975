"""``ordered_map``'s ``initializer`` runs once in every spawned worker before its items
(depthpe/scenes/parallel.py), e.g. to set one thread per worker."""

from __future__ import annotations

import os

from depthpe.scenes.parallel import ordered_map

_MARK = "DEPTHPE_TEST_WORKER_INITIALIZED"


def _initialize() -> None:
    os.environ[_MARK] = f"initialized in {os.getpid()}"


def _pid_and_mark(x: int) -> tuple[int, str | None]:
    return os.getpid(), os.environ.get(_MARK)


def test_the_initializer_runs_in_each_worker():
    assert _MARK not in os.environ
    out = ordered_map(_pid_and_mark, range(8), workers=2, initializer=_initialize)
    assert os.getpid() not in {pid for pid, _ in out}  # (how many workers took items depends on the machine)
    assert all(mark == f"initialized in {pid}" for pid, mark in out), out
    assert _MARK not in os.environ  # not run in this process


def test_one_worker_runs_in_this_process_without_the_initializer():
    out = ordered_map(_pid_and_mark, range(3), workers=1, initializer=_initialize)
    assert out == [(os.getpid(), None)] * 3
