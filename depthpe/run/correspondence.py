"""The correspondence term of a forward pass (``loss.correspondence_weight``, docs/correspondence.md).

``forward_with_correspondence`` runs a forward of the model (a closure: the whole ``DepthModel`` in
training, its aggregator alone in ``depthpe study correspondence``) while every global layer's
scores of the chosen query patches over the key view's patches are recorded
(``depthpe.model.attention_hooks.record_global_scores``), computes the true key patch of every
query from the GT depth and cameras (``depthpe.geometry``) and returns the forward's output
with the correspondence loss (``losses.correspondence_loss``), averaged over the global layers.
"""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

import torch

from ..geometry import pair_targets, patch_matches
from ..model.attention_hooks import record_global_scores
from .losses import correspondence_loss

__all__ = ["forward_with_correspondence"]

Out = TypeVar("Out")


def forward_with_correspondence(model, forward: Callable[[], Out], depth: torch.Tensor, valid: torch.Tensor,
                                K: torch.Tensor, w2c: torch.Tensor, grid: tuple[int, int], *,
                                pairs: Sequence[tuple[int, int]], patches: torch.Tensor | None = None,
                                depth_tolerance: float = 0.05) -> tuple[Out, torch.Tensor]:
    """(``forward()``'s output, the correspondence loss: mean over global layers, 0-dim float32).

    model: the ``DepthModel`` (or its aggregator; DDP-wrapped or not) that ``forward`` runs;
    depth, valid: (B, S, H, W) GT z-depth and its mask; K: (B, S, 3, 3) pixels; w2c: (B, S, 3|4, 4)
    the TRUE world-to-camera (the matches come from them, whatever cameras ``forward`` feeds the
    model); grid: (h, w) patches per view; pairs: (query view, key view) pairs; patches: the query
    patches of each query view (None = all); depth_tolerance: the occlusion test's relative depth
    agreement (``depthpe.geometry.patch_matches``).
    """
    with record_global_scores(model, grid, pairs, patches) as scores:
        out = forward()
    with torch.no_grad():
        matches = patch_matches(depth, valid, K, w2c, grid, depth_tolerance=depth_tolerance)
        target = pair_targets(matches, pairs, patches).to(depth.device)
    if not scores:
        raise RuntimeError("forward_with_correspondence: the forward ran no global attention layer")
    layers = [correspondence_loss(scores[i], target) for i in sorted(scores)]
    return out, torch.stack(layers).mean()
