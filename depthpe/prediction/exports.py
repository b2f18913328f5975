"""Everything ``depthpe predict`` (and ``depthpe demo``) writes for a prediction: its own files
(``files.write_prediction``) and the exports for other tools (``--export colmap``: ``colmap_export``;
``--export nerfstudio``: ``nerfstudio_export``), from one fused point cloud (``result.fuse_result``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..config import ConfigError
from .files import fusable, write_prediction
from .result import FusionSettings, fuse_result

__all__ = ["OutputSettings", "write_outputs", "check_exports"]


@dataclass
class OutputSettings:
    """What to write. conf_threshold: pixels below it are left out of the points (None: none);
    fusion: the multi-view consistency filter (None: off); filtered_depth: also the filtered depth
    maps; exports: any of "colmap", "nerfstudio"; colmap_format: "bin" or "txt";
    nerfstudio_depth_unit: the depth PNG step of the nerfstudio export (None: automatic)."""

    conf_threshold: Optional[float] = None
    fusion: Optional[FusionSettings] = None
    filtered_depth: bool = False
    exports: tuple = ()
    colmap_format: str = "bin"
    nerfstudio_depth_unit: Optional[float] = None


def check_exports(exports, have_cameras: bool, images: int) -> None:
    """ConfigError when exports are asked for views that share no camera frame (no cameras, several
    images): checked before the model runs."""
    if exports and not have_cameras and images > 1:
        raise ConfigError(f"--export {' '.join(exports)} needs --cameras: without cameras the views share no frame "
                          "and unit, so there are no poses or points to export")


def write_outputs(result, out: str | Path, settings: OutputSettings) -> dict:
    """Write the prediction's files and exports into ``out``; returns prediction.json's summary with
    "exports": {kind: folder} and notes saying what each export needs."""
    check_exports(settings.exports, result.unit == "cameras", len(result.frames))
    cloud = fuse_result(result, settings.conf_threshold, settings.fusion) if fusable(result) else None
    if "nerfstudio" in settings.exports:  # a bad --nerfstudio-depth-unit stops before anything is written
        from .nerfstudio_export import NERFSTUDIO_DEPTH_UNIT, depth_unit, export_nerfstudio, kept_depth

        step = depth_unit(max(float(d.max()) for d in kept_depth(result, cloud[1])), settings.nerfstudio_depth_unit)
    summary = write_prediction(result, out, settings.conf_threshold, settings.fusion, settings.filtered_depth, cloud)
    stems = [f["stem"] for f in summary["frames"]]
    summary["exports"] = {}
    if "colmap" in settings.exports:
        from .colmap_export import export_colmap

        summary["exports"]["colmap"] = str(export_colmap(result, cloud[0], stems, out, settings.colmap_format))
    if "nerfstudio" in settings.exports:
        summary["exports"]["nerfstudio"] = str(export_nerfstudio(result, cloud[0], cloud[1], stems, out, step))
        if step != NERFSTUDIO_DEPTH_UNIT:
            summary["notes"].append(f"nerfstudio export: depth PNG step {step:.6g} (not nerfstudio's default 0.001); "
                                    f"train with `nerfstudio-data --depth-unit-scale-factor {step:.6g}`")
    return summary
