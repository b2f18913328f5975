"""DTU as RMVD reads it: the rectified images of the DTU MVS dataset and the full-resolution
ground-truth depth of MVSNet's preprocessing (``Depths_raw``, in PatchmatchNet's ``dtu.tar.xz``),
renumbered per scan.

Native root (``--data-root dtu=ROOT``)::

    ROOT/scan<N>/images/<i:08d>.png      = Rectified/scan<N>/rect_<i+1:03d>_3_r5000.png (1600 x 1200,
                                           lighting 3), i = 0..48
    ROOT/scan<N>/gt_depths/<i:08d>.pfm   = dtu/Depths_raw/scan<N>/depth_map_<i:04d>.pfm

(the reference's ``convert_dtu.py`` makes this layout: the i-th file in name order of each
folder; docs/rmvd.md gives the steps.) GT depth: a greyscale PFM (``Pf`` header), float32 rows
stored bottom to top, byte order from the sign of the scale line (negative: little-endian),
millimetres (value / 1000 = metres), 0 or non-finite = no ground truth.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...config import ConfigError
from .common import read_file_bytes, zero_invalid

__all__ = ["DEPTH_SCALE", "read_pfm", "read_depth"]

DEPTH_SCALE = 1000.0  # stored value per metre (millimetres)


def _pfm_header(data: bytes, path: Path) -> tuple[int, int, str, int]:
    """(height, width, numpy byte order '<' or '>', offset of the pixel data) of a greyscale PFM."""
    lines, offset = [], 0
    for _ in range(3):
        end = data.find(b"\n", offset)
        if end < 0:
            raise ConfigError(f"PFM file {path} has no complete header (3 lines: Pf, width height, scale)")
        lines.append(data[offset:end].decode("ascii", "replace").strip())
        offset = end + 1
    if lines[0] != "Pf":
        raise ConfigError(f"PFM file {path} must be greyscale ('Pf' header), got {lines[0][:10]!r}")
    try:
        width, height = map(int, lines[1].split())
        scale = float(lines[2])
    except ValueError:
        raise ConfigError(f"PFM file {path} has a malformed header: {lines[1][:30]!r} / {lines[2][:30]!r}") from None
    if width <= 0 or height <= 0 or scale == 0:
        raise ConfigError(f"PFM file {path} claims {height}x{width} pixels with scale {scale}")
    return height, width, "<" if scale < 0 else ">", offset


def read_pfm(path: Path, what: str = "PFM file") -> np.ndarray:
    """A greyscale PFM -> (H, W) float32, top row first (PFM stores the bottom row first)."""
    data = read_file_bytes(path, what)
    height, width, order, offset = _pfm_header(data, path)
    if len(data) - offset < 4 * height * width:
        raise ConfigError(f"{what} {path} is truncated: {height}x{width} floats need {4 * height * width} bytes "
                          f"after the header, it has {len(data) - offset}")
    values = np.frombuffer(data, dtype=f"{order}f4", count=height * width, offset=offset)
    return values.reshape(height, width)[::-1]


def read_depth(path: Path, key_image: Path | None = None) -> np.ndarray:
    """DTU (MVSNet) depth PFM ``path`` in millimetres -> (H, W) float64 metres, 0 = no GT;
    ``key_image`` is not needed."""
    return zero_invalid(read_pfm(path, "DTU ground-truth depth") / DEPTH_SCALE)
