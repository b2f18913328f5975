"""``depthpe predict --export nerfstudio``: the prediction as a nerfstudio dataset
(docs/predict.md#nerfstudio-export), read by nerfstudio's ``nerfstudio-data`` parser.

Layout of ``OUT/export/nerfstudio/``::

    transforms.json        per-frame intrinsics (fl_x, fl_y, cx, cy, w, h; no distortion) and
                           transform_matrix (OpenGL camera-to-world); file_path, depth_file_path;
                           ply_file_path (the fused points: splatfacto's initial Gaussians)
    images/<stem>.png      each image as the model saw it (the cameras' size)
    depth/<stem>.png       16-bit depth: depth = png_value * depth_unit_scale_factor, 0 = no depth
    points.ply             the fused point cloud (as OUT/points.ply)

Depth is written where a pixel is in points.ply (its confidence and multi-view checks; 0 elsewhere),
in steps of ``depth_unit_scale_factor`` cameras' units: 0.001 (millimetres for metric cameras,
nerfstudio's default) when the largest depth fits in 65535 steps, else the smallest step that fits,
or the one asked for. The step is written as ``depth_unit_scale_factor`` (nerfstudio reads it from
its ``--depth-unit-scale-factor`` option, which must be given when it is not 0.001) and as
``integer_depth_scale`` (instant-ngp's key, which depthpe's transforms.json reader uses).
Principal points get nerfstudio's half-pixel shift (``transforms_json.PIXEL_SHIFT``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..config import ConfigError
from ..scenes.cameras import FrameCamera
from ..scenes.transforms_json import write_transforms_json
from .files import PNG_MAX, depth_png16, write_images, write_ply
from .result import FusedPoints

__all__ = ["NERFSTUDIO_DEPTH_UNIT", "depth_unit", "kept_depth", "export_nerfstudio"]

#: nerfstudio's default ``depth_unit_scale_factor`` (depth PNGs in millimetres).
NERFSTUDIO_DEPTH_UNIT = 1e-3


def depth_unit(max_depth: float, asked: float | None = None) -> float:
    """The depth PNG step in cameras' units: ``asked``, else 0.001 when ``max_depth`` fits in 65535
    steps, else ``max_depth / 65535``. ConfigError when ``asked`` is too small for ``max_depth``."""
    if asked is not None:
        if max_depth / asked > PNG_MAX + 0.5:
            raise ConfigError(f"--nerfstudio-depth-unit {asked:g}: the largest depth {max_depth:g} needs more than "
                              f"{PNG_MAX} steps of the 16-bit PNG; pass at least {max_depth / PNG_MAX:.6g}")
        return float(asked)
    return NERFSTUDIO_DEPTH_UNIT if max_depth <= PNG_MAX * NERFSTUDIO_DEPTH_UNIT else max_depth / PNG_MAX


def kept_depth(result, masks: list[np.ndarray]) -> list[np.ndarray]:
    """Each frame's (H, W) depth where its keep-mask is set, 0 elsewhere."""
    return [np.where(keep, fr.depth, 0.0) for fr, keep in zip(result.frames, masks)]


def export_nerfstudio(result, cloud: FusedPoints, masks: list[np.ndarray], stems: list[str], out: str | Path,
                      step: float) -> Path:
    """Write ``OUT/export/nerfstudio/`` (module docstring) for a ``PredictionResult``, its fused cloud
    and keep-masks (``fuse_result``) with depth PNG steps of ``step`` (``depth_unit``); ``stems``: the
    frames' output stems. Returns the folder."""
    from ..report.viz import save_png

    root = Path(out) / "export" / "nerfstudio"
    depth = kept_depth(result, masks)
    names = write_images(result.frames, stems, root / "images")
    for d, stem in zip(depth, stems):
        save_png(root / "depth" / f"{stem}.png", depth_png16(d, step))
    write_ply(root / "points.ply", cloud.points, cloud.colors)
    cams = [FrameCamera(f"images/{n}", fr.K, fr.w2c, fr.depth.shape[1], fr.depth.shape[0])
            for fr, n in zip(result.frames, names)]
    write_transforms_json(root / "transforms.json", cams, fields={
        "camera_model": "OPENCV", "depth_unit_scale_factor": step, "integer_depth_scale": step,
        "ply_file_path": "points.ply"}, frame_fields=[{"depth_file_path": f"depth/{s}.png"} for s in stems])
    return root
