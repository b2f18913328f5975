"""An independent statement of the official DPPE code's formulas (sbintuitions/dppe, dppe/torch.py),
written from its description in docs/encodings.md for tests/pe/test_pe_pairs.py.

It shares nothing with depthpe.pe: matrices are built directly and inverted with
``torch.linalg.inv``, transforms use explicit per-chunk products, RoPE is written per channel pair
and attention is an explicit softmax. Conventions of the official code: tokens view-major, inside a
view ``num_special`` special tokens (RoPE position 0, their view's camera) then patches row-major
with x fastest at (x, y) (no +1 offset); SDPA scale 1/sqrt(d).

``python -m tests.helpers.dppe_official_reference`` prints the largest difference per transform between
depthpe and this reference (the table in docs/encodings.md).
"""

from __future__ import annotations

import math

import torch

from depthpe.pe.spec import OFFICIAL_TRANSFORMS

BASE = 100.0


def intrinsics_normalized(K: torch.Tensor, H: int, W: int) -> torch.Tensor:
    """Pixel K -> [[fx/W, 0, cx/W - 1/2], [0, fy/H, cy/H - 1/2], [0, 0, 1]]."""
    Kn = torch.zeros_like(K)
    Kn[..., 0, 0], Kn[..., 0, 2] = K[..., 0, 0] / W, K[..., 0, 2] / W - 0.5
    Kn[..., 1, 1], Kn[..., 1, 2] = K[..., 1, 1] / H, K[..., 1, 2] / H - 0.5
    Kn[..., 2, 2] = 1.0
    return Kn


def _homogeneous(A3: torch.Tensor) -> torch.Tensor:
    """3x3 -> 4x4 block diag(A3, 1)."""
    A = torch.zeros(*A3.shape[:-2], 4, 4, dtype=A3.dtype)
    A[..., :3, :3], A[..., 3, 3] = A3, 1.0
    return A


def _keep(E: torch.Tensor, rot: bool, trans: bool) -> torch.Tensor:
    A = torch.zeros_like(E)
    A[..., :3, :3] = E[..., :3, :3] if rot else torch.eye(3, dtype=E.dtype)
    A[..., :3, 3] = E[..., :3, 3] if trans else 0.0
    A[..., 3, 3] = 1.0
    return A


def base_matrix(name: str, Kn: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """The 4x4 matrix each 4x4 transform is built from (P, E, K[R|0], [R|0], K[I|t], [I|t], K)."""
    Kh = _homogeneous(Kn)
    return {
        "p": Kh @ E, "p2d": Kh @ E, "pT2d": Kh @ E, "pIT2d": Kh @ E,
        "Rt": E, "Rt2d": E,
        "KR2d": Kh @ _keep(E, True, False), "R2d": _keep(E, True, False),
        "Kt2d": Kh @ _keep(E, False, True), "t2d": _keep(E, False, True),
        "K2d": Kh,
    }[name]


def four_maps(name: str, Kn: torch.Tensor, E: torch.Tensor) -> dict[str, torch.Tensor]:
    """{q, k, v, o} 4x4 matrices per view for the tiled transforms, as the official code assigns them
    (q <- A^T, k <- A^-1, v <- A^-1, o <- A for A = base matrix; pT2d uses P, P^-T, P^-T, P^T;
    pIT2d uses P^-1, P^T, P^T, P^-T)."""
    A = base_matrix(name, Kn, E)
    Ai = torch.linalg.inv(A)
    if name == "pT2d":
        return {"q": A, "k": Ai.mT, "v": Ai.mT, "o": A.mT}
    if name == "pIT2d":
        return {"q": Ai, "k": A.mT, "v": A.mT, "o": Ai.mT}
    return {"q": A.mT, "k": Ai, "v": Ai, "o": A}


def tadd_maps(Kn: torch.Tensor, E: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """KRtAdd2d: {q, k, v, o} -> (3x3 applied to r, 3-vector added to s) per view."""
    KR = Kn @ E[..., :3, :3]
    g = (Kn @ E[..., :3, 3:]).squeeze(-1)
    KRi = torch.linalg.inv(KR)
    return {"q": (KR.mT, -g), "k": (KRi, -g), "v": (KRi, -g), "o": (KR, g)}


def layout(name: str, d: int) -> tuple[int, int]:
    """(camera block width, RoPE width per axis) of transform ``name`` for head dim d."""
    if name == "none":
        return 0, 0
    if name in ("p", "Rt"):
        return d, 0
    if name == "2d":
        return 0, d // 2
    return d // 2, d // 4


def rope(x: torch.Tensor, pos: torch.Tensor, inverse: bool) -> torch.Tensor:
    """x (..., T, f), pos (T,): channel c < f/2 paired with c + f/2, frequency BASE^(-c/(f/2));
    forward (a, b) -> (a cos + b sin, b cos - a sin), inverse the transpose."""
    f = x.shape[-1]
    nf = f // 2
    out = torch.empty_like(x)
    for c in range(nf):
        ang = pos * BASE ** (-c / nf)
        co, si = torch.cos(ang), torch.sin(ang)
        a, b = x[..., c], x[..., c + nf]
        s = -1.0 if inverse else 1.0
        out[..., c] = a * co + s * b * si
        out[..., c + nf] = b * co - s * a * si
    return out


def transform(x: torch.Tensor, name: str, which: str, Kn, E, grid, num_special) -> torch.Tensor:
    """Apply transform ``name`` for tensor ``which`` (q, k, v, o) to x (B, H, S*T, d)."""
    B, Hh, N, d = x.shape
    S = E.shape[1]
    T = N // S
    cam, rw = layout(name, d)
    xv = x.reshape(B, Hh, S, T, d)
    parts = []
    if cam:
        blk = xv[..., :cam]
        if name == "KRtAdd2d":
            R, add = tadd_maps(Kn, E)[which]
            n6 = cam // 6
            ch = blk[..., : 6 * n6].reshape(B, Hh, S, T, n6, 6)
            r = torch.einsum("bsij,bhstnj->bhstni", R, ch[..., :3])
            s = ch[..., 3:] + add[:, None, :, None, None, :]
            parts.append(torch.cat([r, s], -1).reshape(B, Hh, S, T, 6 * n6))
            parts.append(blk[..., 6 * n6:])
        else:
            M = four_maps(name, Kn, E)[which]
            ch = blk.reshape(B, Hh, S, T, cam // 4, 4)
            parts.append(torch.einsum("bsij,bhstnj->bhstni", M, ch).reshape(B, Hh, S, T, cam))
    if rw:
        h, w = grid
        idx = torch.arange(h * w, dtype=x.dtype)
        zeros = torch.zeros(num_special, dtype=x.dtype)
        px, py = torch.cat([zeros, idx % w]), torch.cat([zeros, torch.div(idx, w, rounding_mode="floor")])
        parts.append(rope(xv[..., cam:cam + rw], px, which == "o"))
        parts.append(rope(xv[..., cam + rw:cam + 2 * rw], py, which == "o"))
    if not parts:
        return x
    return torch.cat(parts, -1).reshape(B, Hh, N, d)


def attention(q, k, v, qk: str, vo: str, K, w2c, image_size, grid, num_special):
    """The official pipeline: transforms, explicit softmax(q k^T / sqrt(d)) v, output transform.
    Returns (q', k', v', o)."""
    Kn = intrinsics_normalized(K, *image_size)
    E = w2c
    args = (Kn, E, grid, num_special)
    qt, kt = transform(q, qk, "q", *args), transform(k, qk, "k", *args)
    vt = transform(v, vo, "v", *args)
    a = torch.softmax(qt @ kt.mT / math.sqrt(q.shape[-1]), dim=-1)
    return qt, kt, vt, transform(a @ vt, vo, "o", *args)


def max_differences(seed: int = 0) -> dict[str, float]:
    """Largest |depthpe - reference| per transform over q/k/v/o transforms and outputs, all pairs
    containing it, head dims 48 and 64, 0 and 5 special tokens (float64)."""
    from tests.helpers.pe_pairs import compare_pair

    worst = {name: 0.0 for name in OFFICIAL_TRANSFORMS}
    for d in (48, 64):
        for ns in (0, 5):
            for qk in OFFICIAL_TRANSFORMS:
                for vo in OFFICIAL_TRANSFORMS:
                    diff = compare_pair(qk, vo, d, ns, seed)
                    worst[qk] = max(worst[qk], diff)
                    worst[vo] = max(worst[vo], diff)
    return worst


if __name__ == "__main__":
    for name, diff in max_differences().items():
        print(f"{name:10s} {diff:.1e}")
