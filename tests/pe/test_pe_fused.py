"""The fused attention functions of the camera encodings and URoPE (``fused.FusedAttention`` around
``CameraBlockEncoding.fused_forward``, ``urope_fused``, ``kernels``): float64 gradchecks, equality with the plain path, what they
save for backward, the fallbacks, autocast, and the CUDA kernels' call signatures on fake tensors."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

from depthpe.pe.base import Encoding
from depthpe.pe import camera, kernels
from depthpe.pe.camera import head_chunks
from depthpe.pe.kernels import FusedKernel, fused_kernel
from tests.helpers.pe import rel_err
from tests.helpers.pe_fused import N, inputs, prep

CAMERA_METHODS = ["prope", "gta", "dppe_dual", "dppe_tadd", {"qk": "none", "vo": "p"},
                  {"qk": "vggt2d", "vo": "KRtAdd2d"}, {"qk": "p2d", "vo": "none"}, {"qk": "2d", "vo": "Rt"}]
UROPE_OPTIONS = [{"anchors": [1.0, 2.0]}, {"anchors": [1.0, 2.0], "anchor_assignment": "channels"}]


def fused_name(out):
    return type(out.grad_fn).__name__


def _full(*cases):
    """Every case with fast_mode (a random projection of the Jacobian), ``cases`` also with the full
    Jacobian (marked slow: tens of seconds each on a busy 2-core machine)."""
    return [pytest.param(c, fast, id=f"{c}-{'fast' if fast else 'full'}", marks=() if fast else (pytest.mark.slow,))
            for c in cases for fast in (True, False)]


@pytest.mark.parametrize("method, fast", _full(*CAMERA_METHODS)[::2] + _full("prope", "dppe_tadd")[1::2])
def test_camera_function_gradcheck_float64(method, fast):
    K, w2c, q, k, v = inputs(1, d=8)
    enc = prep(method, K, w2c)
    assert fused_name(enc.attend(q, k, v)) == "FusedAttentionBackward"
    assert torch.autograd.gradcheck(lambda a, b, c: enc.attend(a, b, c), (q, k, v), fast_mode=fast)


@pytest.mark.parametrize("opts, fast", _full(*UROPE_OPTIONS)[:3])
def test_urope_function_gradcheck_float64(opts, fast):
    K, w2c, q, k, v = inputs(2, d=8, heads=4)
    enc = prep("urope", K, w2c, **opts)
    assert fused_name(enc.attend(q, k, v)) == "FusedAttentionBackward"
    assert torch.autograd.gradcheck(lambda a, b, c: enc.attend(a, b, c), (q, k, v), fast_mode=fast)


def _out_and_grads(attend, q, k, v, g):
    qkv = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    out = attend(*qkv)
    return out, torch.autograd.grad(out, qkv, g)


def _assert_fused_equals_hooks_path(enc, q, k, v, grad):
    """URoPE's fused function (asserted to run) and its hooks path (``enc.fused = False``) give equal
    values and gradients for the upstream gradient ``grad`` (relative 1e-13)."""
    out, grads = _out_and_grads(enc.attend, q, k, v, grad)
    assert fused_name(out) == "FusedAttentionBackward"
    enc.fused = False
    ref, ref_grads = _out_and_grads(enc.attend, q, k, v, grad)
    assert fused_name(ref) != "FusedAttentionBackward"
    assert rel_err(out, ref) < 1e-13 and all(rel_err(a, b) < 1e-13 for a, b in zip(grads, ref_grads))


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-13), (torch.float32, 2e-6)])
@pytest.mark.parametrize("method", CAMERA_METHODS + ["urope"], ids=str)
def test_fused_equals_plain_path(method, dtype, tol):
    """Values and gradients of the fused function against the plain transform - SDPA - transform
    (camera encodings) or the hooks path (URoPE), 16 heads (8 head slices)."""
    K, w2c, q, k, v = inputs(3, d=16, heads=16, dtype=dtype)
    enc = prep(method, K, w2c)
    g = torch.randn(q.shape, dtype=dtype, generator=torch.Generator().manual_seed(4))
    out, grads = _out_and_grads(enc.attend, q, k, v, g)
    assert fused_name(out).startswith("FusedAttention")
    if method == "urope":
        enc.fused = False
        ref, ref_grads = _out_and_grads(enc.attend, q, k, v, g)
    else:
        ref, ref_grads = _out_and_grads(lambda *x: Encoding.attend(enc, *x), q, k, v, g)
    assert out.dtype == dtype and rel_err(out, ref) < tol
    for a, b in zip(grads, ref_grads):
        assert a.dtype == dtype and rel_err(a, b) < tol


@pytest.mark.parametrize("method", ["prope", "dppe_tadd"])
def test_camera_function_saves_what_rope_saves(method):
    """Saved for backward (what activation checkpointing drops and recomputes): q', k', the input v
    itself and the returned output itself, plus one log-sum-exp per head slice; the plain path
    saves a transformed copy v' and the pre-transform output instead of v and the output."""
    K, w2c, q, k, v = inputs(5, heads=16)
    enc = prep(method, K, w2c)
    for attend, fused in ((enc.attend, True), (lambda *x: Encoding.attend(enc, *x), False)):
        seen = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: seen.append(t) or t, lambda t: t):
            out = attend(q, k, v)
        full = {t.untyped_storage().data_ptr() for t in seen if t.shape == q.shape}
        assert len(full) == 4
        assert (v.untyped_storage().data_ptr() in full) == fused
        assert (out.untyped_storage().data_ptr() in full) == fused
        if fused:
            assert [t.shape[1] for t in seen if t.ndim == 3] == [len(range(16)[h]) for h in head_chunks(16)]


def test_fallbacks_take_the_plain_path():
    K, w2c, q, k, v = inputs(6)
    enc = prep("prope", K, w2c)
    with torch.no_grad():
        assert enc.attend(q, k, v).grad_fn is None
    assert fused_name(enc.attend(q, k, v, dropout_p=0.5)) != "FusedAttentionBackward"
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):  # no fused kernel chosen: plain SDPA, same result
        out = enc.attend(q, k, v)
        assert fused_name(out) != "FusedAttentionBackward"
    assert rel_err(out, enc.attend(q, k, v)) < 1e-13
    assert fused_kernel(q, k, v, dropout_p=0.1) is None
    assert fused_kernel(q, k, v).name == "cpu_flash"
    urope = prep("urope", K, w2c, anchors=[1.0, 2.0], view_chunk=2)
    assert fused_name(urope.attend(q, k, v)) != "FusedAttentionBackward"


@pytest.mark.parametrize("method", ["prope", "urope"])
def test_bf16_autocast_with_gradients(method):
    """Under CPU autocast (bf16 attention, float32 q/k/v as after the q/k norm) the output is bf16,
    the gradients float32, both close to the float32 run."""
    K, w2c, q, k, v = inputs(7, d=32, heads=4, dtype=torch.float32)
    enc = prep(method, K.float(), w2c.float())
    g = torch.randn(q.shape, generator=torch.Generator().manual_seed(8))
    ref, ref_grads = _out_and_grads(enc.attend, q, k, v, g)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, grads = _out_and_grads(enc.attend, q, k, v, g.bfloat16())
    assert out.dtype == torch.bfloat16 and fused_name(out) == "FusedAttentionBackward"
    assert rel_err(out.float(), ref) < 3e-2
    for a, b in zip(grads, ref_grads):
        assert a.dtype == torch.float32 and rel_err(a, b) < 5e-2


class _NewTensors(TorchDispatchMode):
    """Records (op, dtype, number of elements) of every tensor an op creates; views and in-place or
    ``out=`` ops create none."""

    def __init__(self):
        super().__init__()
        self.created = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view and not func._schema.is_mutable:
            self.created += [(str(func), t.dtype, t.numel()) for t in (out if isinstance(out, (tuple, list)) else [out])
                             if isinstance(t, torch.Tensor)]
        return out


@pytest.mark.parametrize("fused", ["on", "off"])
@pytest.mark.parametrize("method", ["prope", "gta", "dppe_dual", "dppe_tadd", "urope"])
def test_float32_attention_keeps_float64_off_the_hot_path(method, fused):
    """A float32 layer's forward and backward may build small tables in float64 (the RoPE
    frequencies, T x d/2 angles), but no float64 or complex128 tensor as large as one head's
    queries: the rotations, camera transforms and gradient sums run in float32 (issue 46), in the
    fused functions and on the plain path (CUDA's default)."""
    K, w2c, q, k, v = inputs(13, d=16, heads=4, dtype=torch.float32)
    enc = prep(method, K.float(), w2c.float(), fused_attention=fused)
    with _NewTensors() as seen:
        out = enc.attend(q, k, v)
        out.backward(torch.ones_like(out))
    assert (fused_name(out) == "FusedAttentionBackward") == (fused == "on")
    head = N * q.shape[-1]
    assert any(dtype == torch.float32 and n >= head for _, dtype, n in seen.created)  # activations are seen
    wide = [c for c in seen.created if c[1] in (torch.float64, torch.complex128) and c[2] >= head]
    assert not wide, wide[:3]


def test_an_unknown_fused_kernel_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown fused kernel 'cudnn'; known: \['cpu_flash', 'cuda_efficient', 'cuda_flash'\]"):
        FusedKernel("cudnn")


def test_head_chunks_cover_the_heads_once():
    for heads in (1, 3, 6, 16, 24):
        covered = [i for h in head_chunks(heads) for i in range(heads)[h]]
        assert covered == list(range(heads)) and len(head_chunks(heads)) <= 8 + (heads % 8 > 0)


@pytest.mark.parametrize("name, dtype, op", [("cuda_flash", torch.bfloat16, "_scaled_dot_product_flash_attention"),
                                             ("cuda_efficient", torch.float32, "_scaled_dot_product_efficient_attention")])
def test_cuda_kernel_signatures_on_fake_tensors(name, dtype, op, monkeypatch):
    """The CUDA forward/backward calls (no GPU needed: fake tensors carry shapes only), each the
    named kernel's own pair of ops."""
    called = []

    class Recorder:
        def __getattr__(self, attr):
            called.append(attr)
            return getattr(torch.ops.aten, attr)

    monkeypatch.setattr(kernels, "_aten", Recorder())
    with FakeTensorMode():
        q, k, v = (torch.empty(2, 3, 40, 64, device="cuda", dtype=dtype) for _ in range(3))
        kernel = FusedKernel(name)
        out, state = kernel.forward(q, k, v)
        grads = kernel.backward(out, q, k, v, out, state)
    assert out.shape == q.shape and [tuple(x.shape) for x in grads] == [tuple(q.shape)] * 3
    assert called == [op, f"{op}_backward"]


def test_a_value_computed_under_fake_tensors_is_not_cached():
    """A shape-only run (depthpe bench memory, FakeTensorMode) must not leave a fake tensor in a cache
    that later real forwards share (the DPT head's uv embedding cache did: real models then returned
    fake depth)."""
    from depthpe.pe.camera import memoized

    cache: dict = {}
    with FakeTensorMode():
        memoized(cache, "k", lambda: torch.zeros(2))
    assert "k" not in cache
    assert torch.equal(memoized(cache, "k", lambda: torch.zeros(2)), torch.zeros(2)) and "k" in cache


def test_urope_chunks_per_device_cover_the_heads_along_group_boundaries(monkeypatch):
    K, w2c, *_ = inputs(9, heads=16)
    enc = prep("urope", K, w2c)  # 4 anchor groups of 4 heads
    assert enc._group_chunks(16, "cpu") == [(h // 4, h // 4 + 1, slice(h, h + 1)) for h in range(16)]
    plans = {1: [(0, 4, slice(0, 16))], 2: [(0, 2, slice(0, 8)), (2, 4, slice(8, 16))],
             8: [(h // 4, h // 4 + 1, slice(h, h + 2)) for h in range(0, 16, 2)],
             3: [(g, g + 1, slice(4 * g, 4 * g + 4)) for g in range(4)]}
    for chunks, plan in plans.items():
        monkeypatch.setitem(camera.HEAD_CHUNKS, "cuda", chunks)
        assert enc._group_chunks(16, "cuda") == plan


@pytest.mark.parametrize("chunks", [1, 2])
def test_urope_slices_spanning_anchor_groups_equal_the_hooks_path(monkeypatch, chunks):
    """The GPU's plan (one call for all heads of a view, or half of them) run on CPU: the keys of
    several anchor groups rotated in one call give the hooks path's values and gradients."""
    K, w2c, q, k, v = inputs(10, d=16, heads=16)
    enc = prep("urope", K, w2c)
    monkeypatch.setitem(camera.HEAD_CHUNKS, "cuda", chunks)
    cuda_plan = enc._group_chunks(16, "cuda")
    monkeypatch.setattr(enc, "_group_chunks", lambda heads, device_type: cuda_plan)
    g = torch.randn(q.shape, dtype=q.dtype, generator=torch.Generator().manual_seed(11))
    _assert_fused_equals_hooks_path(enc, q, k, v, g)


@pytest.mark.parametrize("opts", UROPE_OPTIONS, ids=["heads", "channels"])
def test_urope_fused_with_cached_tables_equals_the_hooks_path(opts):
    """``cache_tables: true`` (the key phases of every query view kept for all layers) runs the
    fused function too (one query view per call, with gradients), reading its phases from the kept
    tables: values and gradients equal the hooks path's."""
    K, w2c, q, k, v = inputs(14, d=16, heads=4)
    enc = prep("urope", K, w2c, cache_tables=True, **opts)
    g = torch.randn(q.shape, dtype=q.dtype, generator=torch.Generator().manual_seed(15))
    _assert_fused_equals_hooks_path(enc, q, k, v, g)


def test_where_sdpa_picks_cudnn_the_flash_or_efficient_kernel_is_used():
    """cuDNN attention (what PyTorch 2.11 picks for bf16 on an H200) has no forward/backward pair
    here: FlashAttention takes its place for fp16/bf16, the memory-efficient kernel otherwise, and
    nothing where the caller allowed neither (sdpa_kernel)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from depthpe.pe.kernels import _instead_of_cudnn

    assert _instead_of_cudnn(torch.bfloat16, 64) == int(SDPBackend.FLASH_ATTENTION)
    assert _instead_of_cudnn(torch.float32, 64) == int(SDPBackend.EFFICIENT_ATTENTION)
    assert _instead_of_cudnn(torch.bfloat16, 512) == int(SDPBackend.EFFICIENT_ATTENTION)
    assert _instead_of_cudnn(torch.float16, 256) == int(SDPBackend.FLASH_ATTENTION)  # FlashAttention's largest
    assert _instead_of_cudnn(torch.float16, 264) == int(SDPBackend.EFFICIENT_ATTENTION)
    assert _instead_of_cudnn(torch.bfloat16, 60) == int(SDPBackend.EFFICIENT_ATTENTION)  # not a multiple of 8
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        assert _instead_of_cudnn(torch.bfloat16, 64) is None
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
        assert _instead_of_cudnn(torch.bfloat16, 64) == int(SDPBackend.EFFICIENT_ATTENTION)


def test_fused_attention_option_and_device_defaults():
    """``pe_options.fused_attention``: auto runs the fused functions on CPU and not on CUDA (where
    the plain path is faster, docs/speed.md); on/off force them; a bad value is a clear error."""
    from depthpe.pe.camera import use_fused

    assert use_fused(None, "cpu") and not use_fused(None, "cuda") and not use_fused(None, "mps")
    assert use_fused(True, "cuda") and not use_fused(False, "cpu")
    K, w2c, q, k, v = inputs(12, heads=4)
    for method in ("prope", "urope"):
        assert fused_name(prep(method, K, w2c).attend(q, k, v)) == "FusedAttentionBackward"
        off = prep(method, K, w2c, fused_attention="off")
        assert off.fused is False and fused_name(off.attend(q, k, v)) != "FusedAttentionBackward"
        assert prep(method, K, w2c, fused_attention=True).fused is True
    assert prep("rope", K, w2c, fused_attention="on") is not None  # no fused function: nothing to switch
    with pytest.raises(ValueError, match="fused_attention must be auto, on or off, got 'sometimes'"):
        prep("prope", K, w2c, fused_attention="sometimes")


@pytest.mark.parametrize("value, fused", [("On", True), ("TRUE", True), ("true", True), (True, True),
                                          ("Off", False), ("false", False), (False, False), ("AUTO", None)])
def test_fused_attention_option_reads_on_off_true_false_in_any_case(value, fused):
    """The spellings a YAML file or a command-line override gives (``fused_attention=true``, ``On``)."""
    K, w2c, *_ = inputs(16, heads=4)
    assert prep("prope", K, w2c, fused_attention=value).fused is fused


def test_fused_kernel_is_chosen_on_fake_tensors():
    """Shape-only runs (``depthpe bench memory``) see the kernel a real run would use: the CPU
    choice asked with real probes, on a fake CUDA device FlashAttention (bf16) or the
    memory-efficient kernel (float32), as a GPU that picks cuDNN attention gets."""
    with FakeTensorMode():
        q = torch.empty(1, 4, 10, 16)
        assert fused_kernel(q, q, q).name == "cpu_flash"
        for dtype, name in ((torch.bfloat16, "cuda_flash"), (torch.float32, "cuda_efficient")):
            qc = torch.empty(1, 4, 10, 64, device="cuda", dtype=dtype)
            assert fused_kernel(qc, qc, qc).name == name


@pytest.mark.parametrize("block", [1, 2, 5])
def test_urope_view_blocks_change_only_the_order(block, monkeypatch):
    """URoPE's fused calls go head by head inside blocks of query views (``urope_fused.calls``):
    every (head, view) pair once, and values and gradients equal to the hooks path, for blocks that
    split 5 views unevenly, a batch of 2 and 8 heads in 4 anchor groups."""
    from depthpe.pe import prepare_encoding, urope_fused
    from tests.helpers.pe import random_cameras, random_qkv

    monkeypatch.setattr(urope_fused, "VIEW_BLOCK", block)
    g = torch.Generator().manual_seed(11)
    K, w2c = random_cameras(2, 5, g, trans=0.3)
    q, k, v = (x.double() for x in random_qkv(2, 8, 5 * 5, 16, g))
    enc = prepare_encoding("urope", K=K, w2c=w2c, image_size=(28, 28), grid=(2, 2), num_special=1,
                           anchors=[0.5, 1.0, 2.0, 4.0])
    order = [(h.start, rows.start // 5) for _, _, h, rows, _ in urope_fused.calls(enc, 8, 16, torch.complex128, "cpu")]
    assert sorted(order) == [(h, i) for h in range(8) for i in range(5)]
    assert order[:2 * min(block, 5)] == [(h, i) for h in (0, 1) for i in range(min(block, 5))]
    _assert_fused_equals_hooks_path(enc, q, k, v, torch.randn(q.shape, dtype=q.dtype, generator=g))


@pytest.mark.parametrize("make", [
    lambda: torch.arange(2 * 3 * 8, dtype=torch.float32).reshape(2, 3, 8),  # a view
    lambda: torch.arange(1 + 2 * 3 * 8, dtype=torch.float32)[1:].reshape(2, 3, 8),  # odd offset
    lambda: torch.arange(2 + 2 * 3 * 8, dtype=torch.float32)[2:].reshape(2, 3, 8),  # even offset
    lambda: torch.arange(2 * 3 * 9, dtype=torch.float32).reshape(2, 3, 9)[..., :8],  # odd row stride
    lambda: torch.arange(4 * 3 * 9, dtype=torch.float32).reshape(4, 3, 9)[::2, :, :8],  # even outer, odd row stride
    lambda: torch.arange(2 * 3 * 16, dtype=torch.float32).reshape(2, 3, 16)[..., ::2],  # channel stride 2
])
def test_urope_complex_view_of_any_layout_holds_the_pairs(make):
    """URoPE's rotations read real pairs as complex numbers: where the layout allows a view (unit
    channel stride, even strides and offset) they get one, else a copy, never an error or wrong pairs."""
    from depthpe.pe.urope_fused import _complex_view, _has_complex_view

    x = make()
    z = _complex_view(x)
    assert torch.equal(torch.view_as_real(z).flatten(-2), x)
    viewable = x.stride(-1) == 1 and x.stride(-2) % 2 == 0 and x.storage_offset() % 2 == 0
    assert _has_complex_view(x) == viewable
    assert (z.data_ptr() == x.data_ptr()) == viewable  # a view only where one is possible
