"""Look into the global attention of a ``DepthModel`` without changing its forward.

Every global block's attention module (``aggregator.global_blocks[i].attn``) runs
``forward(x, enc)``, which calls ``enc.attend(q, k, v)`` on the prepared encoding.
``observe_global_attention(model, on_attend)`` is a context manager: while it is active, a forward
pre-hook on each of these modules hands it an ``ObservedEncoding`` in place of ``enc``, whose
``attend`` runs the real encoding's ``attend`` on the very same q, k, v (the layer's output is
unchanged) and then calls ``on_attend(i, q, k, enc)`` with the q and k of layer i (after q/k-norm,
before the encoding: (B, heads, N, head_dim)). On exit the hooks are removed; the ordinary forward
(and its ``torch.compile`` graph) never sees any of this. Gradients flow through whatever
``on_attend`` computes from q and k.

Two users: ``record_global_scores`` (below) keeps the pre-softmax scores of chosen query patches
over the patches of chosen key views, per layer, with gradients (the correspondence loss of
training and ``depthpe study correspondence``, docs/correspondence.md); the probe's
``depthpe.probe.capture`` keeps each layer's full attention weights without gradients.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Callable, Sequence

import torch

from ..pe.base import Encoding

__all__ = ["ObservedEncoding", "global_attention_modules", "observe_global_attention", "record_global_scores",
           "score_tokens"]

OnAttend = Callable[[int, torch.Tensor, torch.Tensor, Encoding], None]


class ObservedEncoding(Encoding):
    """Wraps a prepared encoding: ``attend`` is the wrapped encoding's, and afterwards
    ``on_attend(q, k, inner)`` sees its q and k (B, heads, N, head_dim). The diagnostics
    (``attention_logits``, ``attention_scores``, ``attention_probs``) are the wrapped encoding's."""

    def __init__(self, inner: Encoding, on_attend: Callable[[torch.Tensor, torch.Tensor, Encoding], None]):
        self.inner = inner
        self.on_attend = on_attend

    def attend(self, q, k, v, *, dropout_p: float = 0.0):
        out = self.inner.attend(q, k, v, dropout_p=dropout_p)
        self.on_attend(q, k, self.inner)
        return out

    def attention_logits(self, q, k):
        return self.inner.attention_logits(q, k)

    def attention_scores(self, q, k, rows=None, cols=None):
        return self.inner.attention_scores(q, k, rows, cols)

    def attention_probs(self, q, k):
        return self.inner.attention_probs(q, k)


def global_attention_modules(model) -> list[torch.nn.Module]:
    """The attention modules of the global blocks of a ``DepthModel`` (DDP-wrapped or not), or of
    its ``Aggregator`` itself."""
    core = getattr(model, "module", model)
    aggregator = getattr(core, "aggregator", core)
    blocks = getattr(aggregator, "global_blocks", None)
    if blocks is None:
        raise TypeError(f"{type(core).__name__} has no aggregator.global_blocks: not a depthpe DepthModel")
    return [block.attn for block in blocks]


@contextlib.contextmanager
def observe_global_attention(model, on_attend: OnAttend):
    """While active, global-attention layer i of ``model`` calls ``on_attend(i, q, k, encoding)``
    after its attention (module docstring). Outputs are unchanged; hooks are removed on exit."""
    handles = []

    def hook(index, module, args):
        x, enc = args
        return x, ObservedEncoding(enc, functools.partial(on_attend, index))

    try:
        for i, attn in enumerate(global_attention_modules(model)):
            handles.append(attn.register_forward_pre_hook(functools.partial(hook, i)))
        yield
    finally:
        for handle in handles:
            handle.remove()


def score_tokens(grid: tuple[int, int], num_special: int, pairs: Sequence[tuple[int, int]],
                 patches: torch.Tensor | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per pair (query view i, key view j): the (n,) token indices of the query patches of view i
    (``patches``, None = all h*w) and the (h*w,) token indices of the patches of view j, in the
    aggregator's layout (per view ``num_special`` special tokens, then the patches row-major)."""
    P = grid[0] * grid[1]
    T = num_special + P
    chosen = torch.arange(P) if patches is None else patches.cpu().long()
    return [(i * T + num_special + chosen, j * T + num_special + torch.arange(P)) for i, j in pairs]


@contextlib.contextmanager
def record_global_scores(model, grid: tuple[int, int], pairs: Sequence[tuple[int, int]],
                         patches: torch.Tensor | None = None):
    """Record, while active, every global layer's pre-softmax attention scores (after the encoding,
    ``Encoding.attention_scores``: q'.k'/sqrt(d) for one softmax) of the query patches of view i
    over the patches of view j, for each (i, j) of ``pairs``, with gradients when they are enabled.

    Yields a dict filled by each forward: {layer: (B, heads, len(pairs) * n, h*w)}, pairs in order,
    n = len(patches) query patches per pair (None = all h*w; same order as
    ``depthpe.geometry.pair_targets``). grid: (h, w) patches per view of the forward's images.
    """
    core = getattr(model, "module", model)
    config = getattr(core, "config")
    tokens = score_tokens(grid, config.num_special_tokens, pairs, patches)
    T = config.num_special_tokens + grid[0] * grid[1]
    views = 1 + max(max(pair) for pair in pairs)
    scores: dict[int, torch.Tensor] = {}

    def on_attend(index, q, k, enc):
        if q.shape[2] % T or q.shape[2] // T < views:
            raise ValueError(f"record_global_scores: the pairs name {views} views of {T} tokens ({grid[0]}x{grid[1]} "
                             f"patches), but the attention runs over {q.shape[2]} tokens; pass the forward's grid")
        blocks = [enc.attention_scores(q, k, rows.to(q.device), cols.to(q.device)) for rows, cols in tokens]
        scores[index] = torch.cat(blocks, dim=2)

    with observe_global_attention(model, on_attend):
        yield scores
