"""Functional form of the encodings: one call does prepare + attend.

For a model with many layers, prepare once per forward pass with ``prepare_encoding`` and call
``enc.attend(q, k, v)`` in every layer; ``multiview_attention`` is the convenience form. The top
of ``depthpe.pe``: it imports the registry (``registry``) and the name table (``spec``).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from .registry import available_encodings, prepare_encoding
from .spec import encoding_pair

__all__ = ["multiview_attention"]


def multiview_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    method: str | Mapping[str, str],
    K: torch.Tensor | None = None,
    w2c: torch.Tensor | None = None,
    image_size: tuple[int, int],
    grid: tuple[int, int],
    num_special: int = 0,
    patch_offset: int = 1,
    dropout_p: float = 0.0,
    **options,
) -> torch.Tensor:
    """Multi-view attention with positional encoding ``method``.

    q, k, v: (B, heads, S*T, head_dim), tokens view-major; inside a view ``num_special`` special
    tokens first (RoPE position 0, their own view's camera), then the h*w patch tokens row-major
    with x fastest at positions (x + patch_offset, y + patch_offset).
    K: (B, S, 3, 3) pixel intrinsics; w2c: (B, S, 3, 4) or (B, S, 4, 4) OpenCV world-to-camera
    (both may be None for "none"/"rope"); image_size: (H, W) pixels; grid: (h, w) patches.
    method: one of ``available_encodings()`` or a pair ``{"qk": NAME, "vo": NAME}`` of DPPE
    transforms (``depthpe.pe.spec``); ``options`` are method specific (e.g. urope
    ``anchors=``, dppe_tadd ``softmax="blockwise"``). Returns (B, heads, S*T, head_dim).
    """
    if q.ndim != 4 or k.shape != q.shape or v.shape[:-1] != q.shape[:-1]:
        raise ValueError(
            "q, k, v must be (B, heads, S*T, head_dim) with equal shapes, got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if isinstance(method, Mapping):
        encoding_pair(method)  # raises ValueError naming the valid pairs
    elif method not in available_encodings():
        raise ValueError(f"unknown method {method!r}; available: {', '.join(available_encodings())}")
    h, w = grid
    T = num_special + h * w
    if K is None and w2c is None:
        if q.shape[2] % T:
            raise ValueError(f"{q.shape[2]} tokens is not a multiple of {T} tokens per view")
        num_views = q.shape[2] // T
    else:
        num_views = None
    enc = prepare_encoding(
        method, K=K, w2c=w2c, image_size=image_size, grid=grid, num_special=num_special,
        patch_offset=patch_offset, num_views=num_views, **options,
    )
    return enc.attend(q, k, v, dropout_p=dropout_p)
