"""Inputs and outputs that pin every ``global_pe`` preset to its output before the composable
encodings existed (tests/pe/test_pe_presets_pinned.py).

``python -m tests.helpers.pe_preset_fixture`` rewrote ``tests/helpers/pe_presets_before.pt`` once, with the
code of commit b9c5e9b (before depthpe.pe.pairs); do not regenerate it with newer code.
"""

from __future__ import annotations

from pathlib import Path

import torch

from depthpe.pe import prepare_encoding
from tests.helpers.pe import random_cameras, random_qkv

FIXTURE = Path(__file__).parent / "pe_presets_before.pt"
IMAGE, GRID = (28, 42), (2, 3)  # (H, W) pixels, (h, w) patches
B, HEADS, S, NS = 1, 2, 3, 5
T = NS + GRID[0] * GRID[1]
# (case name, preset, options); every preset and every option that changes its numbers.
CASES = [
    ("none", "none", {}),
    ("rope", "rope", {}),
    ("prope", "prope", {}),
    ("gta", "gta", {}),
    ("gta_scale", "gta", {"translation_scale": 0.5}),
    ("dppe_dual", "dppe_dual", {}),
    ("dppe_tadd", "dppe_tadd", {}),
    ("dppe_tadd_blockwise", "dppe_tadd", {"softmax": "blockwise"}),
    ("urope", "urope", {"anchors": [0.7, 3.0]}),
]


def inputs(d: int, dtype: torch.dtype, seed: int = 0):
    """Cameras (float64) and q, k, v (B, heads, S*T, d) in ``dtype``, requiring grad."""
    g = torch.Generator().manual_seed(seed)
    K, w2c = random_cameras(B, S, g, image=IMAGE)
    q, k, v = (x.to(dtype).requires_grad_() for x in random_qkv(B, HEADS, S * T, d, g))
    weight = torch.randn(B, HEADS, S * T, d, generator=g, dtype=torch.float64).to(dtype)
    return K, w2c, q, k, v, weight


def run_case(method: str, options: dict, d: int, dtype: torch.dtype):
    """Output and gradients (of sum(out * weight)) w.r.t. q, k, v of one preset."""
    K, w2c, q, k, v, weight = inputs(d, dtype)
    enc = prepare_encoding(method, K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=NS,
                           patch_offset=1, **options)
    out = enc.attend(q, k, v)
    (out * weight).sum().backward()
    return {"out": out.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}


CONFIGS = [(48, torch.float64), (64, torch.float64), (48, torch.float32)]


def compute_all() -> dict:
    """{(case, d, dtype name): {"out", "dq", "dk", "dv"}} for ``CONFIGS`` (gradients for the first
    config only, to keep the file small)."""
    res = {}
    for name, method, opts in CASES:
        for d, dtype in CONFIGS:
            r = run_case(method, opts, d, dtype)
            res[(name, d, str(dtype))] = r if (d, dtype) == CONFIGS[0] else {"out": r["out"]}
    return res


if __name__ == "__main__":
    FIXTURE.parent.mkdir(exist_ok=True)
    torch.save(compute_all(), FIXTURE)
    print(f"wrote {FIXTURE}")
