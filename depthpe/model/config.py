"""``DepthModelConfig``: the flat, JSON-serializable description of a ``DepthModel``.

The config is a plain dataclass whose fields are public API: they appear in YAML recipes, on the
command line and in ``config.json`` next to every saved checkpoint. Keep it flat (no nested
dataclasses) so that it round-trips through JSON unchanged.

Named presets (``PRESETS``) are dictionaries of field values; ``DepthModelConfig.from_preset(name,
**overrides)`` builds one. This module imports nothing heavy (no torch).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from ..pe.spec import encoding_pair, head_dim_multiple

__all__ = ["DepthModelConfig", "PRESETS", "ConfigError"]


class ConfigError(ValueError):
    """An invalid model configuration (the message says which field and how to fix it)."""


@dataclass
class DepthModelConfig:
    """Architecture of a ``DepthModel``. Defaults are the VGGT-1B sizes (preset ``vggt-1b``).

    Backbone (frozen timm DINOv2):
      backbone: timm model name of a DINOv2 ViT, e.g. ``vit_large_patch14_reg4_dinov2``.
      backbone_blocks: keep only the first N backbone blocks (None = all); for small models.
      pretrained: load timm's pretrained weights (downloaded on first use) when building a NEW model.
        Ignored by ``DepthModel.from_pretrained`` (the checkpoint holds the backbone weights).
      backbone_weights: local file (safetensors or torch state dict, timm or original DINOv2 keys)
        to load instead of downloading; for offline machines. Takes precedence over ``pretrained``.
      patch_size: backbone patch size in pixels; image sides must be multiples of it.
      train_backbone: train the backbone too (default false: frozen, as in VGGT's recipe). Meant
        for small studies from a random backbone (``docs/results.md``); the backbone then runs with
        gradients, still in eval mode, and its parameters join the optimizer.

    Aggregator (alternating frame / global attention, VGGT layout):
      embed_dim: token width C; num_blocks: number of (frame, global) block pairs;
      num_heads: attention heads (head_dim = embed_dim / num_heads, must be divisible by 4 for
        2D RoPE; the camera encodings need a multiple of 8); mlp_ratio: MLP hidden = ratio * C;
      num_register_tokens: register tokens per view (camera token + registers = special tokens);
      layerscale_init: initial LayerScale value of every aggregator block (VGGT and every preset:
        0.01, which keeps a deep model near identity at the start; larger values let the residual
        branches of a small model trained from scratch contribute from the first step);
      global_pe: positional encoding of the global attention: a preset name
        (``depthpe.pe.spec.PRESET_PAIRS``) or a pair ``{qk: NAME, vo: NAME}`` of DPPE transforms
        (``depthpe.pe.spec``); pe_options: keyword options for that encoding;
      plucker: add a Plücker ray map (per pixel (d, o x d) of its camera ray, patchified) to the
        patch tokens through a learned linear embedding initialised to zero (``model/plucker.py``);
      gradient_checkpointing: recompute each aggregator block in the backward pass (training only).

    DPT depth head:
      head_features: fusion width (256 in VGGT); head_out_channels: 4 channel counts of the
      projected levels; head_layers: 4 aggregator block indices (0-based, non-decreasing as in
      VGGT, so a block may feed two levels) whose concatenated frame+global outputs feed the head;
      the last one must be ``num_blocks - 1``.
    """

    backbone: str = "vit_large_patch14_reg4_dinov2"
    backbone_blocks: int | None = None
    pretrained: bool = True
    backbone_weights: str | None = None
    patch_size: int = 14
    train_backbone: bool = False
    embed_dim: int = 1024
    num_blocks: int = 24
    num_heads: int = 16
    mlp_ratio: float = 4.0
    num_register_tokens: int = 4
    layerscale_init: float = 0.01
    global_pe: Any = "rope"
    pe_options: dict[str, Any] = field(default_factory=dict)
    plucker: bool = False
    head_features: int = 256
    head_out_channels: list[int] = field(default_factory=lambda: [256, 512, 1024, 1024])
    head_layers: list[int] = field(default_factory=lambda: [4, 11, 17, 23])
    gradient_checkpointing: bool = False

    def __post_init__(self):
        self.head_out_channels = [int(c) for c in self.head_out_channels]
        self.head_layers = [int(i) for i in self.head_layers]
        self.pe_options = dict(self.pe_options or {})
        if isinstance(self.global_pe, Mapping):
            self.global_pe = {key: self.global_pe[key] for key in sorted(self.global_pe)}
        self.validate()

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        """Raise ``ConfigError`` naming the offending field if the config cannot build a model."""

        def bad(msg: str):
            raise ConfigError(f"invalid DepthModelConfig: {msg}")

        if "dinov2" not in self.backbone:
            bad(f"backbone={self.backbone!r} is not a timm DINOv2 model name "
                "(e.g. 'vit_large_patch14_reg4_dinov2', 'vit_small_patch14_reg4_dinov2')")
        if self.backbone_blocks is not None and int(self.backbone_blocks) < 1:
            bad(f"backbone_blocks must be >= 1 or null, got {self.backbone_blocks}")
        for name in ("patch_size", "embed_dim", "num_blocks", "num_heads", "head_features"):
            if int(getattr(self, name)) < 1:
                bad(f"{name} must be a positive integer, got {getattr(self, name)}")
        if self.num_register_tokens < 0:
            bad(f"num_register_tokens must be >= 0, got {self.num_register_tokens}")
        if self.embed_dim % self.num_heads:
            bad(f"embed_dim={self.embed_dim} is not divisible by num_heads={self.num_heads}")
        head_dim = self.embed_dim // self.num_heads
        if head_dim % 4:
            bad(f"head_dim = embed_dim / num_heads = {head_dim} must be divisible by 4 for 2D RoPE "
                "(use a multiple of 8 for the camera encodings)")
        if not float(self.layerscale_init) > 0:
            bad(f"layerscale_init must be positive, got {self.layerscale_init}")
        if self.mlp_ratio <= 0:
            bad(f"mlp_ratio must be positive, got {self.mlp_ratio}")
        if len(self.head_out_channels) != 4 or any(c < 4 or c % 4 for c in self.head_out_channels):
            bad(f"head_out_channels must be 4 positive multiples of 4 (sin-cos position embedding), "
                f"got {self.head_out_channels}")
        if self.head_features % 8:
            bad(f"head_features must be a multiple of 8 (the head halves it and adds a sin-cos "
                f"embedding), got {self.head_features}")
        layers = self.head_layers
        if len(layers) != 4 or any(b < a for a, b in zip(layers, layers[1:])):
            bad(f"head_layers must be 4 non-decreasing block indices (VGGT's rule), got {layers}")
        if layers[0] < 0 or layers[-1] != self.num_blocks - 1:
            bad(f"head_layers {layers} must lie in [0, num_blocks) and end at num_blocks - 1 = "
                f"{self.num_blocks - 1} (later blocks would be unused and break DDP)")
        try:
            pair = encoding_pair(self.global_pe)
        except ValueError as err:
            bad(f"global_pe: {err}")
        for name in pair:
            if head_dim % head_dim_multiple(name):
                bad(f"global_pe transform {name!r} needs a head dim divisible by "
                    f"{head_dim_multiple(name)}, got head_dim {head_dim}")
        if self.pe_options:  # prepared once on a tiny rig (imports torch only then)
            from ..pe.registry import options_problem

            problem = options_problem(self.global_pe, self.pe_options, num_heads=self.num_heads,
                                      head_dim=head_dim, num_special=self.num_special_tokens)
            if problem:
                bad(f"pe_options {self.pe_options} for global_pe {self.global_pe!r}: {problem}")

    @property
    def head_dim(self) -> int:
        """Per-head channel count of the aggregator attention."""
        return self.embed_dim // self.num_heads

    @property
    def num_special_tokens(self) -> int:
        """Special tokens per view: 1 camera token + the register tokens."""
        return 1 + self.num_register_tokens

    # ------------------------------------------------------------ (de)serialize
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict of all fields."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DepthModelConfig":
        """Build from a dict; unknown keys raise ``ConfigError`` listing them and the valid fields."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(
                f"unknown DepthModelConfig field(s) {unknown}; valid fields: {sorted(known)}"
            )
        return cls(**data)

    def to_json(self, path: str | Path) -> None:
        """Write the config as sorted, indented JSON (``config.json``)."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")

    @classmethod
    def from_json(cls, path: str | Path) -> "DepthModelConfig":
        """Read a config written by ``to_json``."""
        return cls.from_dict(json.loads(Path(path).read_text()))

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "DepthModelConfig":
        """Config of the named preset (``PRESETS``) with ``overrides`` applied on top."""
        if name not in PRESETS:
            raise ConfigError(f"unknown model preset {name!r}; available: {sorted(PRESETS)}")
        return cls.from_dict({**PRESETS[name], **overrides})

    def replace(self, **changes) -> "DepthModelConfig":
        """Copy with some fields changed (validated)."""
        return self.from_dict({**self.to_dict(), **changes})


PRESETS: dict[str, dict[str, Any]] = {
    # VGGT-1B aggregator + depth head sizes, frozen timm DINOv2 ViT-L/14-reg4 (pretrained): the
    # dataclass defaults themselves, written once there.
    "vggt-1b": {},
    # CPU-sized model for tests and the quickstart. A randomly initialised 1-block DINOv2-S keeps
    # the spatial content of each patch (timm's LayerScale init makes random blocks near-identity),
    # so the model learns depth even without downloadable weights.
    "tiny": dict(
        backbone="vit_small_patch14_reg4_dinov2",
        backbone_blocks=1,
        pretrained=False,
        embed_dim=128,
        num_blocks=4,
        num_heads=4,
        mlp_ratio=4.0,
        head_features=32,
        head_out_channels=[32, 64, 128, 128],
        head_layers=[0, 1, 2, 3],
    ),
}
