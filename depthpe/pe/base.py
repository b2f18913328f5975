"""The shape every attention positional encoding shares, and the registry of encodings by name.

An encoding is *prepared* once per forward pass from the geometry (cameras, image size, patch grid,
special tokens) and then *applied* in every attention layer around one unmodified
``torch.nn.functional.scaled_dot_product_attention`` call:

    q', k', v' = enc.transform_q(q), enc.transform_k(k), enc.transform_v(v)
    o = enc.transform_out(SDPA(q', k', v'))

Tensors are (B, heads, N, head_dim) with N = S * T tokens, view-major; inside a view the
``num_special`` special tokens come first, then the h*w patch tokens row-major (x fastest).
No encoding materializes an attention matrix. Encodings that need more than one SDPA call (URoPE)
override ``attend``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Callable

import torch
import torch.nn.functional as F

__all__ = [
    "Encoding",
    "register_encoding",
    "prepare_encoding",
    "available_encodings",
    "token_positions",
]


class Encoding:
    """A prepared positional encoding. The base class is the identity (method ``none``)."""

    def transform_q(self, q: torch.Tensor) -> torch.Tensor:
        return q

    def transform_k(self, k: torch.Tensor) -> torch.Tensor:
        return k

    def transform_v(self, v: torch.Tensor) -> torch.Tensor:
        return v

    def transform_out(self, o: torch.Tensor) -> torch.Tensor:
        return o

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, dropout_p: float = 0.0
    ) -> torch.Tensor:
        """Encoded attention. q, k, v: (B, heads, N, head_dim) -> (B, heads, N, head_dim)."""
        o = F.scaled_dot_product_attention(
            self.transform_q(q), self.transform_k(k), self.transform_v(v), dropout_p=dropout_p
        )
        return self.transform_out(o)


_REGISTRY: dict[str, Callable[..., Encoding]] = {}


def register_encoding(name: str):
    """Decorator registering ``factory(**geometry, **options) -> Encoding`` under ``name``."""

    def deco(factory):
        if name in _REGISTRY:
            raise ValueError(f"encoding {name!r} is already registered")
        _REGISTRY[name] = factory
        return factory

    return deco


def available_encodings() -> list[str]:
    """Names accepted by ``prepare_encoding`` and by ``model.global_pe``."""
    return sorted(_REGISTRY)


def prepare_encoding(
    method: str | Mapping[str, str],
    *,
    image_size: tuple[int, int],
    grid: tuple[int, int],
    num_special: int = 0,
    patch_offset: int = 1,
    K: torch.Tensor | None = None,
    w2c: torch.Tensor | None = None,
    num_views: int | None = None,
    **options,
) -> Encoding:
    """Prepare the encoding ``method`` for one forward pass.

    method: a registered name (``available_encodings()``) or a pair ``{"qk": NAME, "vo": NAME}`` of
    DPPE transforms (``depthpe.pe.pairs``, ``depthpe.model.encoding_spec``).
    image_size: (H, W) pixels; grid: (h, w) patches per view; num_special: special tokens per view
    (RoPE position 0, their own view's camera); patch_offset: patch (x, y) sits at RoPE position
    (x + patch_offset, y + patch_offset). K: (B, S, 3, 3) pixel intrinsics and w2c: (B, S, 3|4, 4)
    OpenCV world-to-camera, required by the camera encodings. num_views: S, inferred from K/w2c when
    given. ``options`` are method specific (``pe_options`` in the model config).
    """
    if isinstance(method, Mapping):
        from .pairs import make_pair_encoding

        factory = functools.partial(make_pair_encoding, dict(method))
    elif method in _REGISTRY:
        factory = _REGISTRY[method]
    else:
        raise ValueError(
            f"unknown positional encoding {method!r}; available: {', '.join(available_encodings())} "
            "or a pair {qk: NAME, vo: NAME}"
        )
    if num_views is None:
        cams = K if K is not None else w2c
        num_views = int(cams.shape[1]) if cams is not None else 1
    return factory(
        image_size=tuple(image_size),
        grid=tuple(grid),
        num_special=int(num_special),
        patch_offset=int(patch_offset),
        K=K,
        w2c=w2c,
        num_views=int(num_views),
        **options,
    )


def token_positions(
    num_views: int,
    grid: tuple[int, int],
    num_special: int,
    patch_offset: int,
    *,
    dtype=torch.float32,
    device=None,
) -> torch.Tensor:
    """(S * T, 2) RoPE positions (y, x) of all tokens, view-major, T = num_special + h * w.

    Special tokens sit at (0, 0); patch (x, y) at (y + patch_offset, x + patch_offset), row-major
    with x fastest; every view reuses the same positions (VGGT convention).
    """
    h, w = grid
    yy, xx = torch.meshgrid(
        torch.arange(h, dtype=dtype, device=device),
        torch.arange(w, dtype=dtype, device=device),
        indexing="ij",
    )
    patches = torch.stack([yy.reshape(-1), xx.reshape(-1)], dim=-1) + patch_offset
    special = torch.zeros(num_special, 2, dtype=dtype, device=device)
    per_view = torch.cat([special, patches], dim=0)
    return per_view.repeat(num_views, 1)
