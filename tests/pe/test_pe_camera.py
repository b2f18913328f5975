"""PRoPE, DPPE-dual, DPPE-tAdd and GTA (docs/encodings.md), float64, tiny shapes."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F

from depthpe.geometry import invert_intrinsics, invert_w2c, normalize_intrinsics, normalize_scene
from depthpe.pe import check_encoding_cameras, multiview_attention, prepare_encoding, validate_cameras
from depthpe.pe.camera import lift_intrinsics, projection_matrices
from depthpe.pe.dppe import tadd_blockwise_channels
from tests.helpers.pe import (
    DT,
    GRID,
    IMAGE,
    block_diag_tokens,
    kbar_rt,
    naive_relative_attention,
    prope_matrices,
    prope_rope_matrix,
    random_cameras,
    random_qkv,
    random_se3,
    rel_err,
    view_positions,
)

B, H, S, NS = 2, 2, 3, 2
T = NS + GRID[0] * GRID[1]
N = S * T
TRANSFORM_METHODS = ["prope", "dppe_dual", "dppe_tadd", "gta"]
FULLY_INVARIANT = ["prope", "dppe_dual", "gta"]


def prep(method, K, w2c, **opts):
    return prepare_encoding(method, K=K, w2c=w2c, image_size=IMAGE, grid=GRID, num_special=NS,
                            patch_offset=1, **opts)


def setup(seed, d=48, trans=1.0):
    g = torch.Generator().manual_seed(seed)
    K, w2c = random_cameras(B, S, g, trans=trans)
    q, k, v = random_qkv(B, H, N, d, g)
    return g, K, w2c, q, k, v


def camera_matrix_for(method, K, w2c, translation_scale=1.0):
    """D_t camera block of the generic form for the fully relative methods (dense reference)."""
    P, P_inv = prope_matrices(K, w2c)
    if method == "prope":
        return P
    if method == "dppe_dual":
        return P_inv.mT
    if method == "gta":
        E = w2c.clone()
        E[..., :3, 3] *= translation_scale
        return E
    raise AssertionError(method)


# --- 2. fused vs naive ------------------------------------------------------------------------
@pytest.mark.parametrize("method", FULLY_INVARIANT)
def test_fused_matches_dense_pairwise_reference(method):
    _, K, w2c, q, k, v = setup(1)
    opts = {"translation_scale": 0.3} if method == "gta" else {}
    enc = prep(method, K, w2c, **opts)
    D = block_diag_tokens(camera_matrix_for(method, K, w2c, 0.3), 48, GRID, NS, 1)
    logits_ref, out_ref = naive_relative_attention(q, k, v, D)
    assert rel_err(enc.attention_logits(q, k), logits_ref) < 1e-12
    assert rel_err(enc.attend(q, k, v), out_ref) < 1e-12


def tadd_reference(q, k, v, K, w2c, d, blockwise=False):
    """DPPE-tAdd from its formulas: PRoPE logits; o^r = KR_i sum a R^T K^-1 v^r,
    o^s = g_i + sum a (v^s - g_j); pass-through and RoPE channels as stated in dppe.py."""
    P, _ = prope_matrices(K, w2c)
    D = block_diag_tokens(P, d, GRID, NS, 1)
    Dinv = torch.linalg.inv(D)
    qt = torch.einsum("bnde,bhnd->bhne", D, q)  # D^T q
    kt = torch.einsum("bnde,bhne->bhnd", Dinv, k)
    KR, KR_inv, gamma = kbar_rt(K, w2c)
    view = torch.arange(N) // T
    xs, ys = view_positions(GRID, NS, 1)
    rho = torch.stack([prope_rope_matrix(float(xs[t % T]), float(ys[t % T]), d) for t in range(N)])
    dc = d // 2
    n6 = dc // 6
    vt = v.clone()
    for m in range(n6):
        r, s = slice(6 * m, 6 * m + 3), slice(6 * m + 3, 6 * m + 6)
        vt[..., r] = torch.einsum("bnxy,bhny->bhnx", KR_inv[:, view], v[..., r])
        vt[..., s] = v[..., s] - gamma[:, view].unsqueeze(1)
    vt[..., dc:] = torch.einsum("nxy,bhny->bhnx", rho, v[..., dc:])
    if blockwise:
        ch = tadd_blockwise_channels(d)
        o = torch.empty_like(v)
        for qk_idx, v_idx in ((ch["qk_rot"], ch["v_rot"]), (ch["qk_trans"], ch["v_trans"])):
            lg = qt[..., qk_idx] @ kt[..., qk_idx].mT / math.sqrt(len(qk_idx))
            o[..., v_idx] = lg.softmax(-1) @ vt[..., v_idx]
    else:
        lg = qt @ kt.mT / math.sqrt(d)
        o = lg.softmax(-1) @ vt
    out = o.clone()
    for m in range(n6):
        r, s = slice(6 * m, 6 * m + 3), slice(6 * m + 3, 6 * m + 6)
        out[..., r] = torch.einsum("bnxy,bhny->bhnx", KR[:, view], o[..., r])
        out[..., s] = o[..., s] + gamma[:, view].unsqueeze(1)
    out[..., dc:] = torch.einsum("nyx,bhny->bhnx", rho, o[..., dc:])  # rho^T = inverse
    return qt @ kt.mT / math.sqrt(d), out


@pytest.mark.parametrize("d", [48, 64])
@pytest.mark.parametrize("softmax", ["shared", "blockwise"])
def test_tadd_matches_formula_reference(d, softmax):
    _, K, w2c, q, k, v = setup(2, d=d)
    enc = prep("dppe_tadd", K, w2c, softmax=softmax)
    logits_ref, out_ref = tadd_reference(q, k, v, K, w2c, d, blockwise=softmax == "blockwise")
    assert rel_err(enc.attention_logits(q, k), logits_ref) < 1e-12
    assert rel_err(enc.attend(q, k, v), out_ref) < 1e-12


def test_tadd_blockwise_differs_from_shared_and_split_is_a_partition():
    _, K, w2c, q, k, v = setup(3, d=64)
    shared = prep("dppe_tadd", K, w2c).attend(q, k, v)
    block = prep("dppe_tadd", K, w2c, softmax="blockwise").attend(q, k, v)
    assert rel_err(block, shared) > 1e-3
    ch = tadd_blockwise_channels(64)
    assert torch.equal(torch.sort(torch.cat([ch["v_rot"], ch["v_trans"]])).values, torch.arange(64))
    assert len(ch["v_trans"]) == 3 * (32 // 6)  # translation slots only
    with pytest.raises(ValueError, match="divisible by 16"):
        tadd_blockwise_channels(40)
    with pytest.raises(ValueError, match="shared' or 'blockwise"):
        prep("dppe_tadd", K, w2c, softmax="split")


# --- 1. SE(3) invariance ----------------------------------------------------------------------
@pytest.mark.parametrize("method", FULLY_INVARIANT)
def test_global_se3_invariance(method):
    g, K, w2c, q, k, v = setup(4)
    opts = {"translation_scale": 0.01} if method == "gta" else {}
    G = random_se3(g)
    a, b = prep(method, K, w2c, **opts), prep(method, K, w2c @ torch.linalg.inv(G), **opts)
    assert rel_err(b.attention_logits(q, k), a.attention_logits(q, k)) < 1e-10
    assert rel_err(b.attend(q, k, v), a.attend(q, k, v)) < 1e-10


@pytest.mark.parametrize("softmax", ["shared", "blockwise"])
def test_tadd_invariance_rotation_only_and_after_canonicalization(softmax):
    g, K, w2c, q, k, v = setup(5)
    G_rot = random_se3(g, scale=0.0)
    G_full = random_se3(g)
    base = prep("dppe_tadd", K, w2c, softmax=softmax)
    rot = prep("dppe_tadd", K, w2c @ G_rot.inverse(), softmax=softmax)
    full = prep("dppe_tadd", K, w2c @ G_full.inverse(), softmax=softmax)
    assert rel_err(rot.attend(q, k, v), base.attend(q, k, v)) < 1e-10
    assert rel_err(full.attention_logits(q, k), base.attention_logits(q, k)) < 1e-10
    # regression guard: the translation stream is NOT invariant to a global translation
    assert rel_err(full.attend(q, k, v), base.attend(q, k, v)) > 1e-3
    # ... but is after canonicalizing the world to camera 0 (scale kept)
    one = torch.ones(B, dtype=DT)
    canon = lambda E: normalize_scene(E, scale=one)[0]  # noqa: E731
    c1 = prep("dppe_tadd", K, canon(w2c), softmax=softmax)
    c2 = prep("dppe_tadd", K, canon(w2c @ G_full.inverse()), softmax=softmax)
    assert rel_err(c2.attend(q, k, v), c1.attend(q, k, v)) < 1e-10


# --- 3. identical cameras ---------------------------------------------------------------------
def nope_plus_rope(q, k, v, d):
    """NoPE on [0, d/2) + PRoPE RoPE on [d/2, d) with v/o rotation, built from dense rho."""
    xs, ys = view_positions(GRID, NS, 1)
    rho = torch.stack([prope_rope_matrix(float(xs[t % T]), float(ys[t % T]), d) for t in range(N)])
    rot = lambda x, M: torch.cat([x[..., :d // 2], torch.einsum("nxy,bhny->bhnx", M, x[..., d // 2:])], -1)  # noqa: E731
    o = F.scaled_dot_product_attention(rot(q, rho), rot(k, rho), rot(v, rho))
    return rot(o, rho.mT)


@pytest.mark.parametrize("method", TRANSFORM_METHODS)
@pytest.mark.parametrize("d", [48, 64])
def test_identical_cameras_reduce_to_nope_plus_rope(method, d):
    g, K, w2c, q, k, v = setup(6, d=d)
    K_same = K[:, :1].expand(B, S, 3, 3)
    w2c_same = w2c[:, :1].expand(B, S, 4, 4)
    out = prep(method, K_same, w2c_same).attend(q, k, v)
    assert rel_err(out, nope_plus_rope(q, k, v, d)) < 1e-12


# --- 9. view permutation equivariance ---------------------------------------------------------
@pytest.mark.parametrize("method", TRANSFORM_METHODS)
def test_view_permutation_equivariance(method):
    _, K, w2c, q, k, v = setup(7)
    perm = torch.tensor([2, 0, 1])
    tok = (perm[:, None] * T + torch.arange(T)).reshape(-1)
    out = prep(method, K, w2c).attend(q, k, v)
    out_p = prep(method, K[:, perm], w2c[:, perm]).attend(q[:, :, tok], k[:, :, tok], v[:, :, tok])
    assert rel_err(out_p, out[:, :, tok]) < 1e-12


# --- 6, 7. round trips and closed-form inverses -----------------------------------------------
@pytest.mark.parametrize("method", TRANSFORM_METHODS)
@pytest.mark.parametrize("d", [48, 64])
def test_value_output_round_trip(method, d):
    _, K, w2c, q, _, _ = setup(8, d=d)
    enc = prep(method, K, w2c)
    assert rel_err(enc.transform_out(enc.transform_v(q)), q) < 1e-12


def test_closed_form_inverses_match_linalg_inv():
    _, K, w2c, *_ = setup(9)
    P, P_inv = projection_matrices(K, w2c, IMAGE)
    assert torch.allclose(P_inv, torch.linalg.inv(P), atol=1e-12, rtol=0)
    assert torch.allclose(P @ P_inv, torch.eye(4, dtype=DT).expand_as(P), atol=1e-12, rtol=0)
    Kbar = normalize_intrinsics(K, IMAGE)
    assert torch.allclose(invert_intrinsics(Kbar), torch.linalg.inv(Kbar), atol=1e-12, rtol=0)
    assert torch.allclose(invert_w2c(w2c), torch.linalg.inv(w2c), atol=1e-12, rtol=0)
    L = lift_intrinsics(Kbar)
    assert L.dtype == DT and torch.equal(L[..., :3, :3], Kbar) and torch.all(L[..., 3, 3] == 1)
    # K_bar maps pixel u in [0, W] to u / W - 0.5: the principal point goes to cx / W - 0.5
    H_, W_ = IMAGE
    pix = torch.tensor([W_, H_, 1.0], dtype=DT)
    ray = invert_intrinsics(K[0, 0]) @ torch.tensor([W_, H_, 1.0], dtype=DT)
    assert torch.allclose(Kbar[0, 0] @ ray, pix / torch.tensor([W_, H_, 1.0], dtype=DT) - torch.tensor([0.5, 0.5, 0], dtype=DT), atol=1e-12)


# --- 11. token order --------------------------------------------------------------------------
def test_rope_x_varies_fastest_and_special_tokens_at_zero():
    d = 48
    E = torch.eye(4, dtype=DT).expand(1, S, 4, 4)
    Kp = torch.tensor([[40.0, 0, 27.5], [0, 40, 20.5], [0, 0, 1]], dtype=DT).expand(1, S, 3, 3)
    enc = prepare_encoding("prope", K=Kp, w2c=E, image_size=IMAGE, grid=GRID, num_special=NS,
                           patch_offset=1)
    x = torch.zeros(1, 1, N, d, dtype=DT)
    x[..., d // 2] = 1  # first channel of the RoPE-x quarter (frequency 1)
    x[..., 3 * d // 4] = 1  # first channel of the RoPE-y quarter
    out = enc.transform_q(x)[0, 0]
    h, w = GRID
    exp_x = [0.0] * NS + [float(c + 1) for r in range(h) for c in range(w)]
    exp_y = [0.0] * NS + [float(r + 1) for r in range(h) for c in range(w)]
    ang_x = torch.tensor(exp_x * S, dtype=DT)
    ang_y = torch.tensor(exp_y * S, dtype=DT)
    assert torch.allclose(out[:, d // 2], ang_x.cos(), atol=1e-14)
    assert torch.allclose(out[:, d // 2 + d // 8], -ang_x.sin(), atol=1e-14)  # -theta rotation
    assert torch.allclose(out[:, 3 * d // 4], ang_y.cos(), atol=1e-14)


# --- 12, 13. DPPE channel semantics -----------------------------------------------------------
def test_dppe_dual_value_map_is_translation_free_in_first_three_channels():
    g, K, w2c, q, k, v = setup(10)
    P, P_inv = prope_matrices(K, w2c)
    A = P_inv.mT[:, :, None] @ P.mT[:, None]  # P_i^-T P_j^T
    assert A[..., :3, 3].abs().max() < 1e-12
    zeros = torch.zeros_like(q)  # equal logits -> fixed (uniform) attention weights
    w2c_moved = w2c.clone()
    w2c_moved[..., :3, 3] += torch.randn(B, S, 3, generator=g, dtype=DT)
    chunks = lambda o: o[..., :24].unflatten(-1, (6, 4))[..., :3]  # noqa: E731
    for method, should_change in (("dppe_dual", False), ("prope", True)):
        o1 = prep(method, K, w2c).attend(zeros, k, v)
        o2 = prep(method, K, w2c_moved).attend(zeros, k, v)
        changed = rel_err(chunks(o2), chunks(o1)) > 1e-6
        assert changed == should_change, method


def test_dppe_tadd_pass_through_channels_are_untouched():
    _, K, w2c, q, *_ = setup(11, d=64)
    enc = prep("dppe_tadd", K, w2c)
    for fn in (enc.transform_v, enc.transform_out):
        assert torch.equal(fn(q)[..., 30:32], q[..., 30:32])
        assert not torch.allclose(fn(q)[..., :30], q[..., :30])


# --- 10. special tokens -----------------------------------------------------------------------
def test_special_tokens_use_their_views_camera():
    _, K, w2c, q, *_ = setup(12)
    enc = prep("prope", K, w2c)
    P, _ = prope_matrices(K, w2c)
    qt = enc.transform_q(q)
    for s in range(S):
        tok = s * T  # first special token of view s: RoPE at 0, camera of view s
        expected = torch.einsum("bxy,bhcx->bhcy", P[:, s], q[:, :, tok, :24].unflatten(-1, (6, 4)))
        assert torch.allclose(qt[:, :, tok, :24], expected.flatten(-2), atol=1e-12)
        assert torch.equal(qt[:, :, tok, 24:], q[:, :, tok, 24:])


# --- 14, 17. robustness and gradients ---------------------------------------------------------
@pytest.mark.parametrize("method,opts", [("prope", {}), ("dppe_dual", {}), ("dppe_tadd", {}),
                                         ("dppe_tadd", {"softmax": "blockwise"}), ("gta", {})])
def test_gradcheck(method, opts):
    g = torch.Generator().manual_seed(13)
    K, w2c = random_cameras(1, 2, g)
    q, k, v = (x.requires_grad_() for x in random_qkv(1, 1, 2 * (1 + 4), 16, g))
    enc = prepare_encoding(method, K=K, w2c=w2c, image_size=(28, 28), grid=(2, 2), num_special=1,
                           **opts)
    assert torch.autograd.gradcheck(lambda a, b, c: enc.attend(a, b, c), (q, k, v), fast_mode=True)


@pytest.mark.parametrize("method", TRANSFORM_METHODS)
def test_opposite_cameras_finite(method):
    _, K, w2c, q, k, v = setup(14)
    w2c = w2c.clone()
    w2c[:, 1, :3, :3] = -w2c[:, 0, :3, :3] @ torch.diag(torch.tensor([1.0, -1.0, 1.0], dtype=DT))
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    out = prep(method, K, w2c).attend(q, k, v)
    out.square().sum().backward()
    assert torch.isfinite(out).all() and all(torch.isfinite(x.grad).all() for x in (q, k, v))


# --- 15. precision ----------------------------------------------------------------------------
@pytest.mark.parametrize("method", TRANSFORM_METHODS)
def test_transforms_run_in_float32_under_bf16_autocast(method):
    _, K, w2c, q, *_ = setup(15)
    enc = prep(method, K, w2c)
    qb = q.to(torch.bfloat16)
    for fn in (enc.transform_q, enc.transform_k, enc.transform_v, enc.transform_out):
        ref = fn(qb.float()).to(torch.bfloat16)  # float32 transform, outside autocast
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got = fn(qb)
            leaked = torch.matmul(qb.float(), torch.eye(48)).dtype  # autocast really is active
        assert leaked == torch.bfloat16
        assert got.dtype == torch.bfloat16 and torch.equal(got, ref)


def test_bf16_logits_close_to_float64_for_normalized_poses():
    _, K, w2c, q, k, _ = setup(16)
    w2c = normalize_scene(w2c)[0]
    enc = prep("prope", K, w2c)
    ref = enc.attention_logits(q, k)
    qt = enc.transform_q(q.float()).bfloat16().double()
    kt = enc.transform_k(k.float()).bfloat16().double()
    low = qt @ kt.mT / math.sqrt(48)
    assert float((low - ref).abs().mean() / ref.std()) < 1e-2


def test_large_translation_warns_at_the_boundary_not_in_prepare():
    _, K, w2c, *_ = setup(17, trans=50.0)
    with pytest.warns(UserWarning, match="not scale-invariant"):
        check_encoding_cameras("prope", K, w2c)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # preparing reads no camera values (no host sync)
        prep("prope", K, w2c)
        check_encoding_cameras("prope", K, w2c, max_translation=100.0)


def test_the_translation_warning_reads_the_length_of_each_camera_translation():
    """The bound is on the Euclidean length of a w2c translation (one camera at (6, 6, 6): 10.4 > 10,
    though no coordinate is over 10), not on a coordinate or on a norm across views."""
    _, K, w2c, *_ = setup(18)
    w2c = w2c.clone()
    w2c[..., :3, 3] = torch.tensor([5.76, 5.76, 5.76], dtype=w2c.dtype)  # length 9.98
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_encoding_cameras("prope", K, w2c)
    w2c[:, -1, :3, 3] = 6.0
    with pytest.warns(UserWarning, match=r"translation has norm 10\.4 > 10\.0"):
        check_encoding_cameras("prope", K, w2c)


# --- 19. q/k norm ordering (encodings act on the tensors they are given) -----------------------
def test_normalization_before_transform_keeps_invariance_after_breaks_it():
    g, K, w2c, q, k, v = setup(18)
    G = random_se3(g)
    ln = lambda x: F.layer_norm(x, x.shape[-1:])  # noqa: E731
    a, b = prep("prope", K, w2c), prep("prope", K, w2c @ G.inverse())
    assert rel_err(b.attend(ln(q), ln(k), v), a.attend(ln(q), ln(k), v)) < 1e-10
    wrong = lambda enc: F.scaled_dot_product_attention(  # noqa: E731
        ln(enc.transform_q(q)), ln(enc.transform_k(k)), enc.transform_v(v))
    assert rel_err(wrong(b), wrong(a)) > 1e-3


# --- errors -----------------------------------------------------------------------------------
def test_clear_errors():
    _, K, w2c, q, k, v = setup(19)
    enc = prep("prope", K, w2c)
    with pytest.raises(ValueError, match="divisible by 8"):
        enc.attend(q[..., :44], k[..., :44], v[..., :44])
    with pytest.raises(ValueError, match="tokens"):
        enc.attend(q[:, :, :-1], k[:, :, :-1], v[:, :, :-1])
    with pytest.raises(ValueError, match="batch"):
        enc.attend(q[:1], k[:1], v[:1])
    with pytest.raises(ValueError, match="needs cameras"):
        prep("prope", None, None)
    with pytest.raises(ValueError, match="needs cameras"):
        check_encoding_cameras("prope", None, None)
    with pytest.raises(ValueError, match="K must have shape"):
        prep("prope", K[..., :2, :], w2c)
    # values are checked where data enters (check_encoding_cameras / validate_cameras), not in prepare
    with pytest.raises(ValueError, match="non-positive focal"):
        check_encoding_cameras("prope", -K, w2c)
    for axis in (0, 1):  # one zero focal length is enough to refuse
        flat = K.clone()
        flat[..., axis, axis] = 0.0
        with pytest.raises(ValueError, match="non-positive focal"):
            validate_cameras(flat, w2c, w2c.shape[1], method="prope")
    far = w2c.clone()
    far[..., 0, 1, 3] = 12.0  # a translation longer than the default 10 warns: normalize the scene
    with pytest.warns(UserWarning, match="translation has norm 12"):
        validate_cameras(K, far, w2c.shape[1], method="prope")
    with pytest.raises(ValueError, match="w2c contains NaN"):
        check_encoding_cameras("gta", K, w2c * float("nan"))
    with pytest.raises(ValueError, match="K contains NaN"):
        validate_cameras(K * float("nan"), w2c, w2c.shape[1], method="prope")
    check_encoding_cameras("rope", None, w2c * float("nan"))  # nor does RoPE read cameras
    with pytest.raises(TypeError):
        prep("prope", K, w2c, not_an_option=1)


def test_w2c_3x4_equals_4x4_and_functional_form():
    _, K, w2c, q, k, v = setup(20)
    for method in TRANSFORM_METHODS:
        a = prep(method, K, w2c).attend(q, k, v)
        b = multiview_attention(q, k, v, method=method, K=K, w2c=w2c[..., :3, :], image_size=IMAGE,
                                grid=GRID, num_special=NS)
        assert torch.equal(a, b)
