"""The functional API ``depthpe.pe.multiview_attention`` and the registry of encodings."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from depthpe.pe import (
    Encoding,
    apply_rope_2d,
    available_encodings,
    multiview_attention,
    prepare_encoding,
    register_encoding,
    token_positions,
)
from depthpe.pe import registry
from depthpe.pe.spec import PRESET_PAIRS
from tests.helpers.pe import GRID, IMAGE, random_cameras, random_qkv, rel_err

B, H, S, NS = 2, 4, 3, 5
T = NS + GRID[0] * GRID[1]
N = S * T
ALL = ["none", "rope", "prope", "dppe_dual", "dppe_tadd", "gta", "urope"]


def data(seed=0, d=48):
    g = torch.Generator().manual_seed(seed)
    K, w2c = random_cameras(B, S, g, trans=0.3)
    return K, w2c, *random_qkv(B, H, N, d, g)


def test_all_methods_registered():
    assert set(ALL) <= set(available_encodings())
    assert available_encodings() == sorted(PRESET_PAIRS)  # one table of presets, nothing else


class _DoubledValues(Encoding):
    """A user encoding for the registry test: v <- 2 v."""

    def transform_v(self, v):
        return 2 * v


def test_users_register_their_own_encoding(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # undone after the test
    seen = {}

    @register_encoding("doubled")
    def make_doubled(**geometry):
        seen.update(geometry)
        return _DoubledValues()

    K, w2c, q, k, v = data(4)
    out = multiview_attention(q, k, v, method="doubled", K=K, w2c=w2c, image_size=IMAGE, grid=GRID,
                              num_special=NS)
    assert "doubled" in available_encodings() and seen["num_views"] == S and seen["grid"] == GRID
    assert torch.equal(out, F.scaled_dot_product_attention(q, k, 2 * v))
    for taken in ("doubled", "prope"):
        with pytest.raises(ValueError, match="already registered"):
            register_encoding(taken)(make_doubled)


@pytest.mark.parametrize("method", ALL)
def test_functional_equals_prepare_then_attend(method):
    K, w2c, q, k, v = data()
    out = multiview_attention(q, k, v, method=method, K=K, w2c=w2c, image_size=IMAGE, grid=GRID,
                              num_special=NS, patch_offset=1)
    enc = prepare_encoding(method, K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=NS,
                           patch_offset=1)
    assert out.shape == q.shape and torch.isfinite(out).all()
    assert torch.equal(out, enc.attend(q, k, v))


def test_rope_is_vggt_rope_and_none_is_plain_sdpa():
    _, _, q, k, v = data(1)
    pos = token_positions(S, GRID, NS, 1, dtype=q.dtype)
    ref = F.scaled_dot_product_attention(apply_rope_2d(q, pos), apply_rope_2d(k, pos), v)
    out = multiview_attention(q, k, v, method="rope", image_size=IMAGE, grid=GRID, num_special=NS)
    assert torch.equal(out, ref)
    plain = multiview_attention(q, k, v, method="none", image_size=IMAGE, grid=GRID, num_special=NS)
    assert torch.equal(plain, F.scaled_dot_product_attention(q, k, v))


def test_patch_offset_changes_only_relative_special_patch_positions():
    K, w2c, q, k, v = data(2)
    kw = dict(method="prope", K=K, w2c=w2c, image_size=IMAGE, grid=GRID)
    a = multiview_attention(q, k, v, num_special=NS, patch_offset=0, **kw)
    b = multiview_attention(q, k, v, num_special=NS, patch_offset=1, **kw)
    assert rel_err(a, b) > 1e-6  # special tokens stay at 0, patches move
    tok = torch.cat([torch.arange(s * T + NS, (s + 1) * T) for s in range(S)])  # patches only
    qp, kp, vp = (x[:, :, tok] for x in (q, k, v))
    a = multiview_attention(qp, kp, vp, num_special=0, patch_offset=0, **kw)
    b = multiview_attention(qp, kp, vp, num_special=0, patch_offset=3, **kw)
    assert rel_err(a, b) < 1e-12  # without special tokens only differences of positions matter


def test_functional_errors():
    K, w2c, q, k, v = data(3)
    kw = dict(K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=NS)
    with pytest.raises(ValueError, match="unknown method"):
        multiview_attention(q, k, v, method="alibi", **kw)
    with pytest.raises(ValueError, match="equal shapes"):
        multiview_attention(q, k[:, :, :-1], v, method="prope", **kw)
    per_view = NS + GRID[0] * GRID[1]
    with pytest.raises(ValueError, match=f"^{q.shape[2] - 1} tokens is not a multiple of {per_view} tokens per view$"):
        multiview_attention(q[:, :, :-1], k[:, :, :-1], v[:, :, :-1], method="rope",
                            image_size=IMAGE, grid=GRID, num_special=NS)
    with pytest.raises(ValueError, match="tokens"):
        multiview_attention(q, k, v, method="urope", K=K, w2c=w2c, image_size=IMAGE, grid=(2, 2))


def test_float32_inputs_give_float32_outputs_and_match_float64():
    K, w2c, q, k, v = data(4)
    for method in ALL[2:]:
        kw = dict(method=method, K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=NS)
        o32 = multiview_attention(q.float(), k.float(), v.float(), **kw)
        o64 = multiview_attention(q, k, v, **kw)
        assert o32.dtype == torch.float32
        assert rel_err(o32.double(), o64) < 1e-4, method
