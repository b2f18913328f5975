"""``model.pe_options.fused_attention`` reaches the global attention: off takes the plain path, and
the model's depth and gradients equal those of the fused path (the CPU default)."""

from __future__ import annotations

import pytest
import torch

from depthpe import DepthModel
from depthpe.pe.kernels import FusedKernel
from tests.helpers.inputs import moving_camera_inputs


def _depth_and_grads(monkeypatch, global_pe: str, **pe_options):
    calls = []
    forward = FusedKernel.forward
    monkeypatch.setattr(FusedKernel, "forward", lambda self, *x: calls.append(1) or forward(self, *x))
    torch.manual_seed(0)
    model = DepthModel.from_preset("tiny", global_pe=global_pe, num_blocks=2, head_layers=[0, 0, 1, 1],
                                   layerscale_init=1.0, pe_options=pe_options).train()
    depth = model(*moving_camera_inputs())["depth"]
    depth.square().mean().backward()
    return depth.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None], len(calls)


@pytest.mark.parametrize("global_pe", ["prope", "urope"])
def test_fused_attention_off_gives_the_same_model(monkeypatch, global_pe):
    depth, grads, fused_calls = _depth_and_grads(monkeypatch, global_pe)
    depth_off, grads_off, fused_calls_off = _depth_and_grads(monkeypatch, global_pe, fused_attention="off")
    assert fused_calls > 0 and fused_calls_off == 0
    assert torch.allclose(depth, depth_off, rtol=1e-5, atol=1e-6)
    assert len(grads) == len(grads_off)
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in zip(grads, grads_off))
