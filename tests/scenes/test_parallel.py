"""depthpe.scenes.parallel: ``ordered_map`` keeps the item order in spawned workers, starts no more
workers than the work pays for, and turns a killed worker into one ``WorkerDied`` line."""

from __future__ import annotations

import os
import signal

import pytest

from depthpe.scenes.parallel import WorkerDied, ordered_map, resolve_workers, workers_used


def _pid_and_square(x: int) -> tuple[int, int]:
    return os.getpid(), x * x


def _die(x: int) -> int:
    os.kill(os.getpid(), signal.SIGKILL)  # what the out-of-memory killer does
    return x


def test_results_keep_the_item_order_in_worker_processes():
    out = ordered_map(_pid_and_square, range(40), workers=2)
    assert [sq for _, sq in out] == [x * x for x in range(40)]
    pids = {pid for pid, _ in out}
    assert os.getpid() not in pids and len(pids) == 2


def test_too_little_work_runs_in_this_process():
    assert workers_used(8, 10, min_per_worker=4) == 2 and workers_used(8, 3, min_per_worker=4) == 1
    out = ordered_map(_pid_and_square, range(5), workers=2, min_per_worker=4)
    assert {pid for pid, _ in out} == {os.getpid()}
    assert resolve_workers(3) == 3 and 1 <= resolve_workers(0, limit=8) <= 8


def test_a_killed_worker_is_one_error_line():
    with pytest.raises(WorkerDied, match=r"a worker process died .*rerun with fewer --workers"):
        ordered_map(_die, range(4), workers=2)


def test_check_and_index_print_the_error_and_exit_2(tmp_path, monkeypatch, capsys):
    from depthpe.cli import main
    from depthpe.scenes.format import check, reindex

    def killed(*args, **kwargs):
        return ordered_map(_die, range(4), workers=2)

    monkeypatch.setattr(reindex, "rebuild_indexes", killed)
    monkeypatch.setattr(check, "check_root", killed)
    for command in ("index", "check"):
        assert main([command, str(tmp_path), "--quiet"]) == 2
        assert capsys.readouterr().out.startswith("error: a worker process died (")


class _Unpicklable(Exception):
    """An exception that cannot cross a pipe (it holds a lock)."""

    def __init__(self, message: str):
        import threading

        super().__init__(message)
        self.lock = threading.Lock()


def _fail_on_three(x: int) -> int:
    if x == 3:
        raise KeyError(f"item {x} is bad")
    return x


def _fail_unpicklably(x: int) -> int:
    raise _Unpicklable(f"cannot send item {x}")


def _lock_result(x: int):
    import threading

    return threading.Lock()


def test_an_exception_in_a_worker_is_raised_here_with_the_workers_traceback():
    with pytest.raises(KeyError, match="item 3 is bad") as err:
        ordered_map(_fail_on_three, range(8), workers=2)
    assert "in a worker process" in str(err.value.__cause__) and "_fail_on_three" in str(err.value.__cause__)


def test_what_cannot_cross_the_pipe_arrives_as_a_runtime_error_with_its_text():
    """An exception or a result that does not pickle would otherwise leave the parent waiting."""
    with pytest.raises(RuntimeError, match=r"_Unpicklable: cannot send item \d") as err:
        ordered_map(_fail_unpicklably, range(4), workers=2, chunk=1)
    assert not isinstance(err.value, _Unpicklable)
    with pytest.raises(RuntimeError, match="its result does not pickle"):
        ordered_map(_lock_result, range(4), workers=2, chunk=1)
