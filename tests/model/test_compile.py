"""``torch.compile`` support of ``DepthModel.forward`` (docs/compile.md).

``forward`` and the encodings read no tensor values on the host (validation happens where data
enters: ``DepthModel.check_inputs``), so Dynamo captures the whole training forward as one graph
for every preset encoding, with and without gradient checkpointing, and the compiled model gives
the eager outputs and gradients.

The model is the ``tiny`` preset cut to 2 blocks (the blocks are identical; fewer blocks only make
tracing faster) on 2 views of 14 x 28 pixels.
"""

from __future__ import annotations

import pytest
import torch

from depthpe import DepthModel
from depthpe.pe import available_encodings
from tests.helpers.inputs import moving_camera_inputs

COMPILED_ENCODINGS = list(available_encodings())
# Explained without the ``slow`` marker (one case keeps the property in every quick run).
QUICK_CASE = ("prope", True)


def _model(global_pe: str, checkpointing: bool) -> DepthModel:
    """tiny preset, 2 blocks, LayerScale 1 (so the encoding changes the output noticeably)."""
    torch.manual_seed(0)
    config = dict(global_pe=global_pe, gradient_checkpointing=checkpointing, num_blocks=2,
                  head_layers=[0, 0, 1, 1], layerscale_init=1.0)
    return DepthModel.from_preset("tiny", **config).train()




def _cases():
    """Every encoding without checkpointing (``slow``), and QUICK_CASE. With checkpointing, every encoding is
    compiled with ``fullgraph=True`` (which fails on any graph break) by
    ``test_compiled_training_step_matches_eager``, so explaining those again would only repeat it."""
    for pe in COMPILED_ENCODINGS:
        yield pytest.param(pe, False, marks=pytest.mark.slow, id=f"{pe}-plain")
    yield pytest.param(*QUICK_CASE, id=f"{QUICK_CASE[0]}-ckpt")


def test_every_preset_encoding_is_covered():
    assert {"none", "rope", "prope", "dppe_dual", "dppe_tadd", "gta", "urope"} <= set(COMPILED_ENCODINGS)


@pytest.mark.parametrize("global_pe, checkpointing", list(_cases()))
def test_training_forward_has_no_graph_breaks(global_pe, checkpointing):
    torch._dynamo.reset()
    model = _model(global_pe, checkpointing)
    explained = torch._dynamo.explain(model)(*moving_camera_inputs())
    reasons = [str(b.reason).splitlines()[0] for b in explained.break_reasons]
    assert explained.graph_break_count == 0, reasons
    assert explained.graph_count == 1


@pytest.mark.slow
@pytest.mark.parametrize("global_pe, pe_options, training", [
    pytest.param("prope", {}, False, id="prope-eval"),
    pytest.param("dppe_tadd", {"softmax": "blockwise"}, True, id="dppe_tadd-blockwise"),
    pytest.param({"qk": "KRtAdd2d", "vo": "KRtAdd2d"}, {"softmax": "blockwise"}, True, id="appendix-pair"),
    pytest.param({"qk": "Rt", "vo": "2d"}, {}, True, id="pair-Rt-2d"),
])
def test_other_modes_and_pairs_have_no_graph_breaks(global_pe, pe_options, training):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = DepthModel.from_preset("tiny", global_pe=global_pe, pe_options=pe_options, num_blocks=2,
                                   head_layers=[0, 0, 1, 1], gradient_checkpointing=True).train(training)
    explained = torch._dynamo.explain(model)(*moving_camera_inputs())
    assert explained.graph_break_count == 0, [str(b.reason).splitlines()[0] for b in explained.break_reasons]


def _loss_and_grads(model, forward, inputs):
    """Outputs and the gradients of every trainable parameter for a loss reading depth and conf."""
    model.zero_grad(set_to_none=True)
    out = forward(*inputs)
    (out["depth"].log().mean() + out["conf"].mean()).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
    return {k: v.detach() for k, v in out.items()}, grads


@pytest.mark.slow
@pytest.mark.parametrize("global_pe", COMPILED_ENCODINGS)
def test_compiled_training_step_matches_eager(global_pe):
    """aot_eager (Dynamo + AOTAutograd, no code generation), gradient checkpointing on (the harder
    case: checkpointed blocks run inside a higher-order op): depth and conf equal eager to 1e-5,
    every gradient to 1e-5 of the largest gradient."""
    torch._dynamo.reset()
    model = _model(global_pe, checkpointing=True)
    inputs = moving_camera_inputs()
    ref_out, ref_grads = _loss_and_grads(model, model, inputs)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    out, grads = _loss_and_grads(model, compiled, inputs)
    for key in ("depth", "conf"):
        torch.testing.assert_close(out[key], ref_out[key], rtol=1e-5, atol=1e-5)
    scale = max(float(g.abs().max()) for g in ref_grads.values())  # errors relative to the gradients' size
    for name, g in ref_grads.items():
        torch.testing.assert_close(grads[name], g, rtol=1e-4, atol=1e-5 * scale, msg=name)
    if global_pe != "none":  # the comparison sees the encoding: without it the gradients differ
        plain = _model("none", checkpointing=True)
        _, without = _loss_and_grads(plain, plain, inputs)
        assert max(float((without[n] - g).abs().max()) for n, g in ref_grads.items()) > 1e-2 * scale


def _compile_blocks_aot_eager(model) -> None:
    """``run.building.compile_blocks``, with the aot_eager backend (tracing only, seconds)."""
    from depthpe.model.aggregator import AggregatorBlock

    for module in model.modules():
        if isinstance(module, AggregatorBlock):
            module.compile(backend="aot_eager")


@pytest.mark.parametrize("global_pe", [
    "prope", pytest.param("urope", marks=pytest.mark.slow), pytest.param("dppe_tadd", marks=pytest.mark.slow)])
def test_changing_batch_shapes_compile_without_graph_breaks(global_pe):
    """Training changes the views and the aspect every batch, so the compiled blocks see dynamic
    sizes from the second shape on; the fused attention's operators take them as symbolic sizes
    (not inside their JSON spec), so no shape breaks the graph, and every step equals eager."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model = _model(global_pe, checkpointing=True)
    eager = _model(global_pe, checkpointing=True)
    _compile_blocks_aot_eager(model)
    for S, H, W in [(2, 14, 28), (3, 28, 14)]:  # the second shape changes every size: dynamic from then on
        inputs = moving_camera_inputs(S=S, H=H, W=W)
        out, grads = _loss_and_grads(model, model, inputs)
        ref_out, ref_grads = _loss_and_grads(eager, eager, inputs)
        torch.testing.assert_close(out["depth"], ref_out["depth"], rtol=1e-5, atol=1e-5)
        scale = max(float(g.abs().max()) for g in ref_grads.values())
        for name, g in ref_grads.items():
            torch.testing.assert_close(grads[name], g, rtol=1e-4, atol=1e-5 * scale, msg=name)
    assert not counters["graph_break"], list(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] >= 2  # the blocks did run compiled
