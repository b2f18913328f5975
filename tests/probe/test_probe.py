"""Correspondence diagnostics (``depthpe.probe``, docs/probe.md).

The hand-built case: two views of 14 x 42 pixels (one row of three 14-px patches), a fronto-parallel
plane at depth 2 seen by camera 0 at the origin and camera 1 moved by 0.5 along +x, focal length
56 px: every point shifts by f b / Z = 14 px = one patch to the left in view 1. So patch c of view
0 matches patch c - 1 of view 1 (c = 0 falls outside) and patch c of view 1 matches patch c + 1 of
view 0 (c = 2 falls outside): four matches, whose lift the tests compute by hand.
"""

from __future__ import annotations

import math

import pytest
import torch

from depthpe import DepthModel
from depthpe.probe.capture import capture_global_attention
from depthpe.geometry import patch_matches
from depthpe.probe.lift import LiftAccumulator
from tests.helpers.probe import GRID, NS, hand_probs, two_views





def test_hand_built_matches_and_the_depth_test():
    m = patch_matches(*two_views(), GRID)
    assert m.ok[0, 0, :, 1].tolist() == [False, True, True]  # view 0 -> view 1
    assert m.ok[0, 1, :, 0].tolist() == [True, True, False]  # view 1 -> view 0
    assert not m.ok[0, 0, :, 0].any() and not m.ok[0, 1, :, 1].any()  # never the own view
    assert m.target[0, 0, 1:, 1].tolist() == [[0, 0], [0, 1]]
    assert m.target[0, 1, :2, 0].tolist() == [[0, 1], [0, 2]]
    torch.testing.assert_close(m.depth[m.ok], torch.full((4,), 2.0, dtype=torch.float64))
    occluded = patch_matches(*two_views(occlude_target_of_last_patch=True), GRID)
    assert occluded.ok[0, 0, :, 1].tolist() == [False, True, False]  # (0, c2)'s point is hidden in view 1
    assert occluded.ok[0, 1].sum() == 2  # view 1's own patch depths (medians) are unchanged




def test_hand_built_lift():
    acc = LiftAccumulator(radii=(0, 1))
    acc.start(patch_matches(*two_views(), GRID), NS)
    acc.add(0, hand_probs())
    rows = {(r["head"], r["radius"]): r for r in acc.lift_rows()}
    # r = 0: three matches get 1/8 (uniform), the special query 0.65; uniform mass 1/8 per match.
    assert rows[0, 0]["lift"] == pytest.approx((3 / 8 + 0.65) / (4 / 8))  # 2.05
    # r = 1 (3-patch windows clipped at the border: sizes 2, 3, 3, 2): masses 2/8, 0.65 + 2 * 0.05, 3/8, 2/8.
    assert rows[0, 1]["lift"] == pytest.approx((2 / 8 + 0.75 + 3 / 8 + 2 / 8) / (10 / 8))  # 1.3
    assert rows[1, 0]["lift"] == pytest.approx(1.0) and rows[1, 1]["lift"] == pytest.approx(1.0)
    assert rows[0, 0]["mass"] == pytest.approx((3 / 8 + 0.65) / 4) and rows[0, 0]["pairs"] == 4
    # controls: the query's own position in the other view (0.05 for the special query), all of view j
    assert rows[0, 0]["same_position_lift"] == pytest.approx((3 / 8 + 0.05) / (4 / 8))
    assert rows[0, 0]["view_lift"] == pytest.approx((3 * 3 / 8 + 0.75) / (4 * 3 / 8))
    layer = {r["radius"]: r for r in acc.layer_rows()}
    assert layer[0]["lift"] == pytest.approx((2.05 + 1.0) / 2) and layer[0]["best_head"] == 0
    assert acc.scalars()["lift_r0_layer0"] == pytest.approx(1.525)


def test_lift_without_matches_is_nan_not_an_error():
    depth, valid, K, w2c = two_views()
    acc = LiftAccumulator()
    acc.start(patch_matches(depth, torch.zeros_like(valid), K, w2c, GRID), NS)
    acc.add(0, hand_probs())
    assert all(math.isnan(r["lift"]) for r in acc.lift_rows()) and acc.scalars()["pairs"] == 0


def test_urope_anchor_bins_say_which_head_group_wins():
    """Anchors 1.5 and 6: every match (depth 2) is nearest anchor 0, whose head group (head 0) has
    the correspondence; anchor 1's bin is empty."""
    acc = LiftAccumulator(radii=(0,), anchors=[1.5, 6.0])
    acc.start(patch_matches(*two_views(), GRID), NS)
    acc.add(0, hand_probs(), groups=2)
    rows = acc.anchor_rows(min_pairs=1)
    assert [r["pairs"] for r in rows] == [4, 0]
    assert rows[0]["group_lift"] == pytest.approx([2.05, 1.0]) and rows[0]["winner"] == 0
    assert rows[0]["own_wins"] is True and rows[1]["own_wins"] is None
    assert acc.anchor_rows()[0]["own_wins"] is None  # 4 matches are too few by default
    other = LiftAccumulator(radii=(0,), anchors=[1.5, 6.0])
    other.start(patch_matches(*two_views(), GRID), NS)
    other.add(0, hand_probs(), groups=1)  # an encoding without one head group per anchor
    assert other.anchor_rows(min_pairs=1) == []


# -- the capture on a real model -------------------------------------------------------------------
def _tiny(global_pe: str, **config) -> DepthModel:
    torch.manual_seed(0)
    return DepthModel.from_preset("tiny", global_pe=global_pe, num_blocks=2, head_layers=[0, 0, 1, 1],
                                  layerscale_init=1.0, **config).eval()


def _inputs():
    from tests.helpers.inputs import moving_camera_inputs

    return moving_camera_inputs(S=3)


@pytest.mark.parametrize("global_pe", ["prope", "urope", "dppe_tadd"])
def test_capture_leaves_outputs_bit_identical_and_sees_every_layer(global_pe):
    model = _tiny(global_pe)
    inputs = _inputs()
    with torch.no_grad():
        before = model(*inputs)
        seen = []
        with capture_global_attention(model, lambda i, probs, enc: seen.append((i, probs, enc))):
            during = model(*inputs)
        after = model(*inputs)
    for key in ("depth", "conf"):
        assert torch.equal(during[key], before[key]) and torch.equal(after[key], before[key])
    assert [i for i, _, _ in seen] == [0, 1]
    n = 3 * (model.config.num_special_tokens + 2)  # 3 views of 14 x 28 px: 1 x 2 patches
    for _, probs, enc in seen:
        assert probs.shape == (1, model.config.num_heads, n, n)
        torch.testing.assert_close(probs.sum(-1), torch.ones(probs.shape[:-1]))
    assert not any(b.attn._forward_pre_hooks for b in model.aggregator.global_blocks)


def test_capture_hands_over_the_weights_of_the_layer():
    """The captured weights are softmax(q' k'^T / sqrt(d)) of the q and k the block computed: mixing
    the layer's values with them gives the attention output the block used."""
    model = _tiny("rope")
    attn = model.aggregator.global_blocks[1].attn
    got = {}

    def keep_inputs(module, args):
        got["x"] = args[0]

    def keep_output(module, args, out):
        got["out"] = out

    handles = [attn.register_forward_pre_hook(keep_inputs), attn.register_forward_hook(keep_output)]
    with torch.no_grad(), capture_global_attention(model, lambda i, p, e: got.setdefault(i, p)):
        model(*_inputs())
    for handle in handles:
        handle.remove()
    x = got["x"]
    B, Ntok, C = x.shape
    qkv = attn.qkv(x).reshape(B, Ntok, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4)
    v = qkv[2]
    mixed = (got[1] @ v).transpose(1, 2).reshape(B, Ntok, C)
    torch.testing.assert_close(attn.proj(mixed), got["out"], atol=1e-5, rtol=1e-4)


def test_no_graph_break_with_capture_off():
    """After a capture (hooks removed), the ordinary training forward compiles to one graph, no break."""
    inputs = _inputs()
    model = _tiny("prope")
    with torch.no_grad(), capture_global_attention(model, lambda *a: None):
        model(*inputs)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model.train())(*inputs)
    assert explained.graph_break_count == 0 and explained.graph_count == 1


@pytest.mark.slow
def test_compiled_graph_is_the_same_with_or_without_a_capture_before():
    inputs = _inputs()
    torch._dynamo.reset()
    model = _tiny("urope").train()
    plain = torch._dynamo.explain(model)(*inputs)
    with torch.no_grad(), capture_global_attention(model, lambda *a: None):
        model.eval()(*inputs)
    torch._dynamo.reset()
    again = torch._dynamo.explain(model.train())(*inputs)
    assert again.graph_break_count == 0 and again.graph_count == 1
    assert [[str(op) for op in ops] for ops in again.ops_per_graph] == [[str(op) for op in ops]
                                                                     for ops in plain.ops_per_graph]
