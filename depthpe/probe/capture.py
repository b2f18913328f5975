"""Capture the attention weights of a model's global-attention layers without changing its forward.

``capture_global_attention(model, on_layer)`` is a context manager. While it is active, a forward
pre-hook on every global block's attention module (``aggregator.global_blocks[i].attn``, whose
``forward(x, enc)`` calls ``enc.attend(q, k, v)``) hands that module a ``RecordingEncoding`` in place
of the prepared encoding. Its ``attend`` first runs the real encoding's ``attend`` on the very same
q, k, v (so the layer's output is the one it would be without the capture), then recomputes the
weights of that SDPA call from the same q and k (``Encoding.attention_probs``, no gradient) and
passes them to ``on_layer``. On exit the hooks are removed: the model is exactly as before, and its
ordinary forward (and its ``torch.compile`` graph) never sees any of this.

The weights are a (B, heads, N, N) matrix per layer: use it on small models (the probe checks the
size before it runs; ``attention_bytes``).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Callable

import torch

from ..pe.base import Encoding

__all__ = ["RecordingEncoding", "capture_global_attention", "attention_bytes"]

OnLayer = Callable[[int, torch.Tensor, Encoding], None]


class RecordingEncoding(Encoding):
    """Wraps a prepared encoding: ``attend`` is the wrapped encoding's, and afterwards
    ``on_attention(probs (B, heads, N, N) float32, encoding)`` receives its attention weights."""

    def __init__(self, inner: Encoding, on_attention: Callable[[torch.Tensor, Encoding], None]):
        self.inner = inner
        self.on_attention = on_attention

    def attend(self, q, k, v, *, dropout_p: float = 0.0):
        out = self.inner.attend(q, k, v, dropout_p=dropout_p)
        with torch.no_grad():
            self.on_attention(self.inner.attention_probs(q.detach(), k.detach()), self.inner)
        return out

    def attention_probs(self, q, k):
        return self.inner.attention_probs(q, k)


def _global_attention_modules(model) -> list[torch.nn.Module]:
    """The attention modules of the global blocks of a ``DepthModel`` (DDP-wrapped or not)."""
    core = getattr(model, "module", model)
    aggregator = getattr(core, "aggregator", None)
    blocks = getattr(aggregator, "global_blocks", None)
    if blocks is None:
        raise TypeError(f"{type(core).__name__} has no aggregator.global_blocks: not a depthpe DepthModel")
    return [block.attn for block in blocks]


@contextlib.contextmanager
def capture_global_attention(model, on_layer: OnLayer):
    """While active, global-attention layer i of ``model`` (a ``DepthModel``) calls
    ``on_layer(i, probs, encoding)`` with its attention weights probs (B, heads, N, N) float32 (rows:
    queries, columns: keys, tokens view-major) and the prepared encoding. Outputs are unchanged."""
    handles = []

    def hook(index, module, args):
        x, enc = args
        return x, RecordingEncoding(enc, functools.partial(on_layer, index))

    try:
        for i, attn in enumerate(_global_attention_modules(model)):
            handles.append(attn.register_forward_pre_hook(functools.partial(hook, i)))
        yield
    finally:
        for handle in handles:
            handle.remove()


def attention_bytes(batch: int, heads: int, tokens: int) -> int:
    """Bytes of one layer's float32 weights (batch, heads, tokens, tokens) as the capture makes them."""
    return 4 * batch * heads * tokens * tokens
