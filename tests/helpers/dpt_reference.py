"""An independent statement of VGGT's DPT depth head forward (docs/vggt-weights.md), for
tests/model/test_dpt_reference.py.

It shares no code with ``depthpe.model.dpt`` and only reads the weights of a ``DPTHead``: every
conv is the module itself applied in NCHW (no channels-last matmuls), each fusion block resizes
*before* its 1x1 ``out_conv`` (VGGT's order; depthpe swaps them), the residual unit's skip path is
rectified by an in-place ReLU on its input (VGGT's quirk, written literally), and the sin-cos UV
embedding is built from its definition at every call (no cache).

Shapes: tokens 4 x (N, h*w, dim_in) patch tokens, h = H / patch, w = W / patch;
returns depth, conf (N, H, W) with depth = exp(c0), conf = 1 + exp(c1).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

POS_EMBED_RATIO = 0.1
OMEGA_0 = 100.0


def uv_embedding(h: int, w: int, channels: int, aspect: float, dtype) -> torch.Tensor:
    """(channels, h, w): 0.1 x [sin, cos] of u over the first half of the channels and of v over the
    second, frequencies 100^(-k / (channels / 4)); u, v on pixel centres of a grid spanning
    +-aspect/diag by +-1/diag (diag = sqrt(aspect^2 + 1)), aspect = the image's W / H. As in VGGT the
    grid is float32 and the sines float64, rounded to float32 before the cast to ``dtype``."""
    diag = math.sqrt(aspect * aspect + 1.0)
    u = torch.linspace(-aspect / diag * (w - 1) / w, aspect / diag * (w - 1) / w, w).double()
    v = torch.linspace(-1 / diag * (h - 1) / h, 1 / diag * (h - 1) / h, h).double()
    half = channels // 2
    omega = OMEGA_0 ** (-torch.arange(half // 2, dtype=torch.float64) / (half / 2))
    u_part = torch.cat([torch.sin(u[:, None] * omega), torch.cos(u[:, None] * omega)], dim=1)  # (w, half)
    v_part = torch.cat([torch.sin(v[:, None] * omega), torch.cos(v[:, None] * omega)], dim=1)  # (h, half)
    emb = torch.cat([u_part[None].expand(h, w, half), v_part[:, None].expand(h, w, half)], dim=2)
    return POS_EMBED_RATIO * emb.permute(2, 0, 1).float().to(dtype)


def residual_unit(unit, x: torch.Tensor) -> torch.Tensor:
    """VGGT's ResidualConvUnit: its first ReLU runs in place on the input, which the skip then adds."""
    x = x.clone()
    out = F.relu(x, inplace=True)  # x itself is now ReLU(x)
    out = unit.conv2(F.relu(unit.conv1(out)))
    return out + x


def fusion(block, x: torch.Tensor, skip: torch.Tensor | None = None, size=None) -> torch.Tensor:
    """VGGT's FeatureFusionBlock: (+ unit1(skip)), unit2, bilinear resize (align_corners) to ``size``
    or x2, then the 1x1 out_conv."""
    if skip is not None:
        x = x + residual_unit(block.resConfUnit1, skip)
    x = residual_unit(block.resConfUnit2, x)
    if size is None:
        x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)
    else:
        x = F.interpolate(x, size=tuple(size), mode="bilinear", align_corners=True)
    return block.out_conv(x)


def raw_output(head, tokens: list[torch.Tensor], image_size: tuple[int, int]) -> torch.Tensor:
    """(N, 2, H, W): the head's output before its activations."""
    H, W = image_size
    h, w = H // head.patch_size, W // head.patch_size
    levels = []
    for i, t in enumerate(tokens):
        x = head.norm(t).permute(0, 2, 1).reshape(t.shape[0], t.shape[2], h, w)
        x = head.projects[i](x)
        x = x + uv_embedding(h, w, x.shape[1], W / H, x.dtype)
        levels.append(head.resize_layers[i](x))
    s = head.scratch
    l1, l2, l3, l4 = s.layer1_rn(levels[0]), s.layer2_rn(levels[1]), s.layer3_rn(levels[2]), s.layer4_rn(levels[3])
    out = fusion(s.refinenet4, l4, size=l3.shape[-2:])
    out = fusion(s.refinenet3, out, l3, size=l2.shape[-2:])
    out = fusion(s.refinenet2, out, l2, size=l1.shape[-2:])
    out = fusion(s.refinenet1, out, l1)
    out = s.output_conv1(out)
    out = F.interpolate(out, size=(H, W), mode="bilinear", align_corners=True)
    out = out + uv_embedding(H, W, out.shape[1], W / H, out.dtype)
    return s.output_conv2(out)


def depth_and_conf(head, tokens: list[torch.Tensor], image_size: tuple[int, int]):
    """(depth = exp(c0), conf = 1 + exp(c1)), each (N, H, W)."""
    out = raw_output(head, tokens, image_size)
    return torch.exp(out[:, 0]), 1 + torch.exp(out[:, 1])
