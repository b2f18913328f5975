"""Typed settings of ``depthpe eval`` and ``depthpe predict``, and the groups they share.

* ``ModelInput``: which model and how its input is made (model, revision, dtype, image_width);
  shared by ``EvalConfig`` and ``PredictConfig``.
* ``ViewProtocol``: how the views of a held-out scene are chosen (views, seed, manifest); shared by
  ``EvalConfig`` and the run config's ``val`` section (``depthpe.run.schema.ValConfig``).

Each field's default and help text are written here once; the commands' options are generated from
them (``depthpe.config.options``), so ``depthpe eval --config FILE`` and ``key=value`` work as for ``train``.
Light module: no torch import (numpy through ``metrics``' constants).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..metrics import MIN_VALID_FRACTION, MIN_VALID_PIXELS
from . import require
from .camera_noise import CameraNoiseOptions
from .choices import DTYPES
from .options import REQUIRED, check_required, flag_of, option, overwrite_option

__all__ = ["ModelInput", "ViewProtocol", "HeldOutScenes", "EvalConfig", "PredictConfig", "EXPORTS"]

#: What `depthpe predict --export` writes besides its own files (docs/predict.md).
EXPORTS = ("colmap", "nerfstudio")



@dataclass
class ModelInput:
    """The model and its input. model: an exported model folder (``runs/NAME/final``) or a Hub repo id;
    revision: Hub branch, tag or commit; dtype: ``fp32`` or ``bf16`` (autocast); image_width: input
    width in pixels, a multiple of 14 (None = the width the model was trained at, else 518)."""

    model: str = option(REQUIRED, help="exported model folder (e.g. runs/NAME/final) or Hub repo id")
    revision: Optional[str] = option(None, help="Hub revision (branch, tag or commit) of --model")
    dtype: str = option("fp32", choices=DTYPES, help="fp32 or bf16: run the model under bfloat16 autocast")
    image_width: Optional[int] = option(None, metavar="PX", help="input width in pixels, a multiple of 14 "
                                        "(none: the model's training width, else 518)")

    def _label(self, name: str) -> str:
        """How a field is named in error messages (the command-line flag)."""
        return flag_of(type(self), name)

    def _check_model_input(self) -> None:
        require(self.dtype in DTYPES, f"{self._label('dtype')} must be one of {list(DTYPES)}, got {self.dtype!r}")
        require(self.image_width is None or (self.image_width > 0 and self.image_width % 14 == 0),
                 f"{self._label('image_width')} must be a positive multiple of 14, got {self.image_width}")


@dataclass
class ViewProtocol:
    """Which views of a held-out scene are evaluated. views: frames per scene (a scene with fewer is
    evaluated with all of them); seed: the draw of scenes and views; manifest: a manifest.json of an
    earlier run (val_manifest.json for validation) whose views are evaluated instead."""

    views: int = option(8, help="views per scene")
    seed: int = option(0, help="seed of the view subsets")
    manifest: Optional[str] = option(None, metavar="FILE", help="manifest.json of an earlier run: the same views")

    def _label(self, name: str) -> str:
        return name

    def _check_view_protocol(self) -> None:
        require(self.views >= 2, f"{self._label('views')} must be at least 2 (a multi-view model needs two views), "
                                  f"got {self.views}")


@dataclass
class HeldOutScenes(ViewProtocol, ModelInput):
    """A model run on held-out scenes: ``ModelInput`` and ``ViewProtocol`` plus where the scenes are
    (data: root of ``<dataset>/<split>/index.json``; split; datasets: None = every dataset with that
    split; max_scenes: the first K of each, None = all), where the results go (out) and the device (cpu: the CPU even with a GPU). Shared by
    ``EvalConfig`` and the probe's ``ProbeConfig``; errors name the command-line flags."""

    data: str = option(REQUIRED, help="data root holding <dataset>/<split>/index.json")
    split: str = option("val", help="split of the held-out scenes")
    datasets: Optional[list[str]] = option(None, help="dataset names (none: all with that split)")
    max_scenes: Optional[int] = option(None, flag="--scenes", metavar="K",
                                       help="the first K scenes of each dataset (none: all)")
    out: str = option(REQUIRED, help="output folder")
    cpu: bool = option(False, help="run on CPU even if a GPU is available")

    def _label(self, name: str) -> str:
        return flag_of(type(self), name)

    def _check_held_out(self) -> None:
        check_required(self)
        self._check_model_input()
        self._check_view_protocol()
        require(self.max_scenes is None or self.max_scenes >= 1,
                 f"--scenes must be at least 1, got {self.max_scenes}")


@dataclass
class EvalConfig(CameraNoiseOptions, HeldOutScenes):
    """``depthpe eval``: metrics of ``model`` on the held-out scenes of every dataset under ``data``
    (``data/<dataset>/<split>/index.json``), written to ``out`` (docs/evaluation.md).

    panels: scenes rendered as PNG panels; worst: images with the largest native AbsRel shown in report.html;
    min_valid_fraction: valid depth an image needs to be scored (``metrics.MIN_VALID_FRACTION``,
    with at least ``metrics.MIN_VALID_PIXELS`` pixels; sparser scenes are skipped); num_workers: data
    loader workers; cpu: run on the CPU even with a GPU; restart: discard the partial results of an
    interrupted evaluation in ``out`` instead of resuming it; rotation_noise, translation_noise,
    focal_noise, noise_seed: perturb the input cameras (``CameraNoiseOptions``; GT untouched)."""

    panels: int = option(4, help="scenes rendered as PNG panels")
    worst: int = option(8, help="images with the largest native AbsRel shown with their panels in report.html")
    min_valid_fraction: float = option(MIN_VALID_FRACTION, metavar="X", help="fraction of valid depth pixels an "
                                       f"image needs to be scored, at least {MIN_VALID_PIXELS} pixels (and a scene's "
                                       "views together; sparser scenes are skipped)")
    num_workers: int = option(2, help="data loader workers")
    restart: bool = option(False, help="discard the partial results of an interrupted evaluation in --out "
                           "(kept there to resume it) and start over")

    def __post_init__(self) -> None:
        self._check_held_out()
        require(self.panels >= 0 and self.num_workers >= 0 and self.worst >= 0,
                 "--panels, --worst and --num-workers must be >= 0")
        require(0 <= self.min_valid_fraction <= 1,
                 f"--min-valid-fraction must be in [0, 1], got {self.min_valid_fraction}")
        self._check_camera_noise()


@dataclass
class PredictConfig(ModelInput):
    """``depthpe predict``: depth for the ``images`` (a folder, a glob or one file) with optional
    ``cameras``, written to ``out`` (docs/predict.md). device: torch device (None = cuda if
    available, else cpu); max_views: views per prediction (None = the most the model was trained
    with, else 8); conf_threshold: pixels below this confidence are left out of points.ply;
    fusion_views, fusion_rel, fusion_pixels: the multi-view consistency filter of points.ply (0
    views: off); filtered_depth: also write the filtered depth maps; export: "colmap" and/or
    "nerfstudio"; colmap_format: "bin" or "txt"; nerfstudio_depth_unit: the depth PNG step of the
    nerfstudio export (None: 0.001 when it fits)."""

    images: str = option(REQUIRED, help="folder of images (searched recursively), a glob, or one file")
    cameras: Optional[str] = option(None, metavar="SOURCE", help="COLMAP folder (sparse/0, .bin or .txt), "
                                    "cameras .json or scene .h5")
    out: str = option(REQUIRED, help="output folder")
    overwrite: bool = overwrite_option()
    device: Optional[str] = option(None, help="torch device (none: cuda if available, else cpu)")
    max_views: Optional[int] = option(None, help="views per prediction (none: the most the model was "
                                      "trained with, else 8)")
    conf_threshold: Optional[float] = option(None, help="leave out of points.ply the pixels whose "
                                             "confidence is below this (none: keep all)")
    fusion_views: int = option(0, metavar="N", help="multi-view consistency: keep a pixel in points.ply only "
                               "when at least N of the views predicted with it agree with its depth (0: off)")
    fusion_rel: float = option(0.05, metavar="X", help="relative depth difference within which a view agrees "
                               "(with --fusion-views)")
    fusion_pixels: Optional[float] = option(None, metavar="PX", help="also require the reprojection round trip to "
                                            "return within PX pixels (with --fusion-views; none: not checked)")
    filtered_depth: bool = option(False, help="also write <stem>_depth_filtered.png/.json/.npy: the depth of the "
                                  "pixels kept in points.ply (confidence and fusion), 0 elsewhere")
    export: Optional[list[str]] = option(None, choices=EXPORTS, help="also write the prediction for another tool: "
                                         "colmap (export/colmap/) and/or nerfstudio (export/nerfstudio/)")
    colmap_format: str = option("bin", choices=("bin", "txt"), help="COLMAP model files of --export colmap: "
                                "binary or text")
    nerfstudio_depth_unit: Optional[float] = option(None, metavar="U", help="cameras' units per step of the 16-bit "
                                                    "depth PNGs of --export nerfstudio (nerfstudio's "
                                                    "depth_unit_scale_factor; none: 0.001 when the depth fits, "
                                                    "else the smallest unit that does)")

    def __post_init__(self) -> None:
        check_required(self)
        self._check_model_input()
        require(self.max_views is None or self.max_views >= 1, f"--max-views must be >= 1, got {self.max_views}")
        require(self.conf_threshold is None or self.conf_threshold >= 0,
                 f"--conf-threshold must be >= 0, got {self.conf_threshold} (confidence is > 1)")
        self._check_outputs()

    def _check_outputs(self) -> None:
        require(self.fusion_views >= 0, f"--fusion-views must be >= 0, got {self.fusion_views}")
        require(self.fusion_rel > 0, f"--fusion-rel must be > 0, got {self.fusion_rel}")
        require(self.fusion_pixels is None or self.fusion_pixels > 0,
                 f"--fusion-pixels must be > 0, got {self.fusion_pixels}")
        unknown = sorted(set(self.export or ()) - set(EXPORTS))
        require(not unknown, f"--export: unknown kind {unknown[0] if unknown else ''!r} (choose from "
                             f"{', '.join(EXPORTS)})")
        require(self.colmap_format in ("bin", "txt"), f"--colmap-format must be bin or txt, got {self.colmap_format!r}")
        require(self.nerfstudio_depth_unit is None or self.nerfstudio_depth_unit > 0,
                 f"--nerfstudio-depth-unit must be > 0, got {self.nerfstudio_depth_unit}")
