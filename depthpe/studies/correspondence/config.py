"""Typed settings of ``depthpe study correspondence`` (``CorrespondenceConfig``). Light: no torch.

One dataclass: the data, the tiny model and its encoding, the training, the evaluation curve and
the extrapolation settings of the evaluation (more views, zoom-in, pose noise); docs/correspondence.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from depthpe.config.options import REQUIRED, check_required, option, overwrite_option
from depthpe.pe.spec import PRESET_PAIRS

__all__ = ["CorrespondenceConfig", "PE_CHOICES"]

PE_CHOICES = tuple(sorted(PRESET_PAIRS))


@dataclass
class CorrespondenceConfig:
    """``depthpe study correspondence``: train the global attention of a tiny model (frozen random
    backbone, the aggregator's blocks, encoding ``pe``) with the correspondence loss on the scenes of
    ``data/<dataset>/train`` for ``steps`` steps per seed, and evaluate it on ``data/<dataset>/val`` at
    ``eval_steps``: per layer top-1 and within-1-patch accuracy and the correspondence lift, also with
    more views, zoomed in and with noisy input poses. Writes ``out/results.json`` and ``out/summary.md``."""

    data: str = option(REQUIRED, metavar="ROOT", help="data root of `depthpe synth --out ROOT`: "
                       "ROOT/<dataset>/train and ROOT/<dataset>/val")
    out: str = option(REQUIRED, metavar="DIR", help="output folder (results.json, summary.md)")
    overwrite: bool = overwrite_option()
    dataset: str = option("synth", help="dataset folder under ROOT")
    pe: str = option("rope", choices=PE_CHOICES, help="positional encoding of the global attention (model.global_pe)")
    anchors: Optional[int] = option(None, metavar="G", help="urope only: number of depth anchors (none: the "
                                    "encoding's 4)")
    anchor_assignment: Optional[str] = option(None, choices=("heads", "channels"), help="urope only: anchors by "
                                              "head groups (the default) or by RoPE channels")
    plucker: bool = option(False, help="add the Plücker ray map to the patch tokens (model.plucker)")
    views: int = option(2, metavar="S", help="views per training sample (and of the base evaluation)")
    image_width: int = option(112, metavar="PX", help="image width in pixels, a multiple of 14 (square images)")
    steps: int = option(300, metavar="N", help="training steps per seed")
    batch_size: int = option(4, metavar="B", help="samples per training step")
    lr: float = option(1e-3, help="AdamW learning rate (constant, no weight decay)")
    depth_weight: float = option(0.0, help="also train the DPT head with the depth loss at this weight (0 = "
                                 "correspondence only, the head is not run)")
    embed_dim: int = option(128, metavar="C", help="aggregator width (the tiny preset's)")
    num_blocks: int = option(4, metavar="L", help="frame/global block pairs (global layers)")
    num_heads: int = option(4, metavar="H", help="attention heads")
    layerscale_init: float = option(1.0, help="initial LayerScale of every aggregator block (1 for a model "
                                    "trained from scratch)")
    train_draws: int = option(4, metavar="K", help="view subsets drawn per training scene (the training pool)")
    train_scenes: Optional[int] = option(None, metavar="N", help="use the first N training scenes (none: all)")
    eval_scenes: Optional[int] = option(16, metavar="M", help="evaluate on the first M held-out scenes (none: all)")
    seeds: list[int] = option(default_factory=lambda: [0], help="one training run per seed (model init, "
                              "batch order, pose noise; the held-out scenes and views are the same for all)")
    eval_steps: list[int] = option(default_factory=list, metavar="STEP", help="steps to evaluate at (none: 0, "
                                   "1/4, 1/2, 3/4 of steps and the last step)")
    eval_views: list[int] = option(default_factory=list, metavar="S", help="also evaluate with S views per "
                                   "held-out scene (more than trained: extrapolation)")
    eval_zooms: list[float] = option(default_factory=list, metavar="Z", help="also evaluate zoomed in by Z >= 1 "
                                     "(centre crop of 1/Z of each side resized back: focal length x Z)")
    eval_rotation_noise: list[float] = option(default_factory=list, metavar="DEG", help="also evaluate with every "
                                              "input camera but view 0 rotated by DEG degrees about a random axis")
    eval_translation_noise: list[float] = option(default_factory=list, metavar="FRAC", help="also evaluate with "
                                                 "every input camera but view 0 moved by FRAC x the scene scale in "
                                                 "a random direction")
    radii: list[int] = option(default_factory=lambda: [0, 1], help="window radii of the lift in patches (the probe's)")
    depth_tolerance: float = option(0.05, help="occlusion test of the true matches (relative depth agreement)")
    threads: Optional[int] = option(None, metavar="N", help="torch intra-op threads (none: torch's default)")

    def __post_init__(self) -> None:
        check_required(self)
        if self.pe not in PE_CHOICES:
            raise ValueError(f"--pe must be one of {', '.join(PE_CHOICES)}, got {self.pe!r}")
        if self.image_width <= 0 or self.image_width % 14:
            raise ValueError(f"--image-width must be a positive multiple of 14, got {self.image_width}")
        for name, low in (("views", 2), ("steps", 1), ("batch_size", 1), ("train_draws", 1), ("num_blocks", 1),
                          ("num_heads", 1), ("embed_dim", 1)):
            if getattr(self, name) < low:
                raise ValueError(f"--{name.replace('_', '-')} must be >= {low}, got {getattr(self, name)}")
        if not self.lr > 0 or self.depth_weight < 0 or not self.layerscale_init > 0 or not self.depth_tolerance > 0:
            raise ValueError("--lr, --layerscale-init and --depth-tolerance must be > 0 and --depth-weight >= 0, got "
                             f"{self.lr}, {self.layerscale_init}, {self.depth_tolerance}, {self.depth_weight}")
        if (self.anchors is not None or self.anchor_assignment is not None) and self.pe != "urope":
            raise ValueError(f"--anchors and --anchor-assignment are options of --pe urope, not of {self.pe!r}")
        if self.anchors is not None and self.anchors < 1:
            raise ValueError(f"--anchors must be >= 1, got {self.anchors}")
        self._check_lists()

    def pe_options(self) -> dict:
        """The encoding's options (``model.pe_options``) these settings ask for."""
        picked = {"num_anchors": self.anchors, "anchor_assignment": self.anchor_assignment}
        return {k: v for k, v in picked.items() if v is not None}

    def _check_lists(self) -> None:
        if not self.seeds:
            raise ValueError("--seeds needs at least one seed")
        checks = [("eval-steps", self.eval_steps, lambda s: 0 <= s <= self.steps, f"in [0, --steps = {self.steps}]"),
                  ("eval-views", self.eval_views, lambda s: s >= 2, ">= 2"),
                  ("eval-zooms", self.eval_zooms, lambda z: z >= 1, ">= 1"),
                  ("eval-rotation-noise", self.eval_rotation_noise, lambda d: d >= 0, ">= 0"),
                  ("eval-translation-noise", self.eval_translation_noise, lambda t: t >= 0, ">= 0"),
                  ("radii", self.radii, lambda r: r >= 0, ">= 0"),
                  ("scenes", [n for n in (self.train_scenes, self.eval_scenes) if n is not None], lambda n: n >= 1,
                   ">= 1 (--train-scenes, --eval-scenes)")]
        for flag, values, ok, rule in checks:
            bad = [v for v in values if not ok(v)]
            if bad:
                raise ValueError(f"--{flag} values must be {rule}, got {bad}")
        if not self.radii:
            raise ValueError("--radii needs at least one radius")

    def checkpoints(self) -> list[int]:
        """The sorted steps to evaluate at: ``eval_steps`` (or 0, 1/4, 1/2, 3/4 of ``steps``), always
        with the last step."""
        steps = self.eval_steps or [0, self.steps // 4, self.steps // 2, 3 * self.steps // 4]
        return sorted(set(steps) | {self.steps})
