"""Configuration dataclasses of the multi-view training data pipeline.

The YAML training config maps onto ``DataConfig.from_dict``::

    data:
      sources:
        - {name: co3d, root: data, split: train, weight: 1.0}
        - {name: arkitscenes, root: data, weight: 0.5, view_selection: window, window: 30}
      views: [2, 24]              # S per batch, inclusive [min, max] range ([8, 8] = fixed S)
      aspect: [0.33, 1.0]         # height / width per batch
      image_width: 518
      max_images_per_batch: 48    # B = floor(48 / S) per process
      crop_scale: [0.8, 1.0]
      min_valid_fraction: 0.05
      color_jitter: {shared_prob: 0.7}

Scene files of a source live in ``ROOT/<dataset>/<split>/`` with an ``index.json`` (docs/scene-format.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import build, to_container
from ..config.camera_noise import CameraNoise
from ..scenes.api import MIN_SCALE_RATIO

__all__ = ["SourceConfig", "ColorJitterConfig", "DataConfig", "VIEW_SELECTIONS"]

VIEW_SELECTIONS = ("random", "window", "nearest")
MIN_CROP_SCALE = 0.1  # smallest crop, as a fraction of the largest crop's side (below it a view is a few pixels upsampled)


def _pair(value: Any, name: str, cast=float) -> tuple:
    """Accept a scalar (-> (v, v)) or a 2-sequence; return a (lo, hi) tuple with lo <= hi."""
    if isinstance(value, (int, float)):
        lo = hi = value
    else:
        try:
            lo, hi = value
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name} must be a number or a [min, max] pair, got {value!r}") from err
    lo, hi = cast(lo), cast(hi)
    if lo > hi:
        raise ValueError(f"{name} = [{lo}, {hi}] has min > max (write [min, max])")
    return lo, hi


@dataclass
class SourceConfig:
    """One training/validation data source: the scenes in ``root/<dataset or name>/<split>/``.

    weight: relative sampling weight of this source (weights are normalized over sources; 0 allowed).
    view_selection: "random" (S distinct frames uniformly from the whole scene, as VGGT on CO3D) or
        "window" (an anchor frame, the reference view, plus S-1 frames within +-``window`` frames of
        it; for video-like trajectories such as ARKitScenes), or "nearest" (an anchor frame plus S-1
        frames among the ``window`` cameras closest to it in position and viewing direction; for sparse
        view sets such as MegaSynth's 48 views, so that the views overlap).
    window: half-width of the window in frames (widened when the scene is shorter than S frames).
    min_valid_fraction: override of ``DataConfig.min_valid_fraction`` for this source (None = inherit).
    dataset: folder name under ``root`` if it differs from ``name`` (None = ``name``).
    max_scenes: validation/evaluation only: scenes of this source to evaluate (None = the
        ``val.max_scenes`` of the run); e.g. 2000 for CO3D next to ``val.max_scenes: null`` (all).
    """

    name: str
    root: str = "data"
    split: str = "train"
    weight: float = 1.0
    view_selection: str = "random"
    window: int = 30
    min_valid_fraction: float | None = None
    dataset: str | None = None
    max_scenes: int | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a data source needs a name")
        if self.max_scenes is not None and self.max_scenes < 1:
            raise ValueError(f"source {self.name!r}: max_scenes must be >= 1 or null, got {self.max_scenes}")
        self.weight = float(self.weight)
        if not self.weight >= 0:
            raise ValueError(f"source {self.name!r}: weight must be >= 0, got {self.weight}")
        if self.view_selection not in VIEW_SELECTIONS:
            raise ValueError(
                f"source {self.name!r}: view_selection must be one of {VIEW_SELECTIONS}, "
                f"got {self.view_selection!r}"
            )
        if int(self.window) < 1:
            raise ValueError(f"source {self.name!r}: window must be >= 1 frame, got {self.window}")
        self.window = int(self.window)

    @property
    def split_dir(self) -> Path:
        """``root/<dataset or name>/<split>``: the folder holding index.json and the scene files."""
        return Path(self.root) / (self.dataset or self.name) / self.split

    @classmethod
    def from_dict(cls, d: dict) -> "SourceConfig":
        return build(cls, d)


@dataclass
class ColorJitterConfig:
    """Colour augmentation (VGGT's recipe): jitter with probability ``apply_prob``, then grayscale with
    probability ``grayscale_prob``. With probability ``shared_prob`` one set of parameters is used for
    all views of a sample, otherwise each view draws its own. Factors: brightness/contrast/saturation
    in [1-x, 1+x], hue shift in [-hue, hue] (fraction of the colour circle)."""

    enabled: bool = True
    brightness: float = 0.5
    contrast: float = 0.5
    saturation: float = 0.5
    hue: float = 0.1
    apply_prob: float = 0.9
    grayscale_prob: float = 0.05
    shared_prob: float = 0.7

    def __post_init__(self) -> None:
        for key in ("apply_prob", "grayscale_prob", "shared_prob"):
            v = float(getattr(self, key))
            if not 0 <= v <= 1:
                raise ValueError(f"color_jitter.{key} must be in [0, 1], got {v}")
        if not 0 <= self.hue <= 0.5:
            raise ValueError(f"color_jitter.hue must be in [0, 0.5], got {self.hue}")
        for key in ("brightness", "contrast", "saturation"):
            if not 0 <= getattr(self, key) <= 1:
                raise ValueError(f"color_jitter.{key} must be in [0, 1], got {getattr(self, key)}")

    @classmethod
    def from_dict(cls, d: dict) -> "ColorJitterConfig":
        return build(cls, d)




@dataclass
class DataConfig:
    """The multi-view data pipeline: sources, per-batch shapes and augmentation.

    views: inclusive (min, max) number of views S drawn per batch.
    aspect: (min, max) of height/width drawn per batch; height = multiple of ``patch_size`` nearest
        to ``image_width * aspect`` (at least one patch).
    image_width: output width in pixels (multiple of ``patch_size``).
    max_images_per_batch: per-process image budget; B = max(1, floor(max_images_per_batch / S)).
    crop_scale: (min, max) of the random crop scale (1 = the largest crop of the batch aspect).
    min_valid_fraction: samples whose fraction of valid depth pixels (all views, after augmentation)
        is below this are redrawn.
    min_scale_ratio: samples whose normalization scale (mean camera distance to the reference) is below
        this fraction of the reference view's median depth are degenerate and redrawn.
    max_attempts: draws per sample before giving up with an error (the data is then broken).
    scale_reference: the scene unit: ``others`` = mean distance of the camera centres of views
        1..S-1 to the reference (default), ``all`` = the mean over all S views, the reference's zero
        included ((S-1)/S of the former). Recorded in training_inputs.json; evaluation and
        prediction use the model's own.
    camera_noise: perturb the cameras the model is given in training (``CameraNoise`` levels:
        rotation_deg, translation, focal; all 0 = off, the default), drawn per sample from its own
        seed; the depth, its validity and the scene's normalization stay those of the true cameras.
    """

    sources: list[SourceConfig] = field(default_factory=list)
    views: tuple[int, int] = (2, 24)
    aspect: tuple[float, float] = (0.33, 1.0)
    image_width: int = 518
    patch_size: int = 14
    max_images_per_batch: int = 48
    crop_scale: tuple[float, float] = (0.8, 1.0)
    min_valid_fraction: float = 0.05
    min_scale_ratio: float = MIN_SCALE_RATIO
    max_attempts: int = 32
    reader_cache_size: int = 16
    scale_reference: str = "others"
    color_jitter: ColorJitterConfig = field(default_factory=ColorJitterConfig)
    camera_noise: CameraNoise = field(default_factory=CameraNoise)

    def __post_init__(self) -> None:
        self.sources = [s if isinstance(s, SourceConfig) else SourceConfig.from_dict(s) for s in self.sources]
        names = [s.name for s in self.sources]
        if len(set(names)) != len(names):
            raise ValueError(f"data.sources: names must be unique, got {names} (rename one)")
        if isinstance(self.color_jitter, dict):
            self.color_jitter = ColorJitterConfig.from_dict(self.color_jitter)
        if isinstance(self.camera_noise, dict):
            self.camera_noise = build(CameraNoise, self.camera_noise)
        self.views = _pair(self.views, "data.views", int)
        if self.views[0] < 2:
            raise ValueError(f"data.views must be >= 2 (normalization needs a second view), got {self.views}")
        self.aspect = _pair(self.aspect, "data.aspect")
        if self.aspect[0] <= 0:
            raise ValueError(f"data.aspect (height/width) must be > 0, got {self.aspect}")
        self.crop_scale = _pair(self.crop_scale, "data.crop_scale")
        if not MIN_CROP_SCALE <= self.crop_scale[0] <= self.crop_scale[1] <= 1:
            raise ValueError(f"data.crop_scale must be (min, max) with {MIN_CROP_SCALE} <= min <= max <= 1 (a fraction "
                             f"of the largest crop's side), got {list(self.crop_scale)}")
        if self.image_width <= 0 or self.image_width % self.patch_size:
            raise ValueError(
                f"data.image_width must be a positive multiple of patch_size={self.patch_size}, "
                f"got {self.image_width} (e.g. 518 = 37 * 14)"
            )
        if self.max_images_per_batch < self.views[1]:
            raise ValueError(
                f"data.max_images_per_batch={self.max_images_per_batch} is smaller than the largest number "
                f"of views {self.views[1]}; raise it or lower views"
            )
        if not 0 <= self.min_valid_fraction <= 1:
            raise ValueError(f"data.min_valid_fraction must be in [0, 1], got {self.min_valid_fraction}")
        if self.max_attempts < 1:
            raise ValueError(f"data.max_attempts must be >= 1, got {self.max_attempts}")
        if self.scale_reference not in ("others", "all"):
            raise ValueError(f"data.scale_reference must be 'others' or 'all', got {self.scale_reference!r}")

    def min_valid_fraction_of(self, source: int) -> float:
        """The valid-depth threshold of source ``source`` (its override or the global value)."""
        v = self.sources[source].min_valid_fraction
        return self.min_valid_fraction if v is None else float(v)

    @classmethod
    def from_dict(cls, d: dict) -> "DataConfig":
        """Build from a plain mapping (the ``data:`` section of a YAML config); lists become tuples,
        ``sources`` entries and ``color_jitter`` may be mappings. Unknown keys raise ValueError."""
        return build(cls, d)

    def to_dict(self) -> dict:
        """Plain-Python form (for logging / saving with a run); tuples become lists."""
        return to_container(self)
