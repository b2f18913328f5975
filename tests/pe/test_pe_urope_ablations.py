"""URoPE's ablation options (docs/encodings.md): anchor count and placement, head- vs channel-wise
assignment, learnable per-layer anchors. Each equals today's URoPE at today's values, bit for bit."""

from __future__ import annotations

import contextlib
import math

import pytest
import torch

from depthpe.pe import apply_rope_2d, encoding_state, prepare_encoding, token_positions
from depthpe.pe.urope import LearnableAnchors, default_anchors, resolve_anchors
from tests.helpers.pe import GRID, IMAGE, rel_err
from tests.helpers.urope import NS, S, T, naive_key_positions, setup, tiny_inputs

TODAY = dict(num_anchors=4, anchor_near=0.5, anchor_far=8.0, anchor_spacing="log", anchor_assignment="heads",
             learnable_anchors=False)


def prep(K, w2c, **opts):
    return prepare_encoding("urope", K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=NS,
                            patch_offset=1, **opts)


def outputs_and_grads(enc, q, k, v, traced=False):
    qkv = [t.clone().requires_grad_() for t in (q, k, v)]
    out = enc._attend_traced(*qkv, 0.0) if traced else enc.attend(*qkv)
    return out, torch.autograd.grad(out.square().sum(), qkv)


def assert_bit_identical(a, b):
    (out_a, grads_a), (out_b, grads_b) = a, b
    assert torch.equal(out_a, out_b)
    assert all(torch.equal(x, y) for x, y in zip(grads_a, grads_b))


@pytest.mark.parametrize("traced", [False, True])
def test_todays_values_are_bit_identical_to_the_defaults(traced):
    _, K, w2c, q, k, v = setup(20)
    ref = outputs_and_grads(prep(K, w2c), q, k, v, traced)
    for opts in (TODAY, {"anchors": default_anchors()}, {"anchor_assignment": "heads"}):
        assert_bit_identical(outputs_and_grads(prep(K, w2c, **opts), q, k, v, traced), ref)
    other = outputs_and_grads(prep(K, w2c, anchor_spacing="depth"), q, k, v, traced)
    assert not torch.equal(other[0], ref[0])  # the options do reach the encoding


def test_anchor_placement():
    assert default_anchors(4, 0.5, 8.0, "depth") == pytest.approx([0.5, 3.0, 5.5, 8.0])
    assert default_anchors(4, 0.5, 8.0, "inverse_depth") == pytest.approx([0.5, 1 / 1.375, 1 / 0.75, 8.0])
    assert default_anchors(1, 0.5, 8.0, "log") == pytest.approx([2.0])  # geometric mean
    assert default_anchors(1, 0.5, 8.0, "depth") == pytest.approx([4.25])  # arithmetic mean
    assert default_anchors(1, 0.5, 8.0, "inverse_depth") == pytest.approx([2 / (2 + 1 / 8)])  # harmonic
    _, K, w2c, q, k, v = setup(21, d=32)
    q8, k8, v8 = (t.repeat(1, 2, 1, 1) for t in (q, k, v))  # 8 heads
    for num in (1, 2, 4, 8):
        enc = prep(K, w2c, num_anchors=num)
        assert enc.G == num and enc.key_pos.shape[2] == num
        assert torch.isfinite(enc.attend(q8, k8, v8)).all()
    with pytest.raises(ValueError, match="not both"):
        prep(K, w2c, anchors=[1.0], num_anchors=1)
    with pytest.raises(ValueError, match="anchor_spacing"):
        prep(K, w2c, anchor_spacing="linear")
    with pytest.raises(ValueError, match="anchor_near <= anchor_far"):
        prep(K, w2c, anchor_near=2.0, anchor_far=1.0)
    with pytest.raises(ValueError, match="anchor_assignment"):
        prep(K, w2c, anchor_assignment="tokens")


@pytest.mark.parametrize("opts, message", [
    (dict(num_anchors=0), r"num_anchors >= 1 and 0 < anchor_near <= anchor_far, got 0, 0.5, 8.0"),
    (dict(num_anchors=2.0), r"num_anchors >= 1 .*got 2.0, 0.5, 8.0"),
    (dict(anchor_near=0.0), r"0 < anchor_near .*got 4, 0.0, 8.0"),
    (dict(anchor_far=float("inf")), r"got 4, 0.5, inf"),
    (dict(anchors=[1.0, 0.0]), r"urope anchors must be a non-empty list of positive depths, got \[1.0, 0.0\]"),
    (dict(anchors=[]), r"non-empty list of positive depths, got \[\]"),
    (dict(anchors=[1.0], anchor_far=4.0, anchor_near=1.0), r"give anchors or \['anchor_far', 'anchor_near'\], not both"),
])
def test_bad_anchor_options_are_named_in_the_error(opts, message):
    """Each of URoPE's anchor options refused on its own, the message saying which values it got."""
    _, K, w2c, *_ = setup(22)
    with pytest.raises(ValueError, match=message):
        prep(K, w2c, **opts)


def test_anchors_at_near_equal_to_far_are_allowed():
    _, K, w2c, *_ = setup(23)
    assert resolve_anchors(num_anchors=2, anchor_near=2.0, anchor_far=2.0) == pytest.approx([2.0, 2.0])
    assert prep(K, w2c, num_anchors=1, anchor_near=2.0, anchor_far=2.0).G == 1


def naive_channelwise(q, k, v, K, w2c, anchors):
    """Every head uses anchor m mod A on the rotate-half pair of frequency m (both axes)."""
    d = q.shape[-1]
    kpos = naive_key_positions(K, w2c, anchors)  # (B, Sq, A, N, 2)
    qpos = token_positions(S, GRID, NS, 1, dtype=q.dtype)
    channel = torch.arange(d)
    anchor_of_channel = ((channel % (d // 2)) % (d // 4)) % len(anchors)
    out = torch.zeros_like(q)
    for i in range(S):
        rows = slice(i * T, (i + 1) * T)
        qr = apply_rope_2d(q[:, :, rows], qpos[rows])
        per_anchor = torch.stack([apply_rope_2d(k, kpos[:, i, a, None]) for a in range(len(anchors))])
        kr = per_anchor.gather(0, anchor_of_channel.expand(1, *k.shape)).squeeze(0)
        logits = qr @ kr.mT / math.sqrt(d)
        out[:, :, rows] = logits.softmax(-1) @ v
    return out


@pytest.mark.parametrize("traced", [False, True])
def test_channelwise_matches_naive_reference(traced):
    anchors = [0.7, 3.0]
    _, K, w2c, q, k, v = setup(22)
    enc = prep(K, w2c, anchors=anchors, anchor_assignment="channels")
    assert enc.G == 1 and enc.num_anchors == 2
    got = enc._attend_traced(q, k, v, 0.0) if traced else enc.attend(q, k, v)
    assert rel_err(got, naive_channelwise(q, k, v, K, w2c, anchors)) < 1e-12
    assert rel_err(got, prep(K, w2c, anchors=anchors).attend(q, k, v)) > 1e-4  # not head-wise
    cached = prep(K, w2c, anchors=anchors, anchor_assignment="channels", cache_tables=True, view_chunk=2)
    assert rel_err(cached.attend(q, k, v), got) < 1e-13


def test_channelwise_with_three_anchors_matches_naive_reference():
    """Head dim 24 (6 frequencies per axis) and 3 anchors: frequency m takes anchor m mod 3, the
    same m on both axes (an index taken mod d/6 instead of d/4 would not be)."""
    anchors = [0.7, 1.5, 3.0]
    _, K, w2c, q, k, v = setup(24, d=24)
    enc = prep(K, w2c, anchors=anchors, anchor_assignment="channels")
    assert rel_err(enc.attend(q, k, v), naive_channelwise(q, k, v, K, w2c, anchors)) < 1e-12


def test_channelwise_with_one_anchor_is_headwise_and_errors():
    _, K, w2c, q, k, v = setup(23)
    assert_bit_identical(outputs_and_grads(prep(K, w2c, num_anchors=1, anchor_assignment="channels"), q, k, v),
                         outputs_and_grads(prep(K, w2c, num_anchors=1), q, k, v))
    with pytest.raises(ValueError, match="head_dim / 4 = 4 to be a multiple"):
        prep(K, w2c, num_anchors=8, anchor_assignment="channels").attend(q, k, v)  # head dim 16


def test_learnable_anchors_start_at_the_fixed_ones_bit_for_bit():
    state = LearnableAnchors(default_anchors(), num_layers=3)
    assert state.log_scale.shape == (3, 4) and not state.log_scale.any()
    assert torch.equal(state(2), torch.tensor(default_anchors(), dtype=torch.float64))
    assert encoding_state("urope", 3, **TODAY) is None
    assert encoding_state("rope", 3) is None
    assert isinstance(encoding_state("urope", 3, learnable_anchors=True, num_anchors=2), LearnableAnchors)


def test_learnable_anchors_scale_each_layer_by_the_exponential_of_its_log_scale():
    state = LearnableAnchors([1.0, 4.0], num_layers=2)
    with torch.no_grad():
        state.log_scale[1] = torch.tensor([math.log(2.0), math.log(0.5)])
    assert torch.allclose(state(1), torch.tensor([2.0, 2.0], dtype=torch.float64), rtol=1e-6, atol=0)  # float32 log_scale
    assert torch.equal(state(0), torch.tensor([1.0, 4.0], dtype=torch.float64))


@pytest.mark.parametrize("assignment", ["heads", "channels"])
def test_learnable_anchor_gradient_keeps_everything_else_bit_identical(assignment):
    """with_anchors(fixed anchors, requires_grad) gives the same output and q, k, v gradients bit for
    bit as fixed anchors on the same (hooks) path, and equal to the fused path's to rounding; the
    anchors get the gradient autograd computes through the traced (all-autograd) path."""
    _, K, w2c, q, k, v = setup(24)
    enc = prep(K, w2c, anchors=[0.7, 3.0], anchor_assignment=assignment)
    anchors = torch.tensor([0.7, 3.0], dtype=torch.float64, requires_grad=True)
    learnable = enc.with_anchors(anchors)
    fused = outputs_and_grads(enc, q, k, v)
    enc.fused = False  # learnable anchors take the hooks path
    ref = outputs_and_grads(enc, q, k, v)
    assert rel_err(fused[0], ref[0]) < 1e-13 and all(rel_err(a, b) < 1e-13 for a, b in zip(fused[1], ref[1]))
    qkv = [t.clone().requires_grad_() for t in (q, k, v)]
    out = learnable.attend(*qkv)
    *grads, g_anchor = torch.autograd.grad(out.square().sum(), [*qkv, anchors])
    assert_bit_identical((out, grads), ref)
    out_t = enc.with_anchors(anchors)._attend_traced(q, k, v, 0.0)  # fresh positions: a new graph
    (g_anchor_traced,) = torch.autograd.grad(out_t.square().sum(), [anchors])
    assert g_anchor.abs().min() > 0 and rel_err(g_anchor, g_anchor_traced) < 1e-10
    eps = 1e-6  # and it is the derivative of the output
    plus = enc.with_anchors(torch.tensor([0.7 + eps, 3.0], dtype=torch.float64)).attend(q, k, v)
    minus = enc.with_anchors(torch.tensor([0.7 - eps, 3.0], dtype=torch.float64)).attend(q, k, v)
    fd = (plus.square().sum() - minus.square().sum()) / (2 * eps)
    assert abs(fd.item() - g_anchor[0].item()) < 1e-5 * max(1.0, abs(fd.item()))


def model_outputs_and_grads(model, inputs):
    out = model(*inputs)["depth"]
    out.square().mean().backward()
    return out.detach(), {n: p.grad for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("changes", [
    {"pe_options": TODAY},
    {"pe_options": {"learnable_anchors": True}},
    {"plucker": True},
], ids=["todays-options", "learnable-anchors", "plucker-hybrid"])
def test_model_with_todays_values_is_bit_identical(changes):
    """A tiny URoPE model with the option at today's value (learnable anchors at their initial value,
    the Plücker embedding at its zero initialisation) computes today's depth and gradients bit for bit."""
    from depthpe import DepthModel

    inputs = tiny_inputs()
    torch.manual_seed(0)
    base = DepthModel.from_preset("tiny", global_pe="urope").train()
    other = DepthModel.from_preset("tiny", global_pe="urope", **changes).train()
    missing, unexpected = other.load_state_dict(base.state_dict(), strict=False)
    assert not unexpected
    assert all(k.startswith(("aggregator.global_pe_state.", "aggregator.plucker.")) for k in missing)
    # learnable anchors take the hooks path, fixed ones the fused function (same values up to
    # rounding); with SDPA's math kernel both take the hooks path, which is compared bit for bit
    from torch.nn.attention import SDPBackend, sdpa_kernel

    same_path = sdpa_kernel(SDPBackend.MATH) if "pe_options" in changes and changes["pe_options"].get(
        "learnable_anchors") else contextlib.nullcontext()
    with same_path:
        out_a, grads_a = model_outputs_and_grads(base, inputs)
        out_b, grads_b = model_outputs_and_grads(other, inputs)
    assert torch.equal(out_a, out_b)
    assert all(torch.equal(g, grads_b[n]) for n, g in grads_a.items())
    new = {n: g for n, g in grads_b.items() if n not in grads_a}
    assert [n for n in new] == [k for k in missing if k in new]
    for name, grad in new.items():  # the new parameters do learn
        assert torch.isfinite(grad).all() and grad.abs().sum() > 0, name


def test_learnable_anchors_are_per_layer_and_trained():
    from depthpe import DepthModel

    inputs = tiny_inputs()
    torch.manual_seed(0)
    model = DepthModel.from_preset("tiny", global_pe="urope", pe_options={"learnable_anchors": True}).train()
    state = model.aggregator.global_pe_state
    assert state.log_scale.shape == (model.config.num_blocks, 4)
    assert "aggregator.global_pe_state.log_scale" not in model.no_weight_decay_names()
    _, grads = model_outputs_and_grads(model, inputs)
    g = grads["aggregator.global_pe_state.log_scale"]
    assert (g.abs().sum(dim=1) > 0).all()  # every layer's anchors get a gradient of their own
    assert not torch.equal(g[0], g[-1])
