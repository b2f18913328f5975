"""DPPE-tAdd as the paper's appendix A writes it: {qk: KRtAdd2d, vo: KRtAdd2d} with block-wise softmax.

The rotation attention weights depend on rotations (and intrinsics) only, the translation weights on
translations (and intrinsics) only; the dppe_tadd preset's blockwise option (split of PRoPE's logits)
does not have this property."""

from __future__ import annotations

import math

import pytest
import torch

from depthpe.geometry import normalize_intrinsics
from depthpe.pe import prepare_encoding
from depthpe.pe.dppe import tadd_appendix_channels
from tests.helpers.pe import random_cameras, random_qkv, random_rotations

IMAGE, GRID, NS, S = (28, 42), (2, 3), 5, 3
APPENDIX = {"qk": "KRtAdd2d", "vo": "KRtAdd2d"}


def weights(method, K, w2c, q, k, **opts):
    enc = prepare_encoding(method, K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=NS,
                           patch_offset=1, **opts)
    return enc.block_weights(q, k)


def setup(d, seed=0):
    g = torch.Generator().manual_seed(seed)
    K, w2c = random_cameras(1, S, g, image=IMAGE)
    q, k, _ = random_qkv(1, 2, S * (NS + 6), d, g)
    moved = w2c.clone()
    moved[..., :3, 3] += torch.randn(1, S, 3, generator=g, dtype=torch.float64)
    turned = w2c.clone()
    turned[..., :3, :3] = random_rotations(S, g).unsqueeze(0)
    return K, w2c, moved, turned, q, k


@pytest.mark.parametrize("d", [48, 64])
def test_rotation_weights_ignore_translations_and_vice_versa(d):
    K, w2c, moved, turned, q, k = setup(d)
    base = weights(APPENDIX, K, w2c, q, k, softmax="blockwise")
    after_t = weights(APPENDIX, K, moved, q, k, softmax="blockwise")
    after_r = weights(APPENDIX, K, turned, q, k, softmax="blockwise")
    torch.testing.assert_close(after_t["rot"], base["rot"], rtol=0, atol=1e-13)
    torch.testing.assert_close(after_r["trans"], base["trans"], rtol=0, atol=1e-13)
    assert (after_t["trans"] - base["trans"]).abs().max() > 1e-3
    assert (after_r["rot"] - base["rot"]).abs().max() > 1e-3


def test_preset_blockwise_rotation_weights_do_change_with_translation():
    """Why the appendix form is a separate pair: PRoPE's logits carry t in both blocks."""
    K, w2c, moved, _, q, k = setup(64)
    base = weights("dppe_tadd", K, w2c, q, k, softmax="blockwise")
    after_t = weights("dppe_tadd", K, moved, q, k, softmax="blockwise")
    assert (after_t["rot"] - base["rot"]).abs().max() > 1e-3


def test_appendix_output_matches_blockwise_formula():
    """o^r_i = K_i R_i sum_j a^R_ij (K_j R_j)^-1 v^r_j and o^s_i = g_i + sum_j a^t_ij (v^s_j - g_j),
    g_i = K_i t_i, with a^R, a^t the two softmaxes (dense, per token)."""
    d = 48
    K, w2c, _, _, q, k = setup(d, seed=5)
    v = torch.randn_like(q)
    enc = prepare_encoding(APPENDIX, K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=NS,
                           patch_offset=1, softmax="blockwise")
    out = enc.attend(q, k, v)
    a = enc.block_weights(q, k)
    Kn = normalize_intrinsics(K, IMAGE)[0]
    KR, g = Kn @ w2c[0, :, :3, :3], (Kn @ w2c[0, :, :3, 3:]).squeeze(-1)
    view = torch.arange(S).repeat_interleave(NS + 6)
    chunks = v[0].unflatten(-1, (d // 12 * 2, 6))[..., : d // 12, :]  # camera 6-chunks (heads, N, n, 6)
    vr = torch.einsum("nij,hnkj->hnki", torch.linalg.inv(KR)[view], chunks[..., :3])
    vs = chunks[..., 3:] - g[view][None, :, None, :]
    o_r = torch.einsum("nij,hnkj->hnki", KR[view], torch.einsum("hnm,hmki->hnki", a["rot"][0], vr))
    o_s = g[view][None, :, None, :] + torch.einsum("hnm,hmki->hnki", a["trans"][0], vs)
    got = out[0, :, :, : d // 2].unflatten(-1, (d // 12, 6))
    torch.testing.assert_close(got[..., :3], o_r, rtol=0, atol=1e-12)
    torch.testing.assert_close(got[..., 3:], o_s, rtol=0, atol=1e-12)
    assert math.isfinite(float(out.abs().max()))


@pytest.mark.parametrize("d", [48, 64, 80])
def test_appendix_split_covers_every_channel_and_passes_the_rest_through_the_rotation_softmax(d):
    """Where d/2 is no multiple of 6 (d = 64, 80), the (d/2) % 6 channels after the camera 6-chunks
    are rotation channels with no transform: the values split into rotation and translation slots
    without a gap, and the output there is the rotation softmax's average of v."""
    ch = tadd_appendix_channels(d)
    assert torch.equal(torch.sort(torch.cat([ch["v_rot"], ch["v_trans"]])).values, torch.arange(d))
    assert torch.equal(ch["qk_rot"], ch["v_rot"])
    rest = torch.arange(d // 2 // 6 * 6, d // 2)
    assert len(rest) == (d // 2) % 6 and torch.isin(rest, ch["qk_rot"]).all()
    K, w2c, _, _, q, k = setup(d, seed=6)
    v = torch.randn_like(q)
    enc = prepare_encoding(APPENDIX, K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=NS,
                           patch_offset=1, softmax="blockwise")
    out = enc.attend(q, k, v)
    torch.testing.assert_close(out[..., rest], enc.block_weights(q, k)["rot"] @ v[..., rest], rtol=0, atol=1e-12)
