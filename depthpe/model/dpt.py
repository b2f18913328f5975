"""DPT depth head (VGGT's ``DPTHead`` topology and state-dict names; docs/vggt-weights.md).

Four tapped aggregator layers (B, S, h*w, 2C) -> shared LayerNorm -> per level 1x1 ``projects[i]``
-> + 0.1 * sin-cos UV position embedding -> ``resize_layers[i]`` (x4, x2, x1, x1/2) ->
``scratch.layer{i}_rn`` (3x3, no bias) -> fusion ``refinenet4`` (deepest) ... ``refinenet1``
(bilinear, align_corners=True) -> ``scratch.output_conv1`` (features -> features/2) -> bilinear to
(H, W) -> + position embedding -> ``scratch.output_conv2`` (3x3 -> ReLU -> 1x1 to 2 channels).
depth = exp(channel 0), conf = 1 + exp(channel 1). Always runs in float32 (autocast disabled).

Residual conv units add ReLU(x), not x, on the skip path: VGGT's unit applies an in-place ReLU to
its input first, so the input it later adds back has already been rectified. We compute the same thing out of place.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..pe.camera import memoized
from .resize import resize_bilinear

__all__ = [
    "uv_grid",
    "sincos_embed_2d",
    "add_uv_pos_embed",
    "conv1x1",
    "ResidualConvUnit",
    "FeatureFusionBlock",
    "DPTHead",
]


def uv_grid(height: int, width: int, aspect: float, *, device=None) -> torch.Tensor:
    """(height, width, 2) grid of (u, v) in VGGT's normalized view-plane coordinates.

    With diag = sqrt(aspect^2 + 1): u spans +-(aspect/diag) * (width-1)/width and v spans
    +-(1/diag) * (height-1)/height, linearly (pixel centres of a grid covering the image).
    ``aspect`` is the IMAGE width/height, even when the grid is a token grid. float32.
    """
    diag = math.sqrt(aspect**2 + 1.0)
    span_x = aspect / diag * (width - 1) / width
    span_y = 1.0 / diag * (height - 1) / height
    u = torch.linspace(-span_x, span_x, width, dtype=torch.float32, device=device)
    v = torch.linspace(-span_y, span_y, height, dtype=torch.float32, device=device)
    vv, uu = torch.meshgrid(v, u, indexing="ij")
    return torch.stack([uu, vv], dim=-1)


def _sincos_1d(pos: torch.Tensor, dim: int, omega_0: float) -> torch.Tensor:
    """(M,) positions -> (M, dim) = [sin(p w_k), cos(p w_k)], w_k = omega_0^(-k/(dim/2))."""
    k = torch.arange(dim // 2, dtype=torch.float64, device=pos.device)
    omega = omega_0 ** (-k / (dim / 2.0))
    angles = pos.double()[:, None] * omega[None]
    return torch.cat([angles.sin(), angles.cos()], dim=1)


def sincos_embed_2d(grid: torch.Tensor, channels: int, omega_0: float = 100.0) -> torch.Tensor:
    """(h, w, 2) (u, v) grid -> (h, w, channels) float32: first half from u, second half from v.

    channels must be divisible by 4. Computed in float64, returned as float32.
    """
    if channels % 4:
        raise ValueError(f"sin-cos position embedding needs channels % 4 == 0, got {channels}")
    h, w, _ = grid.shape
    flat = grid.reshape(-1, 2)
    emb = torch.cat(
        [_sincos_1d(flat[:, 0], channels // 2, omega_0), _sincos_1d(flat[:, 1], channels // 2, omega_0)],
        dim=1,
    )
    return emb.float().reshape(h, w, channels)


def uv_pos_embed(
    size: tuple[int, int], channels: int, image_size: tuple[int, int], ratio: float, dtype, device
) -> torch.Tensor:
    """(1, channels, h, w) = ratio * sin-cos UV embedding of an (h, w) grid, aspect = image W/H,
    channels-last (the layout of the head's activations)."""
    H, W = image_size
    emb = sincos_embed_2d(uv_grid(size[0], size[1], W / H, device=device), channels)
    return ratio * emb.permute(2, 0, 1).unsqueeze(0).to(dtype)


_UV_EMBED_CACHE: dict = {}


def add_uv_pos_embed(x: torch.Tensor, image_size: tuple[int, int], ratio: float = 0.1) -> torch.Tensor:
    """x (N, C, h, w) + ratio * sin-cos UV embedding of its own grid, aspect = image W/H.

    The embedding is a constant of (h, w, C, image size, dtype, device): computed once and reused
    in eager mode (``depthpe.pe.camera.memoized``), computed in the graph under ``torch.compile``.
    """
    size, C = (x.shape[-2], x.shape[-1]), x.shape[1]
    key = (size, C, tuple(image_size), float(ratio), x.dtype, x.device)
    emb = memoized(_UV_EMBED_CACHE, key, lambda: uv_pos_embed(size, C, image_size, ratio, x.dtype, x.device))
    return x + emb


def conv1x1(conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    """A 1x1 ``conv`` (stride 1, no padding) as one matmul over the channels.

    x: (N, C, h, w), channels-last (the head's layout: its activations start as a view of the
    tokens) -> (N, C', h, w) channels-last. torch's CPU 1x1 convolution of a small batch takes a
    path that copies to and returns NCHW, and a head mixing both layouts runs slower.
    """
    y = F.linear(x.permute(0, 2, 3, 1), conv.weight.flatten(1), conv.bias)
    return y.permute(0, 3, 1, 2)


class ResidualConvUnit(nn.Module):
    """``conv2(relu(conv1(relu(x)))) + relu(x)`` (3x3 convs with bias; VGGT's skip quirk)."""

    def __init__(self, features: int):
        super().__init__()
        self.conv1 = nn.Conv2d(features, features, 3, padding=1, bias=True)
        self.conv2 = nn.Conv2d(features, features, 3, padding=1, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(x)
        # conv1's output is a fresh tensor its backward does not read: rectify it in place.
        return self.conv2(F.relu(self.conv1(x), inplace=True)) + x


class FeatureFusionBlock(nn.Module):
    """Fuse a coarser path ``x`` with an optional skip: ``y = x + resConfUnit1(skip)``,
    ``resConfUnit2(y)``, bilinear resize (align_corners=True) to ``size`` or x2, ``out_conv`` 1x1.

    The 1x1 ``out_conv`` runs *before* the resize: a 1x1 conv (channel mixing + bias) commutes with
    bilinear resizing (spatial mixing with weights summing to 1), so the result equals VGGT's order
    (resize, then conv) up to float rounding, with the conv on 4x fewer pixels.
    """

    def __init__(self, features: int, has_residual: bool = True):
        super().__init__()
        self.out_conv = nn.Conv2d(features, features, 1, bias=True)
        if has_residual:
            self.resConfUnit1 = ResidualConvUnit(features)
        self.has_residual = has_residual
        self.resConfUnit2 = ResidualConvUnit(features)

    def forward(self, x: torch.Tensor, skip: torch.Tensor | None = None, size=None) -> torch.Tensor:
        if skip is not None:
            x = x + self.resConfUnit1(skip)
        x = conv1x1(self.out_conv, self.resConfUnit2(x))
        if size is None:
            size = (x.shape[-2] * 2, x.shape[-1] * 2)
        return resize_bilinear(x, size)


class DPTHead(nn.Module):
    """DPT head predicting depth and confidence at input resolution.

    dim_in: token channels (2C); features: fusion width; out_channels: 4 level widths;
    hidden: width of the last 3x3 conv (default min(32, features / 2): 32 as in VGGT for
    features >= 64, narrower for small heads); frames_chunk_size: views decoded at once
    when gradients are off (memory only; identical results).
    """

    def __init__(
        self,
        dim_in: int,
        *,
        patch_size: int = 14,
        features: int = 256,
        out_channels=(256, 512, 1024, 1024),
        hidden: int | None = None,
        output_dim: int = 2,
        frames_chunk_size: int = 8,
    ):
        super().__init__()
        oc = list(out_channels)
        hidden = min(32, features // 2) if hidden is None else hidden
        self.patch_size = patch_size
        self.frames_chunk_size = frames_chunk_size
        self.norm = nn.LayerNorm(dim_in, eps=1e-5)
        self.projects = nn.ModuleList(nn.Conv2d(dim_in, c, 1) for c in oc)
        self.resize_layers = nn.ModuleList([
            nn.ConvTranspose2d(oc[0], oc[0], kernel_size=4, stride=4),
            nn.ConvTranspose2d(oc[1], oc[1], kernel_size=2, stride=2),
            nn.Identity(),
            nn.Conv2d(oc[3], oc[3], kernel_size=3, stride=2, padding=1),
        ])
        scratch = nn.Module()
        for i, c in enumerate(oc, start=1):
            setattr(scratch, f"layer{i}_rn", nn.Conv2d(c, features, 3, padding=1, bias=False))
        scratch.refinenet1 = FeatureFusionBlock(features)
        scratch.refinenet2 = FeatureFusionBlock(features)
        scratch.refinenet3 = FeatureFusionBlock(features)
        scratch.refinenet4 = FeatureFusionBlock(features, has_residual=False)
        scratch.output_conv1 = nn.Conv2d(features, features // 2, 3, padding=1)
        scratch.output_conv2 = nn.Sequential(
            nn.Conv2d(features // 2, hidden, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(hidden, output_dim, 1),
        )
        self.scratch = scratch

    def forward(
        self, layer_tokens: list[torch.Tensor], image_size: tuple[int, int]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """layer_tokens: 4 tensors (B, S, h*w, dim_in) (patch tokens only); image_size: (H, W).
        Returns depth = exp(c0) and conf = 1 + exp(c1), each (B, S, H, W) float32."""
        B, S = layer_tokens[0].shape[:2]
        H, W = image_size
        flat = [t.reshape(B * S, *t.shape[2:]) for t in layer_tokens]
        with torch.autocast(device_type=flat[0].device.type, enabled=False):
            flat = [t.float() for t in flat]
            n = B * S
            step = n if torch.is_grad_enabled() or not self.frames_chunk_size else self.frames_chunk_size
            outs = [self._decode([t[i:i + step] for t in flat], (H, W)) for i in range(0, n, step)]
            out = torch.cat(outs, dim=0) if len(outs) > 1 else outs[0]
        depth = torch.exp(out[:, 0]).reshape(B, S, H, W)
        conf = (1.0 + torch.exp(out[:, 1])).reshape(B, S, H, W)
        return depth, conf

    def _decode(self, flat: list[torch.Tensor], image_size: tuple[int, int]) -> torch.Tensor:
        """4 x (N, h*w, dim_in) -> raw head output (N, output_dim, H, W)."""
        H, W = image_size
        h, w = H // self.patch_size, W // self.patch_size
        levels = []
        for i, t in enumerate(flat):
            # projects[i] is a 1x1 conv: one matmul over the token channels, then the
            # channels-last (N, C, h, w) view of the tokens (no copy); see ``conv1x1``.
            proj = self.projects[i]
            x = F.linear(self.norm(t), proj.weight.flatten(1), proj.bias)  # (N, h*w, C)
            x = x.transpose(1, 2).reshape(t.shape[0], x.shape[2], h, w)
            x = add_uv_pos_embed(x, (H, W))
            levels.append(self.resize_layers[i](x))
        s = self.scratch
        l1, l2, l3, l4 = (getattr(s, f"layer{i + 1}_rn")(x) for i, x in enumerate(levels))
        x = s.refinenet4(l4, size=l3.shape[-2:])
        x = s.refinenet3(x, l3, size=l2.shape[-2:])
        x = s.refinenet2(x, l2, size=l1.shape[-2:])
        x = s.refinenet1(x, l1)
        x = s.output_conv1(x)
        x = resize_bilinear(x, (H, W))
        x = add_uv_pos_embed(x, (H, W))
        return s.output_conv2(x)
