"""URoPE (docs/encodings.md), float64, tiny shapes."""

from __future__ import annotations

import gc
import math

import pytest
import torch
import torch.nn.functional as F

from depthpe.pe import apply_rope_2d, prepare_encoding, token_positions
from depthpe.pe.urope import default_anchors, project_key_positions
from tests.helpers.pe import DT, GRID, IMAGE, random_cameras, random_qkv, random_se3, rel_err
from tests.helpers.urope import B, H, N, NS, S, T, h, naive_key_positions, setup, tiny_inputs, w

ANCHORS = [0.7, 3.0]


def prep(K, w2c, **opts):
    opts.setdefault("anchors", ANCHORS)
    return prepare_encoding("urope", K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=NS,
                            patch_offset=1, **opts)


def naive_urope(q, k, v, K, w2c, anchors):
    """Per (b, head, query view) explicit logits with VGGT RoPE (depthpe.pe.rope) and softmax."""
    kpos = naive_key_positions(K, w2c, anchors)
    qpos = token_positions(S, GRID, NS, 1, dtype=DT)
    G = len(anchors)
    logits = torch.zeros(B, H, N, N, dtype=DT)
    for b in range(B):
        for hd in range(H):
            g = hd // (H // G)
            for i in range(S):
                rows = slice(i * T, (i + 1) * T)
                qr = apply_rope_2d(q[b, hd, rows], qpos[rows])
                kr = apply_rope_2d(k[b, hd], kpos[b, i, g])
                logits[b, hd, rows] = qr @ kr.T / math.sqrt(q.shape[-1])
    return logits, logits.softmax(-1) @ v


def test_matches_naive_per_view_head_reference():
    _, K, w2c, q, k, v = setup(0)
    enc = prep(K, w2c)
    logits_ref, out_ref = naive_urope(q, k, v, K, w2c, ANCHORS)
    assert rel_err(enc.attention_logits(q, k), logits_ref) < 1e-12
    assert rel_err(enc.attend(q, k, v), out_ref) < 1e-12


def test_chunked_equals_unchunked_and_cached_tables():
    _, K, w2c, q, k, v = setup(1)
    ref = prep(K, w2c, view_chunk=S).attend(q, k, v)
    for opts in ({"view_chunk": 1}, {"view_chunk": 2}, {"view_chunk": 2, "cache_tables": True}):
        assert rel_err(prep(K, w2c, **opts).attend(q, k, v), ref) < 1e-13, opts


def test_same_view_block_is_exact_2d_rope_for_every_anchor():
    _, K, w2c, q, k, _ = setup(2)
    logits = prep(K, w2c).attention_logits(q, k)
    pos = token_positions(S, GRID, NS, 1, dtype=DT)
    plain = apply_rope_2d(q, pos) @ apply_rope_2d(k, pos).mT / math.sqrt(q.shape[-1])
    for i in range(S):
        blk = slice(i * T, (i + 1) * T)
        assert (logits[:, :, blk, blk] - plain[:, :, blk, blk]).abs().max() < 1e-12
    assert (logits - plain).abs().max() > 1e-3  # cross-view blocks do differ


def test_identical_cameras_reduce_to_vggt_rope():
    _, K, w2c, q, k, v = setup(3)
    K_same, w2c_same = K[:, :1].expand(B, S, 3, 3), w2c[:, :1].expand(B, S, 4, 4)
    out = prep(K_same, w2c_same).attend(q, k, v)
    pos = token_positions(S, GRID, NS, 1, dtype=DT)
    ref = F.scaled_dot_product_attention(apply_rope_2d(q, pos), apply_rope_2d(k, pos), v)
    assert rel_err(out, ref) < 1e-12


def test_pure_rotation_projections_do_not_depend_on_anchor():
    g, K, w2c, *_ = setup(4)
    c = torch.randn(B, 1, 3, generator=g, dtype=DT)  # common camera centre
    w2c = w2c.clone()
    w2c[..., :3, 3] = -(w2c[..., :3, :3] @ c.unsqueeze(-1)).squeeze(-1)
    enc = prep(K, w2c, anchors=[0.5, 1.3, 4.0, 9.0])
    pos = enc.key_pos  # (B, Sq, G, N, 2)
    assert (pos - pos[:, :, :1]).abs().max() < 1e-9
    w2c[:, 1, :3, 3] += 0.5  # now view 1 has a baseline: anchors matter
    moved = prep(K, w2c, anchors=[0.5, 1.3, 4.0, 9.0])
    assert (moved.key_pos - moved.key_pos[:, :, :1]).abs().max() > 1e-3  # translation: they differ


def test_se3_invariance_and_scale_with_anchors():
    g, K, w2c, q, k, v = setup(5)
    G = random_se3(g)
    a, b = prep(K, w2c), prep(K, w2c @ torch.linalg.inv(G))
    assert rel_err(b.attention_logits(q, k), a.attention_logits(q, k)) < 1e-10
    assert rel_err(b.attend(q, k, v), a.attend(q, k, v)) < 1e-10
    scaled = w2c.clone()
    scaled[..., :3, 3] *= 3
    assert rel_err(prep(K, scaled).attend(q, k, v), a.attend(q, k, v)) > 1e-6
    both = prep(K, scaled, anchors=[3 * x for x in ANCHORS])
    assert rel_err(both.attend(q, k, v), a.attend(q, k, v)) < 1e-10


def test_opposite_facing_cameras_finite_outputs_and_gradients():
    _, K, w2c, q, k, v = setup(6)
    w2c = w2c.clone()
    w2c[:, 1, :3, :3] = torch.diag(torch.tensor([-1.0, 1.0, -1.0], dtype=DT))  # looks backwards
    enc = prep(K, w2c)
    assert enc.behind.any()
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    out = enc.attend(q, k, v)
    out.square().sum().backward()
    assert torch.isfinite(out).all() and all(torch.isfinite(x.grad).all() for x in (q, k, v))
    assert torch.isfinite(enc.key_pos).all()
    assert enc.key_pos[..., 1].abs().max() <= 2 * w + 1 and enc.key_pos[..., 0].abs().max() <= 2 * h + 1


def test_a_key_point_almost_on_the_query_image_plane_is_projected_at_eps_times_its_anchor():
    """z_safe = max(z', behind_eps * d_g): a key point 1e-3 in front of the query camera, under
    1e-3 x its anchor 2, counts as behind, and its [u', v', z'] = K X is divided by 2e-3 (not by its
    own z', not by 1e-3 / 2). Pinhole fx = fy = 10 px, principal point at the centre of 28 x 28 px,
    a 2 x 2 grid: key patch (0, 0) is pixel (6.5, 6.5), its ray at depth 2 the point (-1.4, -1.4, 2)
    of the key camera; the query camera sits so that the point is at (-1e-5, 0, 1e-3) in it."""
    K = torch.tensor([[10.0, 0.0, 13.5], [0.0, 10.0, 13.5], [0.0, 0.0, 1.0]], dtype=DT).expand(1, 2, 3, 3)
    w2c = torch.eye(4, dtype=DT).repeat(1, 2, 1, 1)
    w2c[0, 0, :3, 3] = torch.tensor([1.4 - 1e-5, 1.4, 1e-3 - 2.0], dtype=DT)
    pos, behind = project_key_positions(K, w2c, torch.tensor([1.0, 2.0], dtype=DT), (28, 28), (2, 2))
    assert pos.shape == (1, 2, 2, 2, 4, 2) and behind.shape == (1, 2, 2, 2, 4)
    assert behind[0, 0, 1, 1, 0]  # query view 0, anchor 2, key view 1, key patch 0
    z_safe = 1e-3 * 2.0
    u, v = (10.0 * -1e-5 + 13.5 * 1e-3) / z_safe, 13.5 * 1e-3 / z_safe  # 6.7 and 6.75 px
    expected = torch.tensor([(v + 0.5) / 14 - 0.5, (u + 0.5) / 14 - 0.5], dtype=DT)  # (y, x) in patches
    torch.testing.assert_close(pos[0, 0, 1, 1, 0], expected, rtol=0, atol=1e-9)
    assert not behind[0, 0, :, 0].any() and not behind[0, 1, :, 1].any()  # a view's own keys: never behind
    assert not behind[0, 1, :, 0].any()  # view 0's points are 2 + 1.999 or more in front of view 1


def test_behind_eps_and_clip_options_reach_the_key_positions():
    """``behind_eps`` and ``clip`` (pe_options) are the ones the key positions are built with: with
    a backward-looking camera both change them, and they equal the naive reference's at those values."""
    _, K, w2c, *_ = setup(6)
    w2c = w2c.clone()
    w2c[:, 1, :3, :3] = torch.diag(torch.tensor([-1.0, 1.0, -1.0], dtype=DT))  # looks backwards
    default = prep(K, w2c)
    for opts in ({"behind_eps": 0.3}, {"clip": 0.25}):
        enc = prep(K, w2c, **opts)
        ref = naive_key_positions(K, w2c, ANCHORS, eps=opts.get("behind_eps", 1e-3), clip=opts.get("clip", 1.0))
        assert rel_err(enc.key_pos, ref) < 1e-12, opts
        assert (enc.key_pos - default.key_pos).abs().max() > 1e-3, opts
    assert prep(K, w2c, behind_eps=0.3).behind.sum() > default.behind.sum()
    assert prep(K, w2c, clip=0.25).key_pos[..., 1].max() <= 1.25 * w + 1  # patch units, offset 1


def test_gradcheck():
    g = torch.Generator().manual_seed(7)
    K, w2c = random_cameras(1, 2, g, trans=0.2)
    q, k, v = (x.requires_grad_() for x in random_qkv(1, 2, 2 * 5, 8, g))
    enc = prepare_encoding("urope", K=K, w2c=w2c, image_size=(28, 28), grid=(2, 2), num_special=1,
                           anchors=[1.0, 2.0])
    assert torch.autograd.gradcheck(lambda a, b, c: enc.attend(a, b, c), (q, k, v), fast_mode=True)


def test_bf16_autocast_output_close_to_float32():
    _, K, w2c, q, k, v = setup(8)
    enc = prep(K, w2c)
    ref = enc.attend(q.float(), k.float(), v.float())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = enc.attend(q.bfloat16(), k.bfloat16(), v.bfloat16())
    assert got.dtype == torch.bfloat16
    assert rel_err(got.float(), ref) < 3e-2


def test_defaults_and_errors():
    assert default_anchors() == pytest.approx([0.5, 0.5 * 16 ** (1 / 3), 0.5 * 16 ** (2 / 3), 8.0])
    _, K, w2c, q, k, v = setup(9)
    enc = prepare_encoding("urope", K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=NS)
    assert enc.G == 4
    with pytest.raises(ValueError, match="anchor groups"):
        prep(K, w2c, anchors=[1.0, 2.0, 3.0]).attend(q, k, v)
    with pytest.raises(ValueError, match="divisible by 4"):
        prep(K, w2c).attend(q[..., :14], k[..., :14], v[..., :14])
    with pytest.raises(NotImplementedError, match="attend"):
        prep(K, w2c).transform_k(k)
    with pytest.raises(ValueError, match="positive"):
        prep(K, w2c, anchors=[1.0, -1.0])
    with pytest.raises(ValueError, match="view_chunk"):
        prep(K, w2c, view_chunk=0)


def assert_same_gradients_as_eager(enc, out, qkv, tol):
    """Gradients of sum(out^2) w.r.t. qkv equal those of the eager ``enc.attend`` on copies of qkv."""
    grads = torch.autograd.grad(out.square().sum(), qkv)
    qkv_e = [t.detach().clone().requires_grad_() for t in qkv]
    grads_e = torch.autograd.grad(enc.attend(*qkv_e).square().sum(), qkv_e)
    for g, g_e in zip(grads, grads_e):
        assert rel_err(g, g_e) < tol


@pytest.mark.parametrize("view_chunk", [1, 2])
def test_traced_path_matches_reference_values_and_gradients(view_chunk):
    """The real-valued path that torch.compile traces equals the naive reference and the eager path."""
    _, K, w2c, q, k, v = setup(5)
    enc = prep(K, w2c, view_chunk=view_chunk)
    _, out_ref = naive_urope(q, k, v, K, w2c, ANCHORS)
    qkv = [t.clone().requires_grad_() for t in (q, k, v)]
    out = enc._attend_traced(*qkv, 0.0)
    assert rel_err(out, out_ref) < 1e-12
    assert_same_gradients_as_eager(enc, out, qkv, tol=1e-12)


def test_compiles_without_graph_breaks_and_matches_eager():
    _, K, w2c, q, k, v = setup(6)
    enc = prep(K.float(), w2c.float())
    q, k, v = (t.float() for t in (q, k, v))

    def attend(q, k, v):
        return enc.attend(q, k, v)

    torch._dynamo.reset()
    explained = torch._dynamo.explain(attend)(q, k, v)
    assert explained.graph_break_count == 0, explained.break_reasons
    compiled = torch.compile(attend, backend="aot_eager", fullgraph=True)
    assert (compiled(q, k, v) - enc.attend(q, k, v)).abs().max() < 1e-5


def _attend_seeing_saved(enc, q, k, v):
    """(q, k, v copies with gradients, enc.attend's output, shapes of what it saved for backward)."""
    qkv = [t.clone().requires_grad_() for t in (q, k, v)]
    seen = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: seen.append(tuple(t.shape)) or t, lambda t: t):
        out = enc.attend(*qkv)
    return qkv, out, seen


def test_enclosing_saved_tensor_hooks_get_every_tensor_but_the_rotated_keys():
    """Activation checkpointing drops and recomputes what its saved-tensor hooks receive: URoPE's own
    hooks (which replace the rotated keys by a recipe) must hand every other saved tensor on to them,
    e.g. the log-sum-exp (B, heads, T) that SDPA saves for each query view."""
    _, K, w2c, q, k, v = setup(7)
    enc = prep(K, w2c)
    enc.fused = False  # the hooks path (learnable anchors, view_chunk > 1, no fused kernel)
    qkv, out, seen = _attend_seeing_saved(enc, q, k, v)
    assert seen.count((B, H, T)) == S  # one log-sum-exp per query view
    assert_same_gradients_as_eager(enc, out, qkv, tol=1e-13)


def _live_tensors_of_shape(shape) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, torch.Tensor) and tuple(o.shape) == shape)


def test_under_checkpointing_no_key_copy_outlives_the_forward():
    """Non-reentrant activation checkpointing keeps until backward only what its saved-tensor hooks
    keep. URoPE's recipe for the rotated keys hands the permuted keys it is made from to those hooks
    too and holds them only weakly itself: after a checkpointed forward no permuted key tensor
    (B, G, H/G, N, d/2, 2) is alive (hooks holding them kept one float32 key tensor per global layer,
    3 GiB at VGGT-1B's 24 views), and the gradients equal those without checkpointing."""
    from torch.utils.checkpoint import checkpoint

    _, K, w2c, q, k, v = setup(7)
    enc = prep(K, w2c)
    enc.fused = False  # the hooks path: what runs on CUDA
    d = q.shape[-1]
    shape = (B, len(ANCHORS), H // len(ANCHORS), N, d // 2, 2)
    before = _live_tensors_of_shape(shape)
    qkv = [t.clone().requires_grad_() for t in (q, k, v)]
    out = checkpoint(enc.attend, *qkv, use_reentrant=False)
    assert _live_tensors_of_shape(shape) == before
    grads = torch.autograd.grad(out.square().sum(), qkv)
    plain = [t.clone().requires_grad_() for t in (q, k, v)]
    ref = torch.autograd.grad(enc.attend(*plain).square().sum(), plain)
    assert all(rel_err(a, b) < 1e-13 for a, b in zip(grads, ref))


def test_fused_path_saves_what_rope_saves():
    """The fused function (``fused.FusedAttention``) hands activation checkpointing q', the keys, v, the
    output and one log-sum-exp per (query view, head slice): four (B, heads, N, d) tensors, no
    rotated keys; values and gradients equal the hooks path's."""
    _, K, w2c, q, k, v = setup(7)
    enc = prep(K, w2c)
    qkv, out, seen = _attend_seeing_saved(enc, q, k, v)
    assert out.grad_fn.name().endswith("FusedAttentionBackward")
    assert seen.count((B, H, N, q.shape[-1])) == 4
    lse = [s for s in seen if len(s) == 3]
    assert len(lse) == S * len(enc._group_chunks(H, "cpu")) and sum(s[1] for s in lse) == S * H
    hooks = prep(K, w2c)
    hooks.fused = False
    ref = hooks.attend(*qkv)
    assert rel_err(out, ref) < 1e-13
    grads = torch.autograd.grad(out.square().sum(), qkv)
    grads_ref = torch.autograd.grad(ref.square().sum(), qkv)
    assert all(rel_err(a, b) < 1e-13 for a, b in zip(grads, grads_ref))


def test_model_gradients_equal_with_and_without_checkpointing():
    from depthpe import DepthModel

    images, K, w2c = tiny_inputs()
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        model = DepthModel.from_preset("tiny", global_pe="urope", gradient_checkpointing=checkpointing).train()
        model(images, K, w2c)["depth"].square().mean().backward()
        grads.append([p.grad for p in model.parameters() if p.requires_grad])
    assert all(g is not None for g in grads[1])
    assert max((a - b).abs().max().item() for a, b in zip(*grads)) < 1e-6


def test_under_autocast_the_hooks_still_replace_the_rotated_keys():
    """With autocast on and float32 q, k (as after the blocks' q/k norm), SDPA would cast its inputs
    itself and save the casts, which the hooks cannot recognise: the rotated keys of every query
    view would be kept. URoPE casts first, so the enclosing hooks see one (B, heads, N, d) tensor,
    the value tensor, and no key copies."""
    _, K, w2c, q, k, v = setup(8)
    enc = prep(K.float(), w2c.float())
    enc.fused = False
    qkv = [t.float().requires_grad_() for t in (q, k, v)]
    seen = []

    def pack(t):
        seen.append(t)
        return t

    with torch.autocast("cpu", dtype=torch.bfloat16), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = enc.attend(*qkv)
    full = {t.untyped_storage().data_ptr() for t in seen if tuple(t.shape) == (B, H, N, q.shape[-1])}
    assert out.dtype == torch.bfloat16 and len(full) == 1
    out.float().sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in qkv)
