"""Typed settings of ``depthpe rmvd`` (``RmvdConfig``). Light module: no torch, no numpy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..config.camera_noise import CameraNoiseOptions
from ..config.choices import DTYPES
from ..config.options import REQUIRED, check_required, option

__all__ = ["RmvdConfig", "SETTING_CHOICES", "ORDERING_CHOICES", "INPUT_SIZE_CHOICES", "BURN_IN"]

SETTING_CHOICES = ("known_poses", "intrinsics_only", "single_view")  # = metrics.SETTINGS
ORDERING_CHOICES = ("index_distance", "nearest", "quasi-optimal")  # = orderings.ORDERINGS
INPUT_SIZE_CHOICES = ("training", "rmvd")  # = views.INPUT_SIZES
BURN_IN = 3  # samples per setting and dataset predicted before runtime and memory are measured (RMVD's)


@dataclass
class RmvdConfig(CameraNoiseOptions):
    """``depthpe rmvd``: score the depth maps under ``predictions`` -- or those ``model`` predicts
    into ``out/predictions`` -- on the RMVD sample lists ``samples`` (files or folders of ``*.json``)
    in each of ``settings``, with the source views of ``ordering`` (up to ``max_source_views``), and
    write the tables to ``out`` (docs/rmvd.md). The model options: ``revision``, ``vggt_overrides``
    (a JSON file of ``DepthModelConfig`` fields for a reduced VGGT-format checkpoint),
    ``input_size`` (``training``: the model's width, each keyview's aspect; ``rmvd``: RMVD's size of
    each dataset, rounded to multiples of 14), ``image_width`` (overrides the training width),
    ``dtype``, ``device``, ``burn_in`` (samples per setting and dataset predicted before runtime and
    memory are measured), ``restart`` (discard an earlier run in ``out``), ``progress``. ``ause``
    adds RMVD's AUSE from the confidence maps next to the predictions. A list's paths are relative to
    ``data_roots`` (``DATASET=DIR``) where given. rotation_noise, translation_noise, focal_noise,
    noise_seed (``CameraNoiseOptions``): with ``--model``, perturb the cameras the model is given in
    ``known_poses`` (the ground truth and the other settings are untouched)."""

    samples: list[str] = option(default_factory=list, metavar="FILE_OR_DIR",
                                help="sample-list JSON files, or folders of them (one or more); official:all or "
                                     "official:NAME for the shipped official lists")
    predictions: Optional[str] = option(None, metavar="DIR",
                                        help="folder of predicted depth maps: DIR/<dataset>/<sample>.npy in metres "
                                             "(or --model)")
    model: Optional[str] = option(None, metavar="PATH_OR_REPO",
                                  help="run this model instead of reading --predictions: an exported depthpe model "
                                       "folder or Hub id, vggt-1b (facebook/VGGT-1B), or vggt:PATH_OR_REPO "
                                       "(a VGGT-format checkpoint); writes OUT/predictions/ and scores it")
    settings: list[str] = option(default_factory=lambda: ["known_poses"], flag="--setting", choices=SETTING_CHOICES,
                                 help="one or more of known_poses (no alignment), intrinsics_only, single_view "
                                      "(median-aligned); with several, each reads DIR/<setting>/")
    ordering: str = option("index_distance", choices=ORDERING_CHOICES,
                           help="source views: index_distance (headline) or the oracle orderings nearest, "
                                "quasi-optimal (best of 1..N source views per sample, uses the GT)")
    max_source_views: int = option(7, metavar="N", help="at most N source views per keyview")
    out: str = option(REQUIRED, metavar="DIR", help="output folder (summary.md, summary.json, per_sample.csv, "
                                                     "report.html)")
    data_roots: list[str] = option(default_factory=list, flag="--data-root", append=True, metavar="DATASET=DIR",
                                   help="the folder a dataset's sample-list paths are relative to (its native root "
                                        "for the official lists); repeat per dataset")
    ause: bool = option(False, help="also score the confidence: AUSE of AbsRel (reads <sample>~conf.npy next "
                                    "to each depth map; --model writes them)")
    revision: Optional[str] = option(None, help="Hub revision (branch, tag or commit) of --model")
    vggt_overrides: Optional[str] = option(None, metavar="FILE", help="JSON object of DepthModelConfig fields "
                                           "of a reduced VGGT-format --model (VGGT-1B needs none)")
    input_size: str = option("training", choices=INPUT_SIZE_CHOICES,
                             help="model input: training (the model's training width, the keyview's aspect) or "
                                  "rmvd (RMVD's per-dataset size, e.g. ETH3D 768x1152, rounded to multiples of 14)")
    image_width: Optional[int] = option(None, metavar="PX", help="with --input-size training: this width, a "
                                        "multiple of 14 (none: training_inputs.json's, else 518)")
    dtype: str = option("fp32", choices=DTYPES, help="fp32 or bf16: run the model under bfloat16 autocast")
    device: Optional[str] = option(None, help="torch device (none: cuda if available, else cpu)")
    burn_in: int = option(BURN_IN, metavar="N", help="samples per setting and dataset predicted before runtime "
                                                     "and peak memory are measured")
    restart: bool = option(False, help="replace what --out holds: the predictions of an earlier --model run "
                                       "(kept there to resume it), or outputs of other settings or another command "
                                       "(only files this command wrote are deleted)")
    progress: bool = option(True, flag="--quiet", store_false=True, help="no progress bar")

    def __post_init__(self) -> None:
        check_required(self)
        if (self.predictions is None) == (self.model is None):
            raise ValueError("give either --predictions DIR (depth maps written by another program) or --model "
                             "PATH_OR_REPO (a model to run), not both or neither")
        if not self.samples:
            raise ValueError("--samples is required: one or more sample-list JSON files or folders")
        bad = [s for s in self.settings if s not in SETTING_CHOICES]
        if bad or not self.settings or len(set(self.settings)) != len(self.settings):
            raise ValueError(f"--setting must be one or more different values of {', '.join(SETTING_CHOICES)}, "
                             f"got {self.settings}")
        if self.ordering not in ORDERING_CHOICES:
            raise ValueError(f"--ordering must be one of {', '.join(ORDERING_CHOICES)}, got {self.ordering!r}")
        if self.max_source_views < 0:
            raise ValueError(f"--max-source-views must be >= 0, got {self.max_source_views}")
        if self.input_size not in INPUT_SIZE_CHOICES:
            raise ValueError(f"--input-size must be one of {', '.join(INPUT_SIZE_CHOICES)}, got {self.input_size!r}")
        if self.image_width is not None and (self.image_width <= 0 or self.image_width % 14):
            raise ValueError(f"--image-width must be a positive multiple of 14, got {self.image_width}")
        if self.dtype not in DTYPES:
            raise ValueError(f"--dtype must be one of {list(DTYPES)}, got {self.dtype!r}")
        if self.burn_in < 0:
            raise ValueError(f"--burn-in must be >= 0, got {self.burn_in}")
        self._check_camera_noise()
        if not self.camera_noise().is_zero and (self.model is None or "known_poses" not in self.settings):
            raise ValueError("--rotation-noise, --translation-noise and --focal-noise perturb the cameras a --model "
                             "is given in the known_poses setting: pass --model and --setting known_poses")
