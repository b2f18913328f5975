"""KITTI as RMVD reads it: the raw recordings' left colour camera and the depth-completion
benchmark's annotated depth ("annotated depth maps data set", Uhrig et al. 2017).

Native root (``--data-root kitti=ROOT``)::

    ROOT/raw_data/<date>/<date>_drive_<nnnn>_sync/image_02/data/<frame:010d>.png          images
    ROOT/depth_completion_prediction/{train,val}/<date>_drive_<nnnn>_sync/
         proj_depth/groundtruth/image_02/<frame:010d>.png                                  GT depth

GT depth: a single-channel 16-bit PNG of the image's size, depth in metres = value / 256, 0 = no
ground truth (sparse: accumulated LiDAR).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .common import read_png16, zero_invalid

__all__ = ["DEPTH_SCALE", "read_depth"]

DEPTH_SCALE = 256.0  # stored value per metre


def read_depth(path: Path, key_image: Path | None = None) -> np.ndarray:
    """KITTI annotated depth PNG ``path`` -> (H, W) float64 metres (value / 256), 0 = no GT;
    ``key_image`` is not needed."""
    return zero_invalid(read_png16(path, "KITTI ground-truth depth") / DEPTH_SCALE)
