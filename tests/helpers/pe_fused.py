"""The small configuration the fused-attention tests share (``tests/pe/test_pe_fused*.py``): B=1,
2 views of a 2x2 patch grid plus 1 special token, float64 inputs by default."""

from __future__ import annotations

import torch

from depthpe.pe import prepare_encoding
from tests.helpers.pe import random_cameras, random_qkv

B, H, S, NS, GRID = 1, 2, 2, 1, (2, 2)
T = NS + GRID[0] * GRID[1]
N = S * T


def prep(method, K, w2c, heads=H, **opts):
    """``method`` prepared for this configuration (28x28 px images) with encoding ``opts``."""
    return prepare_encoding(method, K=K, w2c=w2c, image_size=(28, 28), grid=GRID, num_special=NS, **opts)


def inputs(seed, d=16, heads=H, dtype=torch.float64):
    """(K (B,S,3,3), w2c (B,S,4,4), q, k, v (B,heads,N,d) requiring grad in ``dtype``) from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    K, w2c = random_cameras(B, S, g, trans=0.3)
    q, k, v = (x.to(dtype).requires_grad_() for x in random_qkv(B, heads, N, d, g))
    return K, w2c, q, k, v
