"""A sample list's ``"format"`` -> the reader of its GT depth files (``READERS``), and
``read_native_depth``, the one entry point the harness calls for native lists."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import dtu, eth3d, kitti, scannet, tanks_and_temples

__all__ = ["READERS", "read_native_depth"]

READERS = {"kitti": kitti.read_depth, "scannet": scannet.read_depth, "eth3d": eth3d.read_depth,
           "dtu": dtu.read_depth, "tanks_and_temples": tanks_and_temples.read_depth}  # = DEPTH_FORMATS but npy


def read_native_depth(fmt: str, path: Path, key_image: Path) -> np.ndarray:
    """The keyview GT depth ``path`` in the native encoding ``fmt`` (a key of ``READERS``) ->
    (H, W) float64 metres, 0 = no ground truth; ``key_image`` is the keyview's image (ETH3D's
    headerless depth takes its size from it). Bad files are one ConfigError line."""
    return READERS[fmt](Path(path), Path(key_image))
