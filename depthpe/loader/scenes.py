"""The scenes an ``index.json`` lists and the per-process cache of their open readers.

A dataset is built from ``index.json`` files only (``load_entries``: no HDF5 file is opened);
scene files are opened lazily where a sample is read (in DataLoader workers), through a
``ReaderCache``: a small per-process LRU of ``SceneReader(strict=True)`` that is dropped when the
process id changes (after a fork) and not pickled (spawn). ``require_camera_motion`` is the
training check that a scene's frames are large enough (``limits.frame_size_problem``, the rule of
``depthpe check``) and that its cameras move at all; ``too_few_frames_problem`` the one-line verdict
on a training source whose scenes are all too short.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

import torch

from depthpe.loader.config import SourceConfig
from depthpe.scenes.api import SceneFileError, SceneReader, frame_size_problem, read_index
from depthpe.geometry import DegenerateSceneError, normalize_scene

__all__ = ["MIN_TRAIN_FRAMES", "SceneEntry", "load_entries", "too_few_frames_problem", "require_frame_size",
           "require_camera_motion",
           "ReaderCache"]

MIN_TRAIN_FRAMES = 2  # views of one scene a training sample needs at the least


@dataclass(frozen=True)
class SceneEntry:
    """One scene of the index: absolute file path, id, frame count and stored size."""

    path: str
    scene_id: str
    num_frames: int
    height: int
    width: int


def load_entries(src: SourceConfig, index: Sequence[dict] | None = None) -> list[SceneEntry]:
    """Every scene listed in the index.json of ``src`` (no HDF5 file is opened). index: its entries
    as already read (``read_index``; None = read them now)."""
    split_dir = src.split_dir
    return [
        SceneEntry(str(split_dir / e["path"]), str(e["scene_id"]), int(e["num_frames"]),
                   int(e["height"]), int(e["width"]))
        for e in (read_index(split_dir) if index is None else index)
    ]


def too_few_frames_problem(index: int, src: SourceConfig, entries: Sequence[SceneEntry]) -> str | None:
    """One line when training source ``index`` (``src``, with positive weight) lists scenes but none
    with ``MIN_TRAIN_FRAMES`` or more frames (a training sample needs two views of one scene); else None."""
    if src.weight <= 0 or not entries or any(e.num_frames >= MIN_TRAIN_FRAMES for e in entries):
        return None
    frames = sorted({e.num_frames for e in entries})
    return (f"source {index} ({src.name}) has {len(entries)} scene(s) in {src.split_dir} but none with "
            f">= {MIN_TRAIN_FRAMES} frames (frame counts {frames}): a training sample needs {MIN_TRAIN_FRAMES} or "
            f"more views of one scene; convert the scenes with more frames, or set data.sources.{index}.weight=0")


def require_frame_size(reader: SceneReader) -> None:
    """Raise ``SceneFileError`` when the scene's frames are too small to train on
    (``limits.frame_size_problem``: a side below ``MIN_FRAME_SIDE``, the rule that fails ``depthpe
    check`` too); training then skips the file like any unusable one and counts it."""
    too_small = frame_size_problem(reader.height, reader.width)
    if too_small:
        raise SceneFileError(f"{reader.path}: {too_small}")


def require_camera_motion(reader: SceneReader) -> None:
    """Raise ``SceneFileError`` when all camera centres of the scene coincide (a pure rotation, a
    tripod capture): no pair of its views has a baseline, so depth has no scale and every draw
    would be rejected; training then skips the file like any unusable one. Uses the test of
    ``normalize_scene`` over all frames (view 0 as the reference)."""
    _, w2c = reader.read_cameras()
    try:
        normalize_scene(torch.from_numpy(w2c))
    except DegenerateSceneError as err:
        raise SceneFileError(f"{reader.path}: all {len(w2c)} camera centres coincide (pure rotation), so no pair "
                             "of its views has a baseline to scale depth by; use a capture with camera motion") from err


class ReaderCache:
    """Per-process LRU of ``SceneReader(strict=True)`` keyed by path (at most ``size`` open files).

    The cache is emptied when used from a new process (pid check) and is never pickled, so readers
    are only ever opened in the process that uses them.
    """

    def __init__(self, size: int = 16) -> None:
        self.size = max(1, int(size))
        self._pid: int | None = None
        self._readers: OrderedDict[str, SceneReader] = OrderedDict()

    def __len__(self) -> int:
        return len(self._readers) if self._pid == os.getpid() else 0

    def get(self, path: str) -> SceneReader:
        """The reader of ``path`` (created and opened lazily by the reader itself)."""
        if self._pid != os.getpid():
            self._readers = OrderedDict()  # inherited readers belong to the parent: drop, never close
            self._pid = os.getpid()
        reader = self._readers.pop(path, None)
        if reader is None:
            reader = SceneReader(path, strict=True)
        self._readers[path] = reader
        while len(self._readers) > self.size:
            _, old = self._readers.popitem(last=False)
            old.close()
        return reader

    def close(self) -> None:
        """Close and forget every reader this process opened (the cache stays usable)."""
        for path in list(self._readers):
            self.drop(path)

    def drop(self, path: str) -> None:
        """Close and forget the reader of ``path`` (after a read failure)."""
        reader = self._readers.pop(path, None)
        if reader is not None and self._pid == os.getpid():
            reader.close()

    def __getstate__(self) -> dict:
        return {"size": self.size, "_pid": None, "_readers": OrderedDict()}
