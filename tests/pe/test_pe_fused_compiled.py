"""The fused attention under ``torch.compile`` (``depthpe.pe.fused``'s custom operators): the
operators pass ``torch.library.opcheck`` (schema, fake implementation, autograd registration,
dynamic shapes), compiled attention equals eager attention with its gradients, and compiled code
keeps for backward exactly what the eager ``FusedAttention`` keeps (plus the encoding's own small
tensors), where the compiler alone would choose otherwise (docs/speed.md, "Compiled against eager")."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.pe_fused import inputs, prep

CASES = [("prope", {}), ("dppe_tadd", {}), ({"qk": "vggt2d", "vo": "KRtAdd2d"}, {}),
         ("urope", {"anchors": [1.0, 2.0]}),
         ("urope", {"anchors": [1.0, 2.0], "anchor_assignment": "channels"})]
IDS = ["prope", "dppe_tadd", "vggt2d-KRtAdd2d", "urope", "urope-channels"]


def _encoding(method, opts, dtype):
    K, w2c, q, k, v = inputs(3, d=16, heads=4, dtype=dtype)
    return prep(method, K.to(dtype), w2c.to(dtype), **opts), (q, k, v)


def _compiled(enc):
    torch._dynamo.reset()
    return torch.compile(lambda q, k, v: enc.attend(q, k, v), backend="aot_eager", fullgraph=True)


def _saved_bytes(fn, q, k, v) -> int:
    """Bytes of the distinct storages autograd keeps for backward while ``fn(q, k, v)`` runs."""
    storages = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(q, k, v)
    return sum(storages.values())


@pytest.mark.parametrize("method, opts", CASES[::2] + CASES[3:4], ids=IDS[::2] + IDS[3:4])
def test_operator_passes_opcheck(method, opts):
    enc, (q, k, v) = _encoding(method, opts, torch.float32)
    kind, tensors, sizes, spec = enc.flat()
    torch.library.opcheck(torch.ops.depthpe.fused_attention.default,
                          (q, k, v, tensors, sizes, kind, spec, "cpu_flash", torch.float32))


@pytest.mark.parametrize("method, opts", CASES, ids=IDS)
def test_compiled_attention_equals_eager(method, opts):
    enc, (q, k, v) = _encoding(method, opts, torch.float64)
    g = torch.randn(q.shape, dtype=q.dtype, generator=torch.Generator().manual_seed(4))
    results = []
    for fn in (lambda a, b, c: enc.attend(a, b, c), _compiled(enc)):
        out = fn(q, k, v)
        results.append((out.detach(), *torch.autograd.grad(out, (q, k, v), g)))
    for eager, compiled in zip(*results):
        torch.testing.assert_close(compiled, eager, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("method, opts", CASES[:2] + CASES[3:4], ids=["prope", "dppe_tadd", "urope"])
def test_compiled_attention_keeps_what_eager_keeps(method, opts):
    enc, (q, k, v) = _encoding(method, opts, torch.float32)
    eager = _saved_bytes(lambda a, b, c: enc.attend(a, b, c), q, k, v)
    own = sum(t.untyped_storage().nbytes() for t in enc.flat()[1])  # camera matrices / key positions
    assert _saved_bytes(_compiled(enc), q, k, v) == eager + own
    enc.fused = False  # the plain path, compiled: the compiler's own choice keeps something else
    assert _saved_bytes(_compiled(enc), q, k, v) != eager + own
