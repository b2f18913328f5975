"""What a converter module gives ``convert_dataset``: ``SceneRef`` (one scene of a download),
``SceneSource`` (a parsed scene), ``RawFrame`` (one frame in native resolution), and the errors
``ConvertError`` (the download as a whole), ``SceneSkipped`` (one scene) and ``FrameDropped`` (one frame).
See ``common`` for the whole contract."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = ["ConvertError", "SceneSkipped", "FrameDropped", "SceneRef", "RawFrame", "SceneSource"]


class ConvertError(Exception):
    """The raw dataset cannot be converted as a whole (wrong --src layout, unreadable split file)."""


class SceneSkipped(Exception):
    """A whole scene is unusable (e.g. a known-bad scene); ``reason`` is reported in the summary."""


class FrameDropped(Exception):
    """A frame is unusable; ``reason`` is a short stable text used to count drops in the summary."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class SceneRef:
    """One scene of a raw dataset: output ``scene_id`` (a file-name-safe string), its source folder
    ``path``, the ``split`` fixed by the dataset (official folds) or None, and converter ``meta``."""

    scene_id: str
    path: str
    split: str | None = None
    meta: dict = field(default_factory=dict)


@dataclass
class RawFrame:
    """One frame as read from the raw dataset, before resizing.

    image: (H, W, 3) uint8 RGB; depth: (H, W) float32 z-depth in the dataset's units, 0 = invalid
    (finite, >= 0); K: (3, 3) OpenCV pixel intrinsics of this image (pixel centres at integers);
    w2c: (3, 4) OpenCV world-to-camera; name: source frame name; exif_orientation: the EXIF
    orientation tag of the image file that was not applied (1 = none; ``read_rgb_image``), counted
    in the summary.
    """

    image: np.ndarray
    depth: np.ndarray
    K: np.ndarray
    w2c: np.ndarray
    name: str
    exif_orientation: int = 1


@dataclass
class SceneSource:
    """A parsed scene: ``frames`` (frame keys, temporal order), ``load(key) -> RawFrame`` (raises
    ``FrameDropped``), ``dropped`` (frames already dropped while parsing, by reason), ``units``
    (``(metric, depth_units)`` when the scene states its own, e.g. WAI's ``scale_type``; None = the
    converter's)."""

    frames: list
    load: Callable[[Any], RawFrame]
    dropped: Counter = field(default_factory=Counter)
    units: tuple | None = None
