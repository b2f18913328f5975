"""``depthpe.model.resize.resize_bilinear``: F.interpolate's bilinear (align_corners) resize, kept
as one opaque op when compiled on the CPU so that inductor does not turn its backward into a slow
scatter-add (docs/compile.md)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

from depthpe.model.dpt import DPTHead
from depthpe.model.resize import resize_bilinear


def _reference(x, size):
    return F.interpolate(x, size=size, mode="bilinear", align_corners=True)


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("compiled", [False, True])
def test_resize_equals_interpolate_with_its_gradient_and_layout(channels_last, compiled):
    torch.manual_seed(0)
    x = torch.randn(2, 5, 7, 9, dtype=torch.float64)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    x.requires_grad_()
    fn = torch.compile(resize_bilinear, backend="aot_eager", fullgraph=True) if compiled else resize_bilinear
    y = fn(x, (13, 17))
    g = torch.randn_like(y)
    (gx,) = torch.autograd.grad(y, x, g)
    y_ref = _reference(x, (13, 17))
    (gx_ref,) = torch.autograd.grad(y_ref, x, g)
    torch.testing.assert_close(y, y_ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(gx, gx_ref, rtol=0, atol=1e-12)
    assert y.stride() == y_ref.stride() and gx.stride() == gx_ref.stride()


def _graphs_of_compiled_head_step() -> dict[str, str]:
    """Forward and backward ATen graphs (as code) of one compiled training step of a small head."""
    graphs = {}

    def record(name):
        def compiler(gm, example_inputs):
            graphs[name] = gm.code
            return make_boxed_func(gm.forward)
        return compiler

    backend = aot_autograd(fw_compiler=record("forward"), bw_compiler=record("backward"))
    torch.manual_seed(0)
    head = DPTHead(16, patch_size=14, features=8, out_channels=(8, 8, 8, 8))
    tokens = [torch.randn(1, 2, 4, 16, requires_grad=True) for _ in range(4)]
    step = torch.compile(lambda toks: head(toks, (28, 28))[0].mean(), backend=backend, fullgraph=True)
    step(tokens).backward()
    return graphs


def test_compiled_head_resizes_through_the_opaque_op_on_cpu():
    graphs = _graphs_of_compiled_head_step()
    assert graphs["forward"].count("depthpe.resize_bilinear.default") == 5  # 4 fusion blocks + output
    assert graphs["backward"].count("depthpe.resize_bilinear_backward.default") == 5
    assert "upsample_bilinear2d" not in graphs["forward"] + graphs["backward"]
