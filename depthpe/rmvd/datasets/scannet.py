"""ScanNet as RMVD reads it: each scan's ``.sens`` file exported with ScanNet's SensReader.

Native root (``--data-root scannet=ROOT``)::

    ROOT/<scene>/color/<frame>.jpg     colour, 1296 x 968 as exported; used at 640 x 480 (the
                                       list's ``image_size``; RMVD resizes with Lanczos)
    ROOT/<scene>/depth/<frame>.png     GT depth, 640 x 480

(``<frame>`` without zero padding: ``color/7.jpg``, ``depth/346.png``.) The sample list's K is in
pixels of the 640 x 480 image. GT depth: a single-channel 16-bit PNG, millimetres (value / 1000 =
metres), 0 = no ground truth.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .common import read_png16, zero_invalid

__all__ = ["DEPTH_SCALE", "read_depth"]

DEPTH_SCALE = 1000.0  # stored value per metre (millimetres)


def read_depth(path: Path, key_image: Path | None = None) -> np.ndarray:
    """ScanNet depth PNG ``path`` (mm) -> (H, W) float64 metres, 0 = no GT; ``key_image`` is not needed."""
    return zero_invalid(read_png16(path, "ScanNet ground-truth depth") / DEPTH_SCALE)
