"""The shape every attention positional encoding shares (``Encoding``) and the token positions.

An encoding is *prepared* once per forward pass from the geometry (cameras, image size, patch grid,
special tokens) and then *applied* in every attention layer around one unmodified
``torch.nn.functional.scaled_dot_product_attention`` call:

    q', k', v' = enc.transform_q(q), enc.transform_k(k), enc.transform_v(v)
    o = enc.transform_out(SDPA(q', k', v'))

Tensors are (B, heads, N, head_dim) with N = S * T tokens, view-major; inside a view the
``num_special`` special tokens come first, then the h*w patch tokens row-major (x fastest).
No encoding materializes an attention matrix in ``attend``; ``attention_probs(q, k)`` recomputes
the weights of that SDPA call for diagnostics. Encodings that need more than one SDPA call (URoPE)
override ``attend``. This module imports nothing of depthpe; the registry of encodings by name is
``depthpe.pe.registry``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = ["Encoding", "token_positions"]


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

    def attention_logits(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """The logits of the SDPA call in ``attend``: (B, heads, N, N) = q' k'^T / sqrt(head_dim) with
        q' = transform_q(q), k' = transform_k(k). Materializes the matrix: for tests and diagnostics."""
        return Encoding.attention_scores(self, q, k)

    def attention_scores(self, q: torch.Tensor, k: torch.Tensor, rows: torch.Tensor | None = None,
                         cols: torch.Tensor | None = None) -> torch.Tensor:
        """Pre-softmax scores of some queries over some keys, with gradients: (B, heads, len(rows),
        len(cols)) for token indices rows (queries) and cols (keys) of the N tokens (None = all).

        Their softmax over all N keys is ``attention_probs``: for one SDPA call they are its logits
        q' k'^T / sqrt(head_dim) (computed explicitly, only for the chosen rows and columns); an
        encoding with several softmaxes returns the log of its mixed weights. For the
        correspondence loss and ``depthpe study correspondence`` (docs/correspondence.md)."""
        qt, kt = self.transform_q(q), self.transform_k(k)
        if rows is not None:
            qt = qt[:, :, rows]
        if cols is not None:
            kt = kt[:, :, cols]
        return qt @ kt.transpose(-1, -2) / math.sqrt(qt.shape[-1])

    def attention_probs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """The attention weights ``attend`` mixes the values with: (B, heads, N, N) float32, each row
        a softmax over all N keys of ``attention_logits``. Recomputed from q and k (``attend`` never
        materializes them): for diagnostics (``depthpe probe attention``). Encodings with more than
        one softmax per head override it."""
        return self.attention_logits(q, k).float().softmax(dim=-1)


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
