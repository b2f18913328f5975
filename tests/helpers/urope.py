"""Shapes, random inputs and a naive reference for the URoPE tests (docs/encodings.md), float64."""

from __future__ import annotations

import torch

from tests.helpers.pe import DT, GRID, IMAGE, random_cameras, random_qkv

B, H, S, NS = 2, 4, 3, 2
h, w = GRID
T = NS + h * w
N = S * T


def setup(seed, d=16, trans=0.3):
    """(generator, K (B,S,3,3) pixels, w2c (B,S,4,4) slightly rotated, q, k, v (B,H,N,d)) for ``seed``."""
    g = torch.Generator().manual_seed(seed)
    K, w2c = random_cameras(B, S, g, trans=trans)
    # small random rotations: cameras roughly face the same way, most projections are in front
    skew = 0.2 * torch.randn(B, S, 3, 3, generator=g, dtype=DT)
    w2c[..., :3, :3] = torch.linalg.matrix_exp(skew - skew.mT)
    q, k, v = random_qkv(B, H, N, d, g)
    return g, K, w2c, q, k, v


def naive_key_positions(K, w2c, anchors, eps=1e-3, clip=1.0):
    """(B, Sq, G, S*T, 2) (y, x) positions with offset 1, per (b, i, j, g) with explicit inverses."""
    Hi, Wi = IMAGE
    pw, ph = Wi / w, Hi / h
    G = len(anchors)
    out = torch.zeros(B, S, G, S, T, 2, dtype=DT)
    rr, cc = torch.meshgrid(torch.arange(h, dtype=DT), torch.arange(w, dtype=DT), indexing="ij")
    rr, cc = rr.reshape(-1), cc.reshape(-1)
    pix = torch.stack([(cc + 0.5) * pw - 0.5, (rr + 0.5) * ph - 0.5, torch.ones_like(cc)], 0)
    for b in range(B):
        for i in range(S):
            for j in range(S):
                for g, d_g in enumerate(anchors):
                    if i == j:
                        y, x = rr, cc
                    else:
                        Xj = d_g * torch.linalg.inv(K[b, j]) @ pix  # (3, n) camera-j points
                        Xw = torch.linalg.inv(w2c[b, j]) @ torch.cat([Xj, torch.ones(1, h * w, dtype=DT)])
                        p = K[b, i] @ (w2c[b, i] @ Xw)[:3]
                        z = p[2].clamp_min(eps * d_g)
                        x = ((p[0] / z + 0.5) / pw - 0.5).clamp(-clip * w, (1 + clip) * w)
                        y = ((p[1] / z + 0.5) / ph - 0.5).clamp(-clip * h, (1 + clip) * h)
                    out[b, i, g, j, NS:, 0] = y + 1
                    out[b, i, g, j, NS:, 1] = x + 1
    return out.flatten(3, 4)


def tiny_inputs():
    """images (1, 3, 3, 28, 42), K (1, 3, 3, 3) pixels, w2c (1, 3, 4, 4): three moving cameras."""
    torch.manual_seed(0)
    images = torch.rand(1, 3, 3, 28, 42)
    K = torch.tensor([[30.0, 0, 20.5], [0, 30.0, 13.5], [0, 0, 1]]).expand(1, 3, 3, 3).clone()
    w2c = torch.eye(4).repeat(1, 3, 1, 1)
    w2c[0, :, 0, 3] = torch.tensor([0.0, 0.4, -0.3])
    w2c[0, 2, 2, 3] = 0.2
    return images, K, w2c
