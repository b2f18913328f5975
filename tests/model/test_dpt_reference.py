"""The DPT head computes what VGGT's does: its rewritten forward (1x1 convs as channels-last
matmuls, out_conv before the resize, the memoized position embedding, frame chunks) against an
independent literal reading of VGGT's (tests/helpers/dpt_reference.py), with the same weights."""

from __future__ import annotations

import pytest
import torch

from depthpe.model.dpt import DPTHead
from tests.helpers import dpt_reference

DIM_IN = 32
IMAGE_SIZES = [(42, 70), (56, 42)]  # 3 x 5 and 4 x 3 patches: odd grids, both orientations


def _head(dtype=torch.float32) -> DPTHead:
    """A small head with its default random init and a random LayerNorm, so no wiring hides behind
    an identity."""
    torch.manual_seed(0)
    head = DPTHead(DIM_IN, features=16, out_channels=(8, 16, 24, 32)).to(dtype)
    with torch.no_grad():
        head.norm.weight.uniform_(0.5, 1.5)
        head.norm.bias.uniform_(-0.5, 0.5)
    return head.eval()


def _tokens(n: int, image_size: tuple[int, int], dtype=torch.float32) -> list[torch.Tensor]:
    """4 tapped layers of ``n`` views: (n, h*w, DIM_IN) each."""
    h, w = image_size[0] // 14, image_size[1] // 14
    return [torch.randn(n, h * w, DIM_IN, dtype=dtype) for _ in range(4)]


@pytest.mark.parametrize("image_size", IMAGE_SIZES)
def test_the_heads_raw_output_is_vggts(image_size):
    """float64, so that only a different computation (not rounding) can tell the two apart."""
    head = _head(torch.float64)
    tokens = _tokens(3, image_size, torch.float64)
    with torch.no_grad():
        got = head._decode(tokens, image_size)
        want = dpt_reference.raw_output(head, tokens, image_size)
    assert got.shape == (3, 2, *image_size)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("chunk", [0, 5])  # 5: a last chunk of one view
def test_depth_and_confidence_are_vggts_activations_per_view(chunk):
    """forward: (B, S) views in, exp(c0) and 1 + exp(c1) out, each view's own, in float32; frame
    chunks (no gradients) change nothing."""
    head, image_size = _head(), IMAGE_SIZES[0]
    head.frames_chunk_size = chunk
    tokens = _tokens(6, image_size)
    with torch.no_grad():
        depth, conf = head([t.reshape(2, 3, *t.shape[1:]) for t in tokens], image_size)
        want_depth, want_conf = dpt_reference.depth_and_conf(head, tokens, image_size)
    assert depth.shape == conf.shape == (2, 3, *image_size) and depth.dtype == torch.float32
    torch.testing.assert_close(depth.reshape(6, *image_size), want_depth, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(conf.reshape(6, *image_size), want_conf, rtol=1e-4, atol=1e-5)
