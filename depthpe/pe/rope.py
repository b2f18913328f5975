"""VGGT's 2D rotary position embedding, and the ``none`` encoding.

VGGT convention (docs/encodings.md): positions are (y, x); the first half of the
head dim is rotated by y, the second half by x. Inside each half of width w = d/2 the pairing is
"rotate-half" (channel c with c + w/2) with frequencies ``base ** (-2 m / w)``, m = 0..w/2-1,
base 100, and the map is a rotation by +theta: (a, b) -> (a cos - b sin, b cos + a sin).
Applied to q and k only. cos/sin are computed directly (not looked up), so fractional positions
work too (URoPE uses them); for integer positions this equals VGGT's table lookup.
"""

from __future__ import annotations

import torch

from .base import Encoding

__all__ = ["rope_angles", "apply_rope_1d", "apply_rope_2d", "Rope2D"]


def rope_angles(pos: torch.Tensor, dim: int, base: float = 100.0) -> torch.Tensor:
    """Angles (..., dim/2) = pos[..., None] * base ** (-2 m / dim) for m = 0..dim/2-1.

    pos: (...) positions (float); dim: width of the rotated block (even). Computed in float32 or
    float64 (whichever pos is; integers become float32).
    """
    if dim % 2:
        raise ValueError(f"RoPE block width must be even, got {dim}")
    if not pos.is_floating_point():
        pos = pos.float()
    m = torch.arange(dim // 2, dtype=pos.dtype, device=pos.device)
    inv_freq = base ** (-2.0 * m / dim)
    return pos.unsqueeze(-1) * inv_freq


def apply_rope_1d(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE: x (..., N, w), angles broadcastable to (..., N, w/2) -> (..., N, w).

    Channel c is paired with c + w/2; (a, b) -> (a cos - b sin, b cos + a sin).
    """
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def apply_rope_2d(x: torch.Tensor, pos: torch.Tensor, base: float = 100.0) -> torch.Tensor:
    """VGGT 2D RoPE. x: (..., N, d) with d % 4 == 0; pos: (..., N, 2) positions (y, x).

    The first d/2 channels are rotated by y, the last d/2 by x.
    """
    d = x.shape[-1]
    if d % 4:
        raise ValueError(f"2D RoPE needs a head dim divisible by 4, got {d}")
    half = d // 2
    ay = rope_angles(pos[..., 0], half, base)
    ax = rope_angles(pos[..., 1], half, base)
    return torch.cat(
        [apply_rope_1d(x[..., :half], ay), apply_rope_1d(x[..., half:], ax)], dim=-1
    )


class Rope2D(Encoding):
    """VGGT 2D RoPE on q and k; v and the output pass through unchanged."""

    def __init__(self, positions: torch.Tensor, base: float = 100.0):
        self.positions = positions  # (N, 2) (y, x)
        self.base = base

    def _rotate(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-2] != self.positions.shape[0]:
            raise ValueError(
                f"RoPE prepared for {self.positions.shape[0]} tokens, got {x.shape[-2]}"
            )
        # Angles in float64 for float64 inputs (exactness tests), float32 otherwise (also under autocast).
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        pos = self.positions.to(device=x.device, dtype=dtype)
        return apply_rope_2d(x, pos, self.base)

    transform_q = _rotate
    transform_k = _rotate

