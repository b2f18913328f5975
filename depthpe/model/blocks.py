"""Aggregator transformer block (VGGT layout and parameter names).

``AggregatorBlock``: pre-norm, ``x + ls1(attn(norm1(x)))`` then ``x + ls2(mlp(norm2(x)))``; LayerNorm eps
1e-5; qkv with bias; per-head LayerNorm q/k-norm; LayerScale (init 0.01); GELU MLP. The attention
itself is delegated to a prepared positional ``Encoding`` (``depthpe.pe``): after q/k-norm the
block calls ``enc.attend(q, k, v)``, which wraps one unmodified SDPA call. Parameter names match
VGGT's (``norm1``, ``attn.qkv``, ``attn.q_norm``, ``attn.k_norm``, ``attn.proj``, ``ls1.gamma``,
``norm2``, ``mlp.fc1``, ``mlp.fc2``, ``ls2.gamma``) so VGGT-1B weights map 1:1.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ..pe.base import Encoding

__all__ = ["LayerScale", "Mlp", "Attention", "AggregatorBlock", "init_linear"]

LN_EPS = 1e-5


def init_linear(module: nn.Module) -> None:
    """ViT initialisation: Linear weights truncated normal (std 0.02), biases zero."""
    if isinstance(module, nn.Linear):
        nn.init.trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


class LayerScale(nn.Module):
    """Per-channel scale ``x * gamma``; gamma: (dim,), initialised to ``init_value``."""

    def __init__(self, dim: int, init_value: float = 0.01):
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), float(init_value)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma


class Mlp(nn.Module):
    """fc1 (dim -> hidden) -> GELU (exact) -> fc2 (hidden -> dim)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Attention(nn.Module):
    """Multi-head self-attention with q/k LayerNorm, attention done by a positional ``Encoding``.

    x: (B, N, C) -> (B, N, C). q, k, v are (B, heads, N, head_dim) when handed to ``enc.attend``;
    v is a copy, not a view of the qkv output, when the q/k norms change the dtype (see ``forward``).
    """

    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"dim {dim} is not divisible by num_heads {num_heads}")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=True)
        self.q_norm = nn.LayerNorm(self.head_dim, eps=LN_EPS)
        self.k_norm = nn.LayerNorm(self.head_dim, eps=LN_EPS)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, enc: Encoding) -> torch.Tensor:
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)
        if q.dtype != v.dtype:
            # The norms ran on float32 copies of q and k (CUDA autocast runs layer_norm in float32) and
            # saved those, so the v view would be all that keeps the qkv output (3 x v) alive for
            # backward once the attention saves v (RoPE's SDPA and the fused functions do): copy it.
            v = v.contiguous()
        o = enc.attend(q, k, v)
        return self.proj(o.transpose(1, 2).reshape(B, N, C))


class AggregatorBlock(nn.Module):
    """Pre-norm transformer block; ``forward(x (B, N, C), enc) -> (B, N, C)``.

    Named ``AggregatorBlock`` (not ``Block``, timm's DINOv2 block class) so that FSDP can select the
    aggregator blocks by class name (configs/accelerate/fsdp2.yaml)."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4.0, init_values: float = 0.01):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=LN_EPS)
        self.attn = Attention(dim, num_heads)
        self.ls1 = LayerScale(dim, init_values)
        self.norm2 = nn.LayerNorm(dim, eps=LN_EPS)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        self.ls2 = LayerScale(dim, init_values)

    def forward(self, x: torch.Tensor, enc: Encoding) -> torch.Tensor:
        x = x + self.ls1(self.attn(self.norm1(x), enc))
        return x + self.ls2(self.mlp(self.norm2(x)))
