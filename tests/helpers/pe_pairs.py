"""Composable {qk, vo} encodings against the official DPPE formulas (tests/helpers/dppe_official_reference.py)."""

from __future__ import annotations

import torch

from depthpe.pe import multiview_attention, prepare_encoding
from tests.helpers import dppe_official_reference as ref
from tests.helpers.pe import random_cameras, random_qkv

IMAGE, GRID, S = (28, 42), (2, 3), 2


def compare_pair(qk: str, vo: str, d: int, num_special: int, seed: int = 0) -> float:
    """Max |depthpe - reference| over q', k', v', transform_out and the attention output (float64)."""
    g = torch.Generator().manual_seed(seed)
    K, w2c = random_cameras(1, S, g, image=IMAGE)
    N = S * (num_special + GRID[0] * GRID[1])
    q, k, v = random_qkv(1, 2, N, d, g)
    pair = {"qk": qk, "vo": vo}
    geom = dict(image_size=IMAGE, grid=GRID, num_special=num_special, patch_offset=0)
    enc = prepare_encoding(pair, K=K, w2c=w2c, **geom)
    qt, kt, vt, out = ref.attention(q, k, v, qk, vo, K, w2c, IMAGE, GRID, num_special)
    got = multiview_attention(q, k, v, method=pair, K=K, w2c=w2c, **geom)
    o_ref = ref.transform(v, vo, "o", ref.intrinsics_normalized(K, *IMAGE), w2c, GRID, num_special)
    pairs = [(enc.transform_q(q), qt), (enc.transform_k(k), kt), (enc.transform_v(v), vt),
             (enc.transform_out(v), o_ref), (got, out)]
    return max(float((a - b).abs().max()) for a, b in pairs)
