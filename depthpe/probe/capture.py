"""Capture the attention weights of a model's global-attention layers without changing its forward.

``capture_global_attention(model, on_layer)`` is a context manager built on
``depthpe.model.attention_hooks.observe_global_attention``: while it is active, each global layer
runs its real encoding's ``attend`` (so the layer's output is the one it would be without the
capture), then the weights of that attention are recomputed from the same q and k
(``Encoding.attention_probs``, no gradient) and passed to ``on_layer``. On exit the hooks are
removed: the model is exactly as before, and its ordinary forward (and its ``torch.compile`` graph)
never sees any of this.

The weights are a (B, heads, N, N) matrix per layer: use it on small models (the probe checks the
size before it runs; ``attention_bytes``).
"""

from __future__ import annotations

import contextlib
from typing import Callable

import torch

from ..model.attention_hooks import observe_global_attention
from ..pe.base import Encoding

__all__ = ["capture_global_attention", "attention_bytes"]

OnLayer = Callable[[int, torch.Tensor, Encoding], None]


@contextlib.contextmanager
def capture_global_attention(model, on_layer: OnLayer):
    """While active, global-attention layer i of ``model`` (a ``DepthModel``) calls
    ``on_layer(i, probs, encoding)`` with its attention weights probs (B, heads, N, N) float32 (rows:
    queries, columns: keys, tokens view-major) and the prepared encoding. Outputs are unchanged."""

    def on_attend(index: int, q: torch.Tensor, k: torch.Tensor, enc: Encoding) -> None:
        with torch.no_grad():
            on_layer(index, enc.attention_probs(q.detach(), k.detach()), enc)

    with observe_global_attention(model, on_attend):
        yield


def attention_bytes(batch: int, heads: int, tokens: int) -> int:
    """Bytes of one layer's float32 weights (batch, heads, tokens, tokens) as the capture makes them."""
    return 4 * batch * heads * tokens * tokens
