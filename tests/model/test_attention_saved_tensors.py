"""What the model's attention keeps for backward: where the q/k norms work on float32 copies (CUDA
autocast runs layer_norm in float32), not the whole qkv output through v."""

from __future__ import annotations

import pytest
import torch

from depthpe.model.blocks import Attention
from depthpe.pe import prepare_encoding
from tests.helpers.pe import random_cameras

S, GRID, NS, DIM, HEADS = 2, (2, 2), 1, 64, 4
N = S * (NS + GRID[0] * GRID[1])


def _saved_storages(method: str, float32_norms: bool) -> tuple[set[int], int]:
    """(data pointers of the storages saved for backward, the qkv output's storage pointer), in bf16
    autocast on CPU; ``float32_norms``: the norms cast their input to float32 first, as CUDA autocast
    does (CPU autocast keeps layer_norm in bfloat16)."""
    torch.manual_seed(0)
    attn = Attention(DIM, HEADS)
    if float32_norms:
        for norm in (attn.q_norm, attn.k_norm):
            norm.register_forward_pre_hook(lambda m, args: (args[0].float(),))
    K, w2c = random_cameras(1, S, torch.Generator().manual_seed(1), trans=0.3)
    enc = prepare_encoding(method, K=K.float(), w2c=w2c.float(), image_size=(28, 28), grid=GRID, num_special=NS)
    qkv = []
    attn.qkv.register_forward_hook(lambda m, i, o: qkv.append(o.untyped_storage().data_ptr()))
    saved = set()
    x = torch.randn(1, N, DIM, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16), \
            torch.autograd.graph.saved_tensors_hooks(lambda t: saved.add(t.untyped_storage().data_ptr()) or t,
                                                     lambda t: t):
        attn(x, enc).sum().backward()
    return saved, qkv[0]


@pytest.mark.parametrize("method", ["rope", "prope", "urope"])
def test_with_float32_norms_the_qkv_output_is_not_kept_through_v(method):
    saved, qkv = _saved_storages(method, float32_norms=True)
    assert qkv not in saved  # v is a copy; the norms saved float32 copies of q and k
    saved, qkv = _saved_storages(method, float32_norms=False)
    assert qkv in saved  # bf16 norms keep it anyway (they save their inputs, views of it): no copy
