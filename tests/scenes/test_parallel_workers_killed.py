"""A worker process killed mid-item (SIGKILL, what the out-of-memory killer sends) ends ``depthpe synth``,
``convert``, ``check`` and ``index`` with one line naming the item and how to rerun, and a non-zero exit,
never a hang; ``parallel_map``'s unordered mode hands every result to its callback exactly once.

The per-item function of each command is replaced (monkeypatch, in this process) by one of this
module's that kills its worker on one chosen item; the spawned workers unpickle it by its module
name, so they run it too."""

from __future__ import annotations

import os
import signal

import pytest

from depthpe.cli import main
from depthpe.scenes.convert import runner as convert_runner
from depthpe.scenes.format import check, reindex
from depthpe.scenes.parallel import WorkerDied, parallel_map
from depthpe.scenes.synth import write_synth_dataset
from depthpe.scenes.synth import writer as synth_writer
from depthpe.testing import fake_datasets as fake

_MAKE_SCENE_FILE = synth_writer._make_scene_file
_CONVERT_JOB = convert_runner._convert_job
_CHECK_CONTAINED = check._check_contained
_READ_ENTRY = reindex._read_entry


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _synth_dies_on_scene_1(job):
    if job[2] == 1:
        _die()
    return _MAKE_SCENE_FILE(job)


def _convert_dies_on_scene_001(job):
    if job[1].scene_id.endswith("001"):
        _die()
    return _CONVERT_JOB(job)


def _check_dies_on_scene_1(job, kwargs):
    if job[0].name == "train_000001.h5":
        _die()
    return _CHECK_CONTAINED(job, kwargs)


def _index_dies_on_scene_1(path):
    if path.name == "train_000001.h5":
        _die()
    return _READ_ENTRY(path)


def _square(x: int) -> int:
    return x * x


def _one_error_line(capsys, item: str) -> str:
    """The command's whole output: one line naming ``item``, the signal and a rerun hint."""
    captured = capsys.readouterr()
    lines = (captured.out + captured.err).strip().splitlines()
    assert len(lines) == 1, lines
    assert "error: a worker process died (killed by SIGKILL) on " in lines[0]
    assert item in lines[0] and "out of memory? rerun" in lines[0] and "--workers" in lines[0]
    return lines[0]


@pytest.fixture()
def synth_root(tmp_path):
    write_synth_dataset(tmp_path, train_scenes=3, val_scenes=0, views=2, height=16, width=16, progress=False)
    return tmp_path / "synth"


@pytest.mark.timeout(60)
def test_unordered_callback_sees_every_result_once():
    seen = []
    out = parallel_map(_square, range(30), ordered=False, on_result=seen.append, workers=2, chunk=2)
    assert sorted(seen) == [x * x for x in range(30)] and out == seen
    in_order = []
    assert parallel_map(_square, range(30), on_result=in_order.append, workers=2) == in_order == sorted(seen)


@pytest.mark.timeout(60)
def test_a_killed_worker_names_its_item():
    with pytest.raises(WorkerDied, match=r"died \(killed by SIGKILL\) on item 3; out of memory\?") as err:
        parallel_map(_kill_on_3, range(8), ordered=False, workers=2, chunk=1, describe=lambda x: f"item {x}")
    assert err.value.item == 3


def _kill_on_3(x: int) -> int:
    if x == 3:
        _die()
    return x


@pytest.mark.timeout(60)
def test_synth_with_a_killed_worker_is_one_line_and_resumes(tmp_path, monkeypatch, capsys):
    args = ["synth", "--out", str(tmp_path), "--train-scenes", "3", "--val-scenes", "0", "--views", "2",
            "--height", "16", "--width", "16", "--workers", "2", "--quiet"]
    monkeypatch.setattr(synth_writer, "_make_scene_file", _synth_dies_on_scene_1)
    assert main(args) == 2
    assert "rerun the same command to resume" in _one_error_line(capsys, "scene train_000001")
    monkeypatch.undo()
    assert main(args) == 0
    assert "train: 3 scenes" in capsys.readouterr().out


@pytest.mark.timeout(60)
def test_convert_with_a_killed_worker_is_one_line(tmp_path, monkeypatch, capsys):
    fake.write_fake_wildrgbd(tmp_path / "raw", fake.make_scenes(3, views=3, height=24, width=32, seed=3))
    monkeypatch.setattr(convert_runner, "_convert_job", _convert_dies_on_scene_001)
    code = main(["convert", "wildrgbd", "--src", str(tmp_path / "raw"), "--out", str(tmp_path / "out"),
                 "--workers", "2", "--quiet"])
    assert code == 2
    assert "rerun the same command to resume" in _one_error_line(capsys, "scene cup__scene_001")


@pytest.mark.timeout(60)
def test_check_with_a_killed_worker_is_one_line(synth_root, monkeypatch, capsys):
    monkeypatch.setattr(check, "_check_contained", _check_dies_on_scene_1)
    monkeypatch.setattr(check, "SCENES_PER_WORKER", 1)
    assert main(["check", str(synth_root.parent), "--quiet", "--workers", "2"]) == 2
    _one_error_line(capsys, "scene file " + str(synth_root / "train" / "train_000001.h5"))


@pytest.mark.timeout(60)
def test_index_with_a_killed_worker_is_one_line(synth_root, monkeypatch, capsys):
    monkeypatch.setattr(reindex, "_read_entry", _index_dies_on_scene_1)
    monkeypatch.setattr(reindex, "FILES_PER_WORKER", 1)
    assert main(["index", str(synth_root.parent), "--quiet", "--dry-run", "--workers", "2"]) == 2
    _one_error_line(capsys, "scene file " + str(synth_root / "train" / "train_000001.h5"))


def _raise_on_5(x: int) -> int:
    if x == 5:
        raise ValueError("five")
    return x


@pytest.mark.timeout(60)
def test_an_exception_in_a_worker_is_raised_here_and_ends_the_map():
    with pytest.raises(ValueError, match="five") as err:
        parallel_map(_raise_on_5, range(10), ordered=False, workers=2, chunk=1)
    assert "in a worker process" in str(err.value.__cause__)
