"""Random cameras and tensors, and independent (dense, per-pair) references, for the camera-PE tests.

Everything here is built from first principles (dense d x d matrices, explicit softmax) so that the
fused implementations in depthpe.pe are checked against code that shares none of their tricks.
"""

from __future__ import annotations

import math

import torch

from depthpe.geometry import invert_intrinsics, normalize_intrinsics

DT = torch.float64
IMAGE = (42, 56)  # (H, W) pixels
GRID = (3, 4)  # (h, w) patches of 14 px


def random_rotations(n: int, gen: torch.Generator) -> torch.Tensor:
    """(n, 3, 3) random proper rotations (float64)."""
    Q, R = torch.linalg.qr(torch.randn(n, 3, 3, generator=gen, dtype=DT))
    Q = Q * torch.sign(torch.diagonal(R, dim1=-2, dim2=-1)).unsqueeze(-2)
    flip = torch.det(Q) < 0
    Q[flip, :, 0] = -Q[flip, :, 0]
    return Q


def random_se3(gen: torch.Generator, scale: float = 1.0) -> torch.Tensor:
    """One random (4, 4) rigid transform."""
    G = torch.eye(4, dtype=DT)
    G[:3, :3] = random_rotations(1, gen)[0]
    G[:3, 3] = scale * torch.randn(3, generator=gen, dtype=DT)
    return G


def random_cameras(B: int, S: int, gen: torch.Generator, image=IMAGE, trans: float = 1.0):
    """K (B, S, 3, 3) pixel intrinsics and w2c (B, S, 4, 4) with random rotations, |t| ~ trans."""
    H, W = image
    w2c = torch.eye(4, dtype=DT).repeat(B, S, 1, 1)
    w2c[..., :3, :3] = random_rotations(B * S, gen).reshape(B, S, 3, 3)
    w2c[..., :3, 3] = trans * torch.randn(B, S, 3, generator=gen, dtype=DT)
    K = torch.zeros(B, S, 3, 3, dtype=DT)
    K[..., 0, 0] = W * (0.8 + 0.4 * torch.rand(B, S, generator=gen, dtype=DT))
    K[..., 1, 1] = H * (0.8 + 0.4 * torch.rand(B, S, generator=gen, dtype=DT))
    K[..., 0, 2] = (W - 1) / 2 + torch.randn(B, S, generator=gen, dtype=DT)
    K[..., 1, 2] = (H - 1) / 2 + torch.randn(B, S, generator=gen, dtype=DT)
    K[..., 2, 2] = 1
    return K, w2c


def random_qkv(B, H, N, d, gen, dtype=DT):
    """q, k, v: three standard-normal (B, H, N, d) tensors from ``gen``."""
    return tuple(torch.randn(B, H, N, d, generator=gen, dtype=dtype) for _ in range(3))


def view_positions(grid, num_special, patch_offset):
    """(T,) x and (T,) y of one view's tokens, computed with plain Python loops."""
    h, w = grid
    xs, ys = [0.0] * num_special, [0.0] * num_special
    for r in range(h):
        for c in range(w):
            xs.append(c + patch_offset)
            ys.append(r + patch_offset)
    return torch.tensor(xs, dtype=DT), torch.tensor(ys, dtype=DT)


def prope_rope_matrix(x: float, y: float, d: int, base: float = 100.0) -> torch.Tensor:
    """Dense (d/2, d/2) forward PRoPE RoPE map for a token at (x, y): quarters [x | y], split-half
    pairs (c, c + w/2), rotation by -theta: (a, b) -> (a cos + b sin, -a sin + b cos)."""
    w = d // 4
    nf = w // 2
    M = torch.zeros(d // 2, d // 2, dtype=DT)
    for axis, p in enumerate((x, y)):
        off = axis * w
        for m in range(nf):
            th = p * base ** (-m / nf)
            a, b = off + m, off + m + nf
            M[a, a], M[a, b] = math.cos(th), math.sin(th)
            M[b, a], M[b, b] = -math.sin(th), math.cos(th)
    return M


def block_diag_tokens(cam_mats: torch.Tensor, d: int, grid, num_special, patch_offset):
    """Dense per-token D_t (B, S*T, d, d) = blockdiag(I (x) cam_mats[b, view], rho(x, y)^T).

    cam_mats: (B, S, 4, 4). With q~ = D^T q, k~ = D^-1 k, v~ = D^-1 v, o = D o~ this is the generic
    relative-transform attention (docs/encodings.md).
    """
    B, S = cam_mats.shape[:2]
    xs, ys = view_positions(grid, num_special, patch_offset)
    T = xs.numel()
    D = torch.zeros(B, S * T, d, d, dtype=DT)
    for s in range(S):
        for t in range(T):
            rho = prope_rope_matrix(float(xs[t]), float(ys[t]), d)
            n = s * T + t
            for m in range(d // 8):
                D[:, n, 4 * m:4 * m + 4, 4 * m:4 * m + 4] = cam_mats[:, s]
            D[:, n, d // 2:, d // 2:] = rho.T
    return D


def naive_relative_attention(q, k, v, D):
    """logit_ij = q_i^T D_i D_j^-1 k_j / sqrt(d), o_i = sum_j softmax_j * D_i D_j^-1 v_j (dense)."""
    d = q.shape[-1]
    Dinv = torch.linalg.inv(D)  # (B, N, d, d)
    A = torch.einsum("bide,bjef->bijdf", D, Dinv)  # (B, N, N, d, d)
    qA = torch.einsum("bhid,bijdf->bhijf", q, A)
    logits = (qA * k.unsqueeze(2)).sum(-1) / math.sqrt(d)
    alpha = logits.softmax(-1)
    Av = torch.einsum("bijdf,bhjf->bhijd", A, v)
    out = (alpha.unsqueeze(-1) * Av).sum(3)
    return logits, out


def prope_matrices(K, w2c, image=IMAGE):
    """(P, P^-1) built with torch.linalg.inv (reference for the closed forms)."""
    Kbar = normalize_intrinsics(K, image)
    L = torch.zeros(*K.shape[:-2], 4, 4, dtype=DT)
    L[..., :3, :3] = Kbar
    L[..., 3, 3] = 1
    P = L @ w2c
    return P, torch.linalg.inv(P)


def kbar_rt(K, w2c, image=IMAGE):
    """K_bar R (B,S,3,3), its inverse (B,S,3,3) and gamma = K_bar t (B,S,3)."""
    Kbar = normalize_intrinsics(K, image)
    R, t = w2c[..., :3, :3], w2c[..., :3, 3]
    return Kbar @ R, R.mT @ invert_intrinsics(Kbar), (Kbar @ t.unsqueeze(-1)).squeeze(-1)


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| / max |b| (unitless)."""
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))
