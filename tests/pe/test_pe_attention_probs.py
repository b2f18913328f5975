"""``Encoding.attention_probs``: the attention weights of the SDPA call in ``attend``, recomputed
for diagnostics (``depthpe probe attention``). For every preset, mixing the (transformed) values
with them reproduces ``attend``; the blockwise DPPE-tAdd weights are its two softmaxes weighted by
the value channels each mixes."""

from __future__ import annotations

import pytest
import torch

from depthpe.pe import prepare_encoding
from tests.helpers.pe import GRID, IMAGE, random_cameras, random_qkv

B, H, S, NS = 1, 4, 3, 2
T = NS + GRID[0] * GRID[1]
N = S * T
PRESETS = ["none", "rope", "prope", "dppe_dual", "dppe_tadd", "gta", "urope"]


def _case(method, d=48, **options):
    g = torch.Generator().manual_seed(3)
    K, w2c = random_cameras(B, S, g, trans=0.3)
    q, k, v = (x.double() for x in random_qkv(B, H, N, d, g))
    enc = prepare_encoding(method, K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=NS, **options)
    return enc, q, k, v


@pytest.mark.parametrize("method", PRESETS)
def test_probs_reproduce_attend(method):
    enc, q, k, v = _case(method)
    probs = enc.attention_probs(q, k)
    assert probs.shape == (B, H, N, N) and probs.dtype == torch.float32
    torch.testing.assert_close(probs.sum(-1), torch.ones(B, H, N), atol=1e-6, rtol=0)
    if method == "urope":  # no value transform; keys rotated per query view
        mixed = probs.double() @ v
    else:
        mixed = enc.transform_out(probs.double() @ enc.transform_v(v))
    torch.testing.assert_close(mixed, enc.attend(q, k, v), atol=2e-6, rtol=1e-5)


def test_blockwise_tadd_probs_weight_the_two_softmaxes_by_value_channels():
    enc, q, k, _ = _case("dppe_tadd", d=64, softmax="blockwise")
    w = enc.block_weights(q, k)
    ch = enc.channels(64, q.device)
    n_rot, n_trans = len(ch["v_rot"]), len(ch["v_trans"])
    assert n_rot + n_trans == 64 and n_trans > 0
    expected = (n_rot * w["rot"] + n_trans * w["trans"]).float() / 64
    torch.testing.assert_close(enc.attention_probs(q, k), expected)
    assert not torch.allclose(w["rot"], w["trans"])  # the mixture is not one of them


@pytest.mark.parametrize("method,options", [(m, {}) for m in PRESETS] + [("dppe_tadd", {"softmax": "blockwise"})])
def test_scores_are_the_log_weights_up_to_a_row_constant_and_slice_exactly(method, options):
    """``attention_scores``: a softmax over all keys gives ``attention_probs``; chosen rows and columns
    are exactly that block of the full matrix (queries of two views at once, out of order)."""
    enc, q, k, _ = _case(method, **options)
    full = enc.attention_scores(q, k)
    assert full.shape == (B, H, N, N)
    torch.testing.assert_close(full.softmax(-1).float(), enc.attention_probs(q, k), atol=1e-6, rtol=1e-5)
    rows, cols = torch.tensor([T + 3, 1, 2 * T + NS, NS]), torch.tensor([2 * T + NS + 1, NS, T + NS + 2])
    torch.testing.assert_close(enc.attention_scores(q, k, rows, cols), full[:, :, rows][..., cols])


def test_scores_carry_gradients():
    enc, q, k, _ = _case("prope")
    q.requires_grad_(True)
    enc.attention_scores(q, k, torch.tensor([NS]), torch.tensor([T + NS])).sum().backward()
    assert q.grad is not None and q.grad.abs().sum() > 0
