"""The per-process LRU of open scene files (depthpe.loader.scenes.ReaderCache), with a stand-in reader
that records when it is closed."""

import pickle

import pytest

import depthpe.loader.scenes as scenes_mod
from depthpe.loader.scenes import ReaderCache


class _Reader:
    def __init__(self, path, strict):
        self.path, self.strict, self.closed = path, strict, False

    def close(self):
        self.closed = True


@pytest.fixture(autouse=True)
def _stand_in_reader(monkeypatch):
    monkeypatch.setattr(scenes_mod, "SceneReader", _Reader)


def test_the_least_recently_used_reader_is_closed_first():
    cache = ReaderCache(size=2)
    a, b = cache.get("a.h5"), cache.get("b.h5")
    assert a.strict and cache.get("a.h5") is a  # a used again: b is now the oldest
    c = cache.get("c.h5")
    assert b.closed and not a.closed and not c.closed and len(cache) == 2
    assert cache.get("b.h5") is not b  # reopened
    assert a.closed and not c.closed


def test_drop_closes_and_forgets_a_reader():
    cache = ReaderCache(size=4)
    a = cache.get("a.h5")
    cache.drop("a.h5")
    assert a.closed and len(cache) == 0 and cache.get("a.h5") is not a
    cache.drop("never-opened.h5")  # nothing to close


def _in_process(monkeypatch, pid):
    monkeypatch.setattr(scenes_mod.os, "getpid", lambda: pid)  # os.getpid, restored after the test


def test_another_process_opens_its_own_readers(monkeypatch):
    cache = ReaderCache(size=4)
    _in_process(monkeypatch, 1)
    parent = cache.get("a.h5")
    _in_process(monkeypatch, 2)  # as in a forked DataLoader worker
    assert len(cache) == 0
    child = cache.get("a.h5")
    assert child is not parent and not parent.closed and len(cache) == 1
    copied = pickle.loads(pickle.dumps(cache))  # spawned workers get a pickled dataset
    assert len(copied) == 0 and copied.size == 4


def test_another_process_never_closes_the_parents_readers(monkeypatch):
    cache = ReaderCache(size=4)
    _in_process(monkeypatch, 1)
    parent = cache.get("a.h5")
    _in_process(monkeypatch, 2)
    cache.drop("a.h5")  # a read failure in the worker before it opened anything
    assert not parent.closed
