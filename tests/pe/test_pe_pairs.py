"""Composable {qk, vo} encodings: equal to the official DPPE formulas (tests/helpers/dppe_official_reference.py)
for every pair of the official transforms; presets are named pairs; bad pairs are refused."""

from __future__ import annotations

import pytest
import torch

from depthpe.pe.spec import OFFICIAL_TRANSFORMS, PRESET_PAIRS, encoding_pair
from depthpe.pe import check_encoding_cameras, multiview_attention, prepare_encoding
from tests.helpers import dppe_official_reference as ref
from tests.helpers.pe import random_cameras, random_qkv
from tests.helpers.pe_pairs import GRID, IMAGE, S, compare_pair


@pytest.mark.parametrize("d,num_special", [(48, 0), (48, 5), (64, 0), (64, 5)])
@pytest.mark.parametrize("qk", OFFICIAL_TRANSFORMS)
def test_every_pair_equals_official_formulas(qk, d, num_special):
    for vo in OFFICIAL_TRANSFORMS:
        assert compare_pair(qk, vo, d, num_special) < 1e-10, (qk, vo)


def test_reference_is_not_trivially_equal():
    """A wrong sign or swapped RoPE axes in the reference would be noticed (sanity of the harness)."""
    g = torch.Generator().manual_seed(1)
    K, w2c = random_cameras(1, S, g, image=IMAGE)
    q = random_qkv(1, 1, S * 6, 48, g)[0]
    a = ref.transform(q, "p2d", "q", ref.intrinsics_normalized(K, *IMAGE), w2c, GRID, 0)
    b = ref.transform(q, "pT2d", "q", ref.intrinsics_normalized(K, *IMAGE), w2c, GRID, 0)
    assert (a - b).abs().max() > 1e-3 and (a - q).abs().max() > 1e-3


@pytest.mark.parametrize("preset", ["none", "prope", "gta", "dppe_dual", "dppe_tadd", "rope"])
def test_preset_is_its_named_pair_bit_for_bit(preset):
    g = torch.Generator().manual_seed(2)
    K, w2c = random_cameras(2, 3, g, image=IMAGE)
    q, k, v = random_qkv(2, 2, 3 * 11, 64, g, dtype=torch.float32)
    geom = dict(K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=5)
    qk, vo = PRESET_PAIRS[preset]
    a = multiview_attention(q, k, v, method=preset, **geom)
    b = multiview_attention(q, k, v, method={"qk": qk, "vo": vo}, **geom)
    assert torch.equal(a, b)


def test_urope_pair_is_the_urope_preset():
    g = torch.Generator().manual_seed(3)
    K, w2c = random_cameras(1, 2, g, image=IMAGE)
    q, k, v = random_qkv(1, 4, 2 * 11, 32, g)
    geom = dict(K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=5)
    a = multiview_attention(q, k, v, method="urope", **geom)
    assert torch.equal(a, multiview_attention(q, k, v, method={"qk": "urope", "vo": "none"}, **geom))


@pytest.mark.parametrize("preset", sorted(PRESET_PAIRS))
def test_preset_takes_the_options_of_its_pair(preset):
    """A preset is its pair and nothing else, options included: ``rope_base`` (or its older name
    ``base``) reaches every RoPE, and an unknown option is refused for every preset alike."""
    g = torch.Generator().manual_seed(4)
    K, w2c = random_cameras(1, 2, g, image=IMAGE)
    q, k, v = random_qkv(1, 4, 2 * 11, 32, g)
    geom = dict(K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=5)
    pair = dict(zip(("qk", "vo"), PRESET_PAIRS[preset]))
    a = multiview_attention(q, k, v, method=preset, rope_base=30.0, **geom)
    assert torch.equal(a, multiview_attention(q, k, v, method=pair, rope_base=30.0, **geom))
    assert torch.equal(a, multiview_attention(q, k, v, method=preset, base=30.0, **geom))
    if preset != "none":  # plain attention has no RoPE to change
        assert not torch.equal(a, multiview_attention(q, k, v, method=preset, **geom))
    with pytest.raises(TypeError, match="not_an_option"):
        prepare_encoding(preset, not_an_option=1, **geom)


@pytest.mark.parametrize("bad", [{"qk": "KRt", "vo": "p2d"}, {"qk": "p2d"}, {"qk": "urope", "vo": "p2d"},
                                 {"qk": "p2d", "vo": "vggt2d"}, "p2d", 3])
def test_bad_pairs_name_the_valid_pairs(bad):
    with pytest.raises(ValueError, match="valid pairs") as err:
        encoding_pair(bad)
    assert "\n" not in str(err.value) and "KRtAdd2d" in str(err.value)


def test_pair_option_errors():
    g = torch.Generator().manual_seed(4)
    K, w2c = random_cameras(1, 2, g, image=IMAGE)
    geom = dict(K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=0)
    with pytest.raises(ValueError, match="blockwise"):
        prepare_encoding({"qk": "p2d", "vo": "p2d"}, softmax="blockwise", **geom)
    with pytest.raises(ValueError, match="translation_scale"):
        prepare_encoding({"qk": "p2d", "vo": "p2d"}, translation_scale=0.5, **geom)
    with pytest.raises(ValueError, match="divisible by 8"):
        enc = prepare_encoding({"qk": "p2d", "vo": "none"}, **geom)
        enc.transform_q(torch.zeros(1, 1, 2 * 6, 44, dtype=torch.float64))
    enc = prepare_encoding({"qk": "2d", "vo": "p"}, **geom)  # whole-head layouts need d % 4 only
    assert enc.transform_q(torch.zeros(1, 1, 2 * 6, 44, dtype=torch.float64)).shape[-1] == 44
    # Camera-free pairs need no cameras.
    free = prepare_encoding({"qk": "2d", "vo": "2d"}, image_size=IMAGE, grid=GRID, num_views=2)
    assert free.transform_v(torch.ones(3, 1, 12, 8)).shape == (3, 1, 12, 8)


def test_pair_options_each_pair_understands():
    """``translation_scale`` is taken by a pair with Rt (no 2d) on one side only, and changes its
    output; ``rope_base`` and its older name ``base`` together are refused; the blockwise softmax
    is taken by the appendix pair {KRtAdd2d, KRtAdd2d}."""
    g = torch.Generator().manual_seed(5)
    K, w2c = random_cameras(1, 2, g, image=IMAGE)
    q, k, v = random_qkv(1, 2, 2 * 6, 16, g)
    geom = dict(K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=0)
    pair = {"qk": "Rt", "vo": "none"}
    scaled = multiview_attention(q, k, v, method=pair, translation_scale=0.5, **geom)
    assert not torch.equal(scaled, multiview_attention(q, k, v, method=pair, **geom))
    with pytest.raises(ValueError, match=r"^qk=p2d,vo=none: give rope_base or its older name base, not both$"):
        prepare_encoding({"qk": "p2d", "vo": "none"}, rope_base=50.0, base=50.0, **geom)
    with pytest.raises(ValueError, match=r"needs vo KRtAdd2d and qk KRtAdd2d \(the paper's appendix A\) or p2d"):
        prepare_encoding({"qk": "KRtAdd2d", "vo": "p2d"}, softmax="blockwise", **geom)
    assert prepare_encoding({"qk": "KRtAdd2d", "vo": "KRtAdd2d"}, softmax="blockwise", **geom) is not None


def test_the_cameras_a_pair_needs_are_the_cameras_it_reads():
    """K is required when either side reads intrinsics (here only vo: p), and not otherwise: a pair
    of Rt and 2d is prepared and checked with w2c alone, equal to the same pair given K too."""
    g = torch.Generator().manual_seed(6)
    K, w2c = random_cameras(1, 2, g, image=IMAGE)
    q, k, v = random_qkv(1, 2, 2 * 6, 16, g)
    geom = dict(image_size=IMAGE, grid=GRID, num_special=0)
    with pytest.raises(ValueError, match="K="):
        check_encoding_cameras({"qk": "none", "vo": "p"}, None, w2c)
    with pytest.raises(ValueError, match="K="):
        prepare_encoding({"qk": "none", "vo": "p"}, K=None, w2c=w2c, **geom)
    check_encoding_cameras({"qk": "Rt", "vo": "2d"}, None, w2c)  # reads no K: nothing to refuse
    without_K = multiview_attention(q, k, v, method={"qk": "Rt", "vo": "2d"}, K=None, w2c=w2c, **geom)
    assert torch.equal(without_K, multiview_attention(q, k, v, method={"qk": "Rt", "vo": "2d"}, K=K, w2c=w2c, **geom))


def test_an_unknown_encoding_names_the_available_ones():
    g = torch.Generator().manual_seed(7)
    K, w2c = random_cameras(1, 2, g, image=IMAGE)
    with pytest.raises(ValueError, match=r"^unknown positional encoding 'ropee'; available: .*\bprope, rope, urope\b"
                                         r".* or a pair \{qk: NAME, vo: NAME\}$"):
        prepare_encoding("ropee", K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=0)
