"""``depthpe.model.blocks``: an aggregator block computes VGGT's pre-norm block, written out here op by
op (so a sign, a scale or a transposed axis in the block is noticed, which loading VGGT-1B's weights
would not show), and its initialisation."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from depthpe.model.blocks import AggregatorBlock, Attention, init_linear
from depthpe.pe.base import Encoding


def _randomized(block: AggregatorBlock, seed: int) -> AggregatorBlock:
    """Every parameter random (LayerScale gammas and norm weights included), float64."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=g, dtype=torch.float64) + (1.0 if p.ndim == 1 else 0.0))
    return block


def _reference_block(block: AggregatorBlock, x: torch.Tensor, heads: int) -> torch.Tensor:
    """x + g1 * proj(softmax(q' k'^T / sqrt(d)) v), q' = LN_q(q), k' = LN_k(k) per head, then
    + g2 * fc2(gelu(fc1(LN2(.)))), every LayerNorm with eps 1e-5."""
    B, N, C = x.shape
    d = C // heads
    a = block.attn
    h = F.layer_norm(x, (C,), block.norm1.weight, block.norm1.bias, 1e-5)
    q, k, v = F.linear(h, a.qkv.weight, a.qkv.bias).split(C, dim=-1)
    q, k, v = (t.view(B, N, heads, d).transpose(1, 2) for t in (q, k, v))
    q = F.layer_norm(q, (d,), a.q_norm.weight, a.q_norm.bias, 1e-5)
    k = F.layer_norm(k, (d,), a.k_norm.weight, a.k_norm.bias, 1e-5)
    weights = (q @ k.transpose(-1, -2) / math.sqrt(d)).softmax(-1)
    o = (weights @ v).transpose(1, 2).reshape(B, N, C)
    x = x + block.ls1.gamma * F.linear(o, a.proj.weight, a.proj.bias)
    h = F.layer_norm(x, (C,), block.norm2.weight, block.norm2.bias, 1e-5)
    m = F.linear(F.gelu(F.linear(h, block.mlp.fc1.weight, block.mlp.fc1.bias)), block.mlp.fc2.weight, block.mlp.fc2.bias)
    return x + block.ls2.gamma * m


def test_block_computes_the_pre_norm_block_formula():
    heads, C = 3, 12
    block = _randomized(AggregatorBlock(C, heads).double(), seed=0)
    x = torch.randn(2, 7, C, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(block(x, Encoding()), _reference_block(block, x, heads), rtol=0, atol=1e-12)


def test_a_fresh_block_starts_near_the_identity_with_vit_initialisation():
    """LayerScale gammas start at 0.01 (VGGT's init_values), Linear biases at zero and weights at
    std 0.02; a dim the heads do not divide is refused with both numbers."""
    torch.manual_seed(2)
    block = AggregatorBlock(64, 4)
    block.apply(init_linear)
    assert torch.equal(block.ls1.gamma, torch.full((64,), 0.01)) and torch.equal(block.ls2.gamma, block.ls1.gamma)
    assert not block.attn.qkv.bias.any() and not block.mlp.fc2.bias.any()
    assert 0.015 < float(block.mlp.fc1.weight.detach().std()) < 0.025
    with pytest.raises(ValueError, match="dim 10 is not divisible by num_heads 4"):
        Attention(10, 4)
