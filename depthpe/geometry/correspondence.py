"""True cross-view correspondences of patches, from ground-truth depth and cameras (pure maths).

A query patch p = (row, col) of view i stands for one 3D point: its centre pixel
``u = (col + 0.5) W/w - 0.5``, ``v = (row + 0.5) H/h - 0.5`` (OpenCV, pixel centres at integers, the
convention of URoPE's key lifting) lifted to the median of the valid GT depths inside the patch.
That point is moved into every other view j and projected; the match is usable (``ok``) when

* at least ``min_valid`` of the query patch's pixels have valid depth,
* the point is in front of camera j (z > 0) and projects inside image j,
* it is not occluded: the GT depth of view j at the nearest pixel is valid and agrees with the
  point's z-depth in camera j within ``depth_tolerance`` (relative),
* j != i.

The target is the patch of view j that contains the projected pixel. ``window_masks`` turns targets
into the key patches within ``radius`` patches (Chebyshev distance) of them. Depths are in whatever
unit depth and w2c share (the probe passes the normalized scene unit).

For a loss or an accuracy over chosen (query view i, key view j) pairs, ``pair_targets`` flattens the
matches to one key patch index per query (-1 = no usable match), ``pair_blocks`` cuts the same
(query patch, key patch) blocks out of a full (B, heads, N, N) attention matrix, and ``match_hits``
says which queries' best-scoring key patch lies within r patches of the target. Used by the probe
(``depthpe probe attention``), the correspondence loss of training and ``depthpe bench
correspondence`` (docs/correspondence.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from .cameras import invert_intrinsics, invert_w2c, project_points, to_4x4, transform_points


@dataclass
class PatchMatches:
    """Correspondences of every query patch of view i in every view j, P = h*w patches per view.

    target: (B, S_i, P, S_j, 2) long (row, col) of the patch of view j holding the reprojection;
    ok: (B, S_i, P, S_j) bool (usable match, see the module docstring; False on the diagonal);
    depth: (B, S_i, P, S_j) z-depth of the point in camera j (0 where not ok); grid: (h, w).
    """

    target: torch.Tensor
    ok: torch.Tensor
    depth: torch.Tensor
    grid: tuple[int, int]


def patch_rows_cols(grid: tuple[int, int], device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(P,) row and (P,) column of the patches of a view, row-major with the column fastest."""
    h, w = grid
    rows = torch.arange(h, device=device).repeat_interleave(w)
    cols = torch.arange(w, device=device).repeat(h)
    return rows, cols


def patch_depths(depth: torch.Tensor, valid: torch.Tensor, grid: tuple[int, int],
                 min_valid: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    """Median valid depth of each patch: depth (B, S, H, W), valid (B, S, H, W) bool, H and W
    multiples of the grid (h, w). Returns (B, S, h*w) float64 depths (0 where unusable) and
    (B, S, h*w) bool: at least ``min_valid`` of the patch's pixels have valid, positive depth."""
    B, S, H, W = depth.shape
    h, w = grid
    if H % h or W % w:
        raise ValueError(f"depth {H}x{W} is not a whole number of {h}x{w} patches")
    ph, pw = H // h, W // w
    tiles = depth.double().reshape(B, S, h, ph, w, pw).permute(0, 1, 2, 4, 3, 5).reshape(B, S, h * w, ph * pw)
    usable = valid.reshape(B, S, h, ph, w, pw).permute(0, 1, 2, 4, 3, 5).reshape(B, S, h * w, ph * pw)
    usable = usable & (tiles > 0) & torch.isfinite(tiles)
    median = torch.where(usable, tiles, torch.nan).nanmedian(dim=-1).values
    ok = usable.double().mean(dim=-1) >= min_valid
    return torch.where(ok, median, 0.0), ok


def patch_matches(depth: torch.Tensor, valid: torch.Tensor, K: torch.Tensor, w2c: torch.Tensor,
                  grid: tuple[int, int], *, depth_tolerance: float = 0.05, min_valid: float = 0.5) -> PatchMatches:
    """Where the 3D point of every query patch appears in every other view (module docstring).

    depth: (B, S, H, W) z-depth, valid: (B, S, H, W) bool, K: (B, S, 3, 3) pixel intrinsics,
    w2c: (B, S, 3|4, 4) OpenCV world-to-camera in depth's unit; grid: (h, w) patches per view.
    """
    B, S, H, W = depth.shape
    h, w = grid
    ph, pw = H / h, W / w
    K, w2c = K.double(), to_4x4(w2c.double())
    z_i, ok_i = patch_depths(depth, valid, grid, min_valid)
    rows, cols = patch_rows_cols(grid, depth.device)
    pix = torch.stack([(cols + 0.5) * pw - 0.5, (rows + 0.5) * ph - 0.5, torch.ones(h * w, device=depth.device)], dim=-1).double()
    rays = pix @ invert_intrinsics(K).mT  # (B, S, P, 3), z = 1
    world = transform_points(invert_w2c(w2c), rays * z_i.unsqueeze(-1))  # (B, S_i, P, 3)
    uv, z = project_points(world[:, :, None], K[:, None], w2c[:, None])  # (B, S_i, S_j, P, 2), (B, S_i, S_j, P)
    uv, z = uv.transpose(2, 3), z.transpose(2, 3)  # (B, S_i, P, S_j, ...)
    u, v = uv[..., 0], uv[..., 1]
    inside = (z > 0) & (u >= -0.5) & (u < W - 0.5) & (v >= -0.5) & (v < H - 0.5)
    x = u.round().clamp(0, W - 1).long()
    y = v.round().clamp(0, H - 1).long()
    seen, seen_ok = _depth_at(depth.double(), valid, y, x)
    consistent = seen_ok & ((z - seen).abs() <= depth_tolerance * seen)
    other = ~torch.eye(S, dtype=torch.bool, device=depth.device).view(1, S, 1, S)
    ok = ok_i[..., None] & inside & consistent & other
    target = torch.stack([((v + 0.5) / ph).floor().clamp(0, h - 1), ((u + 0.5) / pw).floor().clamp(0, w - 1)], -1)
    return PatchMatches(target=target.long(), ok=ok, depth=torch.where(ok, z, 0.0), grid=(h, w))


def _depth_at(depth: torch.Tensor, valid: torch.Tensor, y: torch.Tensor, x: torch.Tensor):
    """GT depth and validity of view j at pixel (y, x): depth, valid (B, S, H, W); y, x
    (B, S_i, P, S_j) long. Returns two (B, S_i, P, S_j) tensors."""
    B, S, H, W = depth.shape
    index = (y * W + x).permute(0, 3, 1, 2).reshape(B, S, -1)  # (B, S_j, S_i * P)
    d = depth.reshape(B, S, H * W).gather(2, index)
    m = valid.reshape(B, S, H * W).gather(2, index) & (d > 0)
    shape = (B, S, y.shape[1], y.shape[2])  # (B, S_j, S_i, P)
    return d.view(shape).permute(0, 2, 3, 1), m.view(shape).permute(0, 2, 3, 1)


def window_masks(target: torch.Tensor, ok: torch.Tensor, grid: tuple[int, int], radius: int) -> torch.Tensor:
    """(B, S_i, P, S_j, P) bool: key patch k of view j lies within ``radius`` patches (Chebyshev
    distance, clipped at the image border) of ``target`` (B, S_i, P, S_j, 2) (row, col); all False
    where ``ok`` (B, S_i, P, S_j) is False. ``radius`` 0 is the target patch alone."""
    rows, cols = patch_rows_cols(grid, target.device)
    near = ((target[..., 0, None] - rows).abs() <= radius) & ((target[..., 1, None] - cols).abs() <= radius)
    return near & ok[..., None]


def cyclic_pairs(num_views: int) -> list[tuple[int, int]]:
    """The (query view, key view) pairs (i, i + 1 mod S) for i = 0..S-1: every view queries its next
    one; for S = 2 that is both ordered pairs (0, 1), (1, 0). S views give S pairs (S >= 2)."""
    if num_views < 2:
        raise ValueError(f"correspondences need at least 2 views, got {num_views}")
    return [(i, (i + 1) % num_views) for i in range(num_views)]


def query_patches(num_patches: int, max_queries: int | None, step: int = 0) -> torch.Tensor | None:
    """The query patches of a view to use at training step ``step``: None (every patch) when
    ``max_queries`` is None or >= num_patches, else the (n,) long indices ``offset, offset + stride,
    ...`` with ``stride = ceil(num_patches / max_queries)`` and ``offset = step mod stride``, so
    that successive steps cover every patch (deterministic: no random state)."""
    if max_queries is None or max_queries >= num_patches:
        return None
    if max_queries < 1:
        raise ValueError(f"max_queries must be >= 1 or None, got {max_queries}")
    stride = -(-num_patches // max_queries)
    return torch.arange(step % stride, num_patches, stride)


def pair_targets(matches: PatchMatches, pairs: Sequence[tuple[int, int]],
                 patches: torch.Tensor | None = None) -> torch.Tensor:
    """(B, len(pairs) * n) long: for every pair (i, j), pair-major, and every query patch of view i
    (``patches`` (n,) indices, None = all P), the flat index ``row * w + col`` of its true patch in
    view j, or -1 where the match is not usable (``matches.ok``)."""
    h, w = matches.grid
    flat = matches.target[..., 0] * w + matches.target[..., 1]  # (B, S_i, P, S_j)
    flat = torch.where(matches.ok, flat, torch.full_like(flat, -1))
    blocks = [flat[:, i, :, j] for i, j in pairs]  # each (B, P)
    if patches is not None:
        blocks = [b[:, patches.to(b.device)] for b in blocks]
    return torch.cat(blocks, dim=1)


def pair_blocks(attention: torch.Tensor, grid: tuple[int, int], num_special: int,
                pairs: Sequence[tuple[int, int]], patches: torch.Tensor | None = None) -> torch.Tensor:
    """The (query patch of view i, key patch of view j) entries of a full attention matrix, pair-major:
    attention (B, heads, N, N) over N = S * (num_special + h*w) tokens (view-major, special tokens
    first) -> (B, heads, len(pairs) * n, h*w), rows in the order of ``pair_targets`` (``patches``:
    the n query patches, None = all)."""
    B, H, N, _ = attention.shape
    P = grid[0] * grid[1]
    T = num_special + P
    if N % T:
        raise ValueError(f"attention over {N} tokens is not a whole number of views of {T} tokens")
    x = attention.view(B, H, N // T, T, N // T, T)[:, :, :, num_special:, :, num_special:]  # (B, H, S, P, S, P)
    blocks = [x[:, :, i, :, j] for i, j in pairs]  # each (B, H, P, P)
    if patches is not None:
        blocks = [b[:, :, patches.to(b.device)] for b in blocks]
    return torch.cat(blocks, dim=2)


def match_hits(scores: torch.Tensor, target: torch.Tensor, grid: tuple[int, int], radius: int = 0) -> torch.Tensor:
    """(B, Q) bool: the key patch with the highest score (scores (B, Q, h*w) over the key view's
    patches, any monotone score: logits, weights) lies within ``radius`` patches (Chebyshev
    distance) of the true patch ``target`` (B, Q) (flat index, -1 = no match: always False)."""
    h, w = grid
    best = scores.argmax(dim=-1)
    t = target.clamp(min=0)
    near = ((best // w - t // w).abs() <= radius) & ((best % w - t % w).abs() <= radius)
    return near & (target >= 0)
