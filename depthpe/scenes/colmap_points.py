"""The 3D points of a COLMAP model (``points3D.bin`` / ``.txt``): positions and colours, read with
pycolmap when installed, else (text models only) by a small parser, as ``cameras.read_colmap`` reads
the cameras. Used to read back what ``depthpe predict --export colmap`` writes."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..config import ConfigError
from .cameras import _colmap_model_folder, _data_lines, _have_pycolmap

__all__ = ["read_colmap_points"]


def read_colmap_points(folder: str | os.PathLike, *, use_pycolmap: bool | None = None):
    """(ids (N,) int64, xyz (N, 3) float64 world points, rgb (N, 3) uint8) of a COLMAP model's
    points3D, sorted by point id. ``folder``: as for ``read_colmap`` (the model folder, ``sparse/0``
    or ``sparse`` inside it); ``use_pycolmap``: None = when installed, False = the text parser."""
    model, ext = _colmap_model_folder(Path(folder))
    if use_pycolmap is None:
        use_pycolmap = _have_pycolmap()
    if use_pycolmap:
        import pycolmap

        try:
            points = pycolmap.Reconstruction(str(model)).points3D
        except Exception as err:  # noqa: BLE001 - pycolmap raises RuntimeError/ValueError on bad files
            raise ConfigError(f"{model}: pycolmap cannot read the COLMAP model ({str(err).splitlines()[0]})") from err
        ids = np.array(sorted(points), np.int64)
        xyz = np.array([points[i].xyz for i in ids], np.float64).reshape(-1, 3)
        rgb = np.array([points[i].color for i in ids], np.uint8).reshape(-1, 3)
        return ids, xyz, rgb
    if ext != "txt":
        raise ConfigError(f"{model}: reading a binary COLMAP model needs pycolmap (pip install 'depthpe[colmap]')")
    rows = [line.split() for line in _data_lines(model / "points3D.txt") if line.strip()]
    try:
        ids = np.array([int(r[0]) for r in rows], np.int64)
        xyz = np.array([[float(v) for v in r[1:4]] for r in rows], np.float64).reshape(-1, 3)
        rgb = np.array([[int(v) for v in r[4:7]] for r in rows], np.uint8).reshape(-1, 3)
    except (ValueError, IndexError) as err:
        raise ConfigError(f"{model / 'points3D.txt'}: malformed point line ({err})") from err
    order = np.argsort(ids)
    return ids[order], xyz[order], rgb[order]
