"""Tanks and Temples as RMVD reads it: the RMVD authors' own release for the benchmark
(``tanks_and_temples_images.zip`` and ``tanks_and_temples_depth.zip`` from
lmb.informatik.uni-freiburg.de), the training scenes Barn, Church, Courthouse and Ignatius with
COLMAP cameras aligned to the ground truth and depth rendered from the ground-truth point clouds.

Native root (``--data-root tanks_and_temples=ROOT``, both archives extracted into it)::

    ROOT/<Scene>/images/<i:08d>.jpg     images
    ROOT/<Scene>/depth/<i+1:06d>.npz    GT depth of image i (the depth files count from 1)

GT depth: a NumPy ``.npz`` whose array ``arr_0`` is (H, W) float depth in metres; 0, NaN or inf
= no ground truth. Loaded without pickles.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from ...config import ConfigError
from ...scenes.format.npy_header import npy_claim_problem
from .common import read_file_bytes, zero_invalid

__all__ = ["read_depth"]


def read_depth(path: Path, key_image: Path | None = None) -> np.ndarray:
    """Tanks and Temples depth ``.npz`` ``path`` (array ``arr_0``, metres) -> (H, W) float64
    metres, 0 = no GT; ``key_image`` is not needed."""
    what = "Tanks and Temples ground-truth depth"
    data = read_file_bytes(path, what)
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            if "arr_0" not in npz.files:
                raise ConfigError(f"{what} {path} has no array 'arr_0' (it has {', '.join(npz.files) or 'none'})")
            member = npz.zip.getinfo("arr_0.npy")
            with npz.zip.open(member) as f:  # the header alone: refuse a claim larger than the member
                problem = npy_claim_problem(f, member.file_size)
            if problem:
                raise ConfigError(f"{what} {path}: arr_0 {problem[1]}")
            depth = npz["arr_0"]
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as err:
        raise ConfigError(f"{what} {path} is not a readable .npz ({err})") from None
    if depth.ndim == 3 and depth.shape[0] == 1:
        depth = depth[0]
    if depth.ndim != 2 or depth.dtype.kind not in "fiu":
        raise ConfigError(f"{what} {path}: arr_0 must be a numeric (H, W) depth map, got {depth.dtype} {depth.shape}")
    return zero_invalid(depth)
