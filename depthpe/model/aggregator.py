"""VGGT-style aggregator: frozen DINOv2 patch tokens + alternating frame / global attention.

Per view the token sequence is ``[camera (1), registers (R), patches (h*w, row-major, x fastest)]``.
View 0 (the reference view) gets its own camera/register tokens (index 0 of ``camera_token``
(1, 2, 1, C) and ``register_token`` (1, 2, R, C)); all other views share index 1 (VGGT's only
signal of which view defines the world frame).

Block i = frame block i (attention within each view, VGGT 2D RoPE, patches at (y+1, x+1),
special tokens at (0, 0)) followed by global block i (attention over all S*T tokens of a sample,
view-major, with the encoding named by ``global_pe``, prepared once per forward from the cameras).
Only the outputs the DPT head reads are kept: for i in ``head_layers``,
``cat([after frame_i, after global_i], -1)`` restricted to patch tokens, (B, S, h*w, 2C).
"""

from __future__ import annotations

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

from ..pe import encoding_state, prepare_encoding
from .backbone import IMAGENET_MEAN, IMAGENET_STD, backbone_patch_tokens, build_backbone
from .blocks import AggregatorBlock, init_linear
from .config import DepthModelConfig
from .plucker import PluckerEmbedding

__all__ = ["Aggregator"]


class Aggregator(nn.Module):
    """Frozen backbone + alternating attention. See the module docstring for the layout.

    Sub-modules (state-dict names follow VGGT): ``patch_embed`` (the timm DINOv2, frozen unless
    ``train_backbone``),
    ``backbone_proj`` (Linear backbone_dim -> embed_dim, Identity when equal: no keys),
    ``camera_token``, ``register_token``, ``frame_blocks.i``, ``global_blocks.i``, and with
    ``plucker: true`` ``plucker.proj`` (Plücker ray-map embedding added to the patch tokens), and
    with an encoding that learns (URoPE's ``learnable_anchors: true``) ``global_pe_state``, which
    hands every global block its own encoding (``depthpe.pe.encoding_state``).
    """

    def __init__(self, config: DepthModelConfig, *, load_backbone_weights: bool = True):
        super().__init__()
        self.config = config
        c = config
        self.patch_size = c.patch_size
        self.num_special = c.num_special_tokens
        self.head_layers = list(c.head_layers)
        self.gradient_checkpointing = bool(c.gradient_checkpointing)

        self.patch_embed = build_backbone(
            c.backbone,
            pretrained=c.pretrained and load_backbone_weights,
            weights_path=c.backbone_weights if load_backbone_weights else None,
            num_blocks=c.backbone_blocks,
            trainable=c.train_backbone,
        )
        bb_patch = self.patch_embed.patch_embed.patch_size
        if tuple(bb_patch) != (c.patch_size, c.patch_size):
            raise ValueError(
                f"patch_size={c.patch_size} but backbone {c.backbone} uses patches {tuple(bb_patch)}"
            )
        bb_dim = self.patch_embed.embed_dim
        self.backbone_proj = nn.Identity() if bb_dim == c.embed_dim else nn.Linear(bb_dim, c.embed_dim)
        self.register_buffer("_image_mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("_image_std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)

        # Plücker ray map added to the patch tokens (model.plucker), zero-initialised.
        self.plucker = PluckerEmbedding(c.patch_size, c.embed_dim) if c.plucker else None
        # Learnable state of the global encoding (per-layer URoPE anchors), None for the others.
        self.global_pe_state = encoding_state(c.global_pe, c.num_blocks, **c.pe_options)
        self.camera_token = nn.Parameter(torch.randn(1, 2, 1, c.embed_dim) * 1e-6)
        self.register_token = nn.Parameter(torch.randn(1, 2, c.num_register_tokens, c.embed_dim) * 1e-6)
        self.frame_blocks = nn.ModuleList(
            AggregatorBlock(c.embed_dim, c.num_heads, c.mlp_ratio, c.layerscale_init) for _ in range(c.num_blocks)
        )
        self.global_blocks = nn.ModuleList(
            AggregatorBlock(c.embed_dim, c.num_heads, c.mlp_ratio, c.layerscale_init) for _ in range(c.num_blocks)
        )
        self.backbone_proj.apply(init_linear)
        self.frame_blocks.apply(init_linear)
        self.global_blocks.apply(init_linear)

    def train(self, mode: bool = True):
        """Set training mode; the backbone always stays in eval mode (DINOv2 has no dropout or
        batch statistics, so eval mode only matters for timm's stochastic depth)."""
        super().train(mode)
        self.patch_embed.eval()
        return self

    def special_tokens(self, B: int, S: int) -> torch.Tensor:
        """(B, S, 1 + R, C): camera + register tokens, index 0 for view 0, index 1 for the rest."""
        tok = torch.cat([self.camera_token, self.register_token], dim=2)  # (1, 2, T0, C)
        first = tok[:, :1].expand(B, 1, -1, -1)
        rest = tok[:, 1:].expand(B, S - 1, -1, -1)
        return torch.cat([first, rest], dim=1)

    def _run(self, block: nn.Module, x: torch.Tensor, enc) -> torch.Tensor:
        """block(x, enc); with ``gradient_checkpointing`` (training, grad enabled) through
        non-reentrant ``torch.utils.checkpoint`` (every frame and global block goes through here),
        which ``torch.compile`` captures without a graph break."""
        if self.gradient_checkpointing and self.training and torch.is_grad_enabled():
            return checkpoint(block, x, enc, use_reentrant=False)
        return block(x, enc)

    def forward(
        self, images: torch.Tensor, K: torch.Tensor, w2c: torch.Tensor
    ) -> list[torch.Tensor]:
        """images: (B, S, 3, H, W) in [0, 1]; K: (B, S, 3, 3) pixels; w2c: (B, S, 3|4, 4)
        normalized OpenCV world-to-camera. Returns one (B, S, h*w, 2C) tensor per head layer
        (in ``head_layers`` order): patch tokens of cat(frame output, global output)."""
        B, S, _, H, W = images.shape
        h, w = H // self.patch_size, W // self.patch_size
        c = self.config

        patches = backbone_patch_tokens(
            self.patch_embed, images.reshape(B * S, 3, H, W), self._image_mean, self._image_std,
            trainable=c.train_backbone,
        )
        # Residual stream in the parameter dtype (fp32 under autocast, as in VGGT).
        x = self.backbone_proj(patches).to(self.camera_token.dtype)  # (B*S, h*w, C)
        if self.plucker is not None:
            x = x + self.plucker(K, w2c, (H, W))
        special = self.special_tokens(B, S).reshape(B * S, self.num_special, -1)
        tokens = torch.cat([special, x], dim=1)  # (B*S, T, C)
        T, C = tokens.shape[1], tokens.shape[2]

        geometry = dict(image_size=(H, W), grid=(h, w), num_special=self.num_special, patch_offset=1)
        frame_enc = prepare_encoding("rope", num_views=1, **geometry)
        global_enc = prepare_encoding(c.global_pe, K=K, w2c=w2c, **geometry, **c.pe_options)

        outputs = {}  # only the head layers' outputs are kept (the DPT head reads nothing else)
        for i in range(len(self.frame_blocks)):
            tokens = self._run(self.frame_blocks[i], tokens, frame_enc)
            frame_out = tokens
            enc_i = global_enc if self.global_pe_state is None else self.global_pe_state.layer_encoding(global_enc, i)
            tokens = self._run(self.global_blocks[i], tokens.reshape(B, S * T, C), enc_i)
            tokens = tokens.reshape(B * S, T, C)
            if i in self.head_layers:
                # Patch tokens only, sliced before the concatenation: the kept tensor holds no
                # special tokens and no reference to the blocks' full outputs.
                ns = self.num_special
                both = torch.cat([frame_out[:, ns:], tokens[:, ns:]], dim=-1)
                outputs[i] = both.reshape(B, S, h * w, 2 * C)
        return [outputs[i] for i in self.head_layers]
