"""Settings of ``depthpe synth``: ``SynthConfig``, the command line of ``write_synth_dataset``. Each
default and help text is written here once (the sizes are ``synth``'s ``DEFAULT_*``); the
command's options are generated from it (``depthpe.config.options``). No torch import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..config import require

from ..config.options import REQUIRED, check_required, option, overwrite_option
from .format.check_config import WORKER_LIMIT  # the cap of --workers 0, as for check and index
from .synth import DEFAULT_HEIGHT, DEFAULT_TRAIN_SCENES, DEFAULT_VAL_SCENES, DEFAULT_VIEWS, DEFAULT_WIDTH, SHIFTS, STYLES
from .synth.params import PATCH_PX, RIGS, TEXTURES, scene_params

__all__ = ["SynthConfig", "WORKER_LIMIT"]



@dataclass
class SynthConfig:
    """``depthpe synth``: ``train_scenes`` + ``val_scenes`` procedural scenes of ``views`` frames of
    ``height`` x ``width`` pixels written to ``out/synth/{train,val}/``, deterministic for ``seed``.
    workers: processes (0 = one per core, at most ``WORKER_LIMIT``; 1 = in this process); shift:
    names of ``SHIFTS`` (or ``all``) to draw from; style: a name of ``STYLES``; rig, depth_ratio,
    rotation_jitter, texture, texture_period: the scene knobs of ``synth.params.knob_params`` (None:
    the style's own); progress: a progress bar."""

    out: str = option(REQUIRED, metavar="DIR", help="data root; scenes go to DIR/synth/{train,val}/")
    overwrite: bool = overwrite_option()
    train_scenes: int = option(DEFAULT_TRAIN_SCENES, metavar="N", help="number of training scenes")
    val_scenes: int = option(DEFAULT_VAL_SCENES, metavar="M", help="number of validation scenes")
    views: int = option(DEFAULT_VIEWS, metavar="V", help="views (frames) per scene, at least 2")
    height: int = option(DEFAULT_HEIGHT, metavar="H", help="image height in pixels")
    width: int = option(DEFAULT_WIDTH, metavar="W", help="image width in pixels")
    seed: int = option(0, metavar="S", help="dataset seed; the same seed gives the same scenes")
    workers: int = option(0, metavar="K", help="processes rendering scenes in parallel; 0 = one per available CPU "
                          f"core, at most {WORKER_LIMIT}; 1 renders in this process")
    shift: list[str] = option(default_factory=list, append=True, metavar="NAME", choices=(*SHIFTS, "all"),
                              help="draw from a shifted distribution; repeat to combine: "
                                   f"{', '.join(SHIFTS)} or all (none: the training distribution)")
    style: str = option("default", choices=tuple(sorted(STYLES)), help="scene style: default (the training "
                        "distribution) or geometry (depth only from parallax; docs/data.md)")
    rig: Optional[str] = option(None, choices=tuple(RIGS), help="cameras of a rig instead of the style's paths: "
                                "stereo (evenly spaced along the image x axis, one rotation and K: rectified), "
                                "line (a straight line at a random angle in the image plane, one viewing "
                                "direction), curve (the geometry style's path) (none: the style's paths)")
    depth_ratio: Optional[list[float]] = option(None, nargs=2, metavar=("LO", "HI"),
                                                help="depth / baseline of a rig, log-uniform in [LO, HI]: for "
                                                     "stereo and line the median depth over the distance from the "
                                                     "first to the last camera, for curve the scene scale over the "
                                                     "path length (none: 2 12)")
    rotation_jitter: Optional[float] = option(None, metavar="DEG", help="each rig camera's yaw, pitch and roll "
                                              "off the shared direction, uniform within +-DEG degrees; not with "
                                              "stereo (none: 0 on line, the curve's smooth few degrees)")
    texture: str = option("mixed", choices=TEXTURES, help="surface textures: mixed (random kinds and periods), "
                          f"or stripes / checkers on every surface repeating every few {PATCH_PX} px patches at "
                          "the median depth, aligned with the baseline")
    texture_period: Optional[list[float]] = option(None, nargs=2, metavar=("LO", "HI"),
                                                   help=f"period of stripes / checkers in {PATCH_PX} px patches "
                                                        "at the median depth, uniform per surface (none: 2 4)")
    progress: bool = option(True, flag="--quiet", store_false=True, help="no progress bar")

    def __post_init__(self) -> None:
        check_required(self)
        for name in ("height", "width"):
            require(getattr(self, name) >= 8, f"--{name} must be at least 8 pixels, got {getattr(self, name)}")
        require(self.views >= 2, f"--views must be at least 2 (multi-view scenes), got {self.views}")
        require(min(self.train_scenes, self.val_scenes, self.workers, self.seed) >= 0,
                 "scene counts, --seed and --workers must be >= 0")
        unknown = [s for s in self.shift if s not in (*SHIFTS, "all")]
        require(not unknown, f"--shift must be one of {', '.join(SHIFTS)} or all, got {unknown}")
        require(self.style in STYLES, f"--style must be one of {', '.join(sorted(STYLES))}, got {self.style!r}")
        require(self.style == "default" or not self.shift,
                 f"--style {self.style} cannot be combined with --shift; use one or the other")
        scene_params(self.style, self.shift, **self.knobs())  # ValueError: one line naming the option

    def knobs(self) -> dict:
        """The scene knobs as ``write_synth_dataset`` takes them (rig, depth_ratio, rotation_jitter,
        texture, texture_period)."""
        return {"rig": self.rig, "depth_ratio": self.depth_ratio, "rotation_jitter": self.rotation_jitter,
                "texture": self.texture, "texture_period": self.texture_period}
