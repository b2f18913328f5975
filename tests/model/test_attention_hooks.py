"""``depthpe.model.attention_hooks``: the global attention's scores of chosen query patches over the
patches of chosen key views, recorded per layer without changing the forward, with gradients."""

from __future__ import annotations

import pytest
import torch

from depthpe import DepthModel
from depthpe.geometry import cyclic_pairs, pair_blocks
from depthpe.model.attention_hooks import record_global_scores
from depthpe.probe.capture import capture_global_attention
from tests.helpers.inputs import moving_camera_inputs

GRID = (1, 2)  # 14 x 28 px images


def _tiny(global_pe, **options) -> DepthModel:
    torch.manual_seed(0)
    return DepthModel.from_preset("tiny", global_pe=global_pe, num_blocks=2, head_layers=[0, 0, 1, 1],
                                  layerscale_init=1.0, pe_options=options)


@pytest.mark.parametrize("global_pe,options", [("rope", {}), ("urope", {}), ("dppe_tadd", {"softmax": "blockwise"})])
def test_scores_are_the_attention_of_each_pair_and_leave_outputs_unchanged(global_pe, options):
    """softmax of the scores over view j's patches = the layer's attention weights on those patches,
    renormalized (the probe's capture of the same forward); the outputs are bit-identical."""
    model = _tiny(global_pe, **options).eval()
    inputs = moving_camera_inputs(S=3)
    pairs, patches = cyclic_pairs(3), torch.tensor([1])
    probs = {}
    with torch.no_grad():
        before = model(*inputs)
        with capture_global_attention(model, lambda i, p, e: probs.setdefault(i, p)), \
                record_global_scores(model, GRID, pairs, patches) as scores:
            during = model(*inputs)
    assert torch.equal(before["depth"], during["depth"])
    assert sorted(scores) == [0, 1]
    ns = model.config.num_special_tokens
    for layer, s in scores.items():
        assert s.shape == (1, model.config.num_heads, len(pairs) * 1, 2)
        block = pair_blocks(probs[layer], GRID, ns, pairs, patches)
        torch.testing.assert_close(s.softmax(-1), block / block.sum(-1, keepdim=True), atol=1e-5, rtol=1e-4)


def test_scores_carry_gradients_to_the_global_blocks():
    model = _tiny("prope").train()
    with record_global_scores(model, GRID, [(0, 1)]) as scores:
        model.aggregator(*moving_camera_inputs(S=2))
    scores[1].sum().backward()
    assert model.aggregator.global_blocks[1].attn.qkv.weight.grad.abs().sum() > 0
    assert not any(b.attn._forward_pre_hooks for b in model.aggregator.global_blocks)


def test_a_grid_that_does_not_fit_the_forward_is_one_clear_error():
    model = _tiny("rope").eval()
    with pytest.raises(ValueError, match="pass the forward's grid"), torch.no_grad(), \
            record_global_scores(model, (2, 2), [(0, 1)]):
        model(*moving_camera_inputs(S=2))
