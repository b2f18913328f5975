"""DPPE (arXiv 2606.31585, official code sbintuitions/dppe): ``dppe_dual`` and ``dppe_tadd``.

DPPE-dual (preset ``DPPEdual = (pIT2d, pIT2d)``), the contragredient of
PRoPE: q <- P_i^-1, k <- P_j^T, v <- P_j^T, o <- P_i^-T on the camera block, PRoPE's RoPE on the rest.
The value map ``P_i^-T P_j^T`` has a zero top-right 3x1 block: translation reaches only the 4th
channel of each 4-chunk.

DPPE-tAdd (preset ``DPPEtAdd = (p2d, KRtAdd2d)``): q and k exactly as
PRoPE; v and o on contiguous 6-chunks ``[r | s]`` of the camera block (the trailing (d/2) % 6
channels pass through, e.g. 2 channels at head dim 64):

    v:  r <- R_j^T K_bar_j^-1 r,   s <- s - K_bar_j t_j
    o:  r <- K_bar_i R_i r,        s <- s + K_bar_i t_i

With one softmax per head (the official code, default ``softmax="shared"``) the output is
``o^r_i = K_bar_i R_i sum_j a_ij R_j^T K_bar_j^-1 v^r_j`` and ``o^s_i = g_i + sum_j a_ij (v^s_j - g_j)``
with ``g_i = K_bar_i t_i``. The translation stream is invariant to global rotations only (to global
translations after canonicalizing the world to a reference camera).

``softmax="blockwise"`` is the paper's appendix A form: a rotation softmax and a translation softmax
that never share attention weights. depthpe's channel split (head dim d, d % 16 == 0):

* rotation logits: q/k camera 4-chunks in ``[0, d/4)`` plus all RoPE channels ``[d/2, d)``;
* translation logits: q/k camera 4-chunks in ``[d/4, d/2)`` plus all RoPE channels ``[d/2, d)``;
* rotation weights mix the value rotation slots r, the pass-through channels and the RoPE value
  channels; translation weights mix the translation slots s.

Each of the two SDPA calls uses the default scale of its own width, 1/sqrt(3d/4). q/k transforms are
PRoPE's in both modes, so whole 4-chunks and whole RoPE pairs stay in one softmax (invariance kept).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..geometry import invert_intrinsics, normalize_intrinsics
from .base import register_encoding
from .camera import (
    CameraBlockEncoding,
    RotTransSplit,
    TiledMatrix,
    make_camera_encoding,
    projection_matrices,
)

__all__ = ["make_dppe_dual", "make_dppe_tadd", "TAddBlockwise", "tadd_blockwise_channels"]


@register_encoding("dppe_dual")
def make_dppe_dual(*, image_size, grid, num_special, patch_offset, K, w2c, num_views,
                   rope_base: float = 100.0, max_translation: float | None = 10.0):
    """Prepare DPPE-dual. K: (B,S,3,3) pixel intrinsics; w2c: (B,S,3|4,4) OpenCV world-to-camera."""

    def build(K64, E):
        P, P_inv = projection_matrices(K64, E, image_size)
        return TiledMatrix(P_inv), TiledMatrix(P.mT), TiledMatrix(P.mT), TiledMatrix(P_inv.mT)

    return make_camera_encoding(
        "dppe_dual", build, grid=grid, num_special=num_special, patch_offset=patch_offset, K=K,
        w2c=w2c, num_views=num_views, rope_base=rope_base, max_translation=max_translation,
    )


def tadd_blockwise_channels(d: int) -> dict[str, torch.Tensor]:
    """Channel index lists (LongTensor) of the blockwise DPPE-tAdd split for head dim d.

    Keys: ``qk_rot``, ``qk_trans`` (q/k channels of the rotation / translation logits) and
    ``v_rot``, ``v_trans`` (value channels mixed by each softmax; together a permutation of 0..d-1).
    """
    if d % 16:
        raise ValueError(f"blockwise DPPE-tAdd needs a head dim divisible by 16, got {d}")
    dc, dq = d // 2, d // 4
    rope = list(range(dc, d))
    n6 = dc // 6
    r_slots = [6 * m + i for m in range(n6) for i in range(3)]
    s_slots = [6 * m + 3 + i for m in range(n6) for i in range(3)]
    rest = list(range(6 * n6, dc))
    as_t = lambda xs: torch.tensor(xs, dtype=torch.long)  # noqa: E731
    return {
        "qk_rot": as_t(list(range(0, dq)) + rope),
        "qk_trans": as_t(list(range(dq, dc)) + rope),
        "v_rot": as_t(r_slots + rest + rope),
        "v_trans": as_t(s_slots),
    }


class TAddBlockwise(CameraBlockEncoding):
    """DPPE-tAdd with separate rotation / translation softmaxes (two SDPA calls; see module doc)."""

    def attend(self, q, k, v, *, dropout_p: float = 0.0):
        d = q.shape[-1]
        ch = {key: idx.to(q.device) for key, idx in tadd_blockwise_channels(d).items()}
        qt, kt, vt = self.transform_q(q), self.transform_k(k), self.transform_v(v)
        o_rot = F.scaled_dot_product_attention(
            qt[..., ch["qk_rot"]], kt[..., ch["qk_rot"]], vt[..., ch["v_rot"]], dropout_p=dropout_p
        )
        o_trans = F.scaled_dot_product_attention(
            qt[..., ch["qk_trans"]], kt[..., ch["qk_trans"]], vt[..., ch["v_trans"]],
            dropout_p=dropout_p,
        )
        inv = torch.argsort(torch.cat([ch["v_rot"], ch["v_trans"]]))
        o = torch.cat([o_rot, o_trans], dim=-1)[..., inv]
        return self.transform_out(o)


@register_encoding("dppe_tadd")
def make_dppe_tadd(*, image_size, grid, num_special, patch_offset, K, w2c, num_views,
                   softmax: str = "shared", rope_base: float = 100.0,
                   max_translation: float | None = 10.0):
    """Prepare DPPE-tAdd. softmax: "shared" (official code, default) or "blockwise" (paper App. A)."""
    if softmax not in ("shared", "blockwise"):
        raise ValueError(f"dppe_tadd softmax must be 'shared' or 'blockwise', got {softmax!r}")

    def build(K64, E):
        P, P_inv = projection_matrices(K64, E, image_size)
        Kbar = normalize_intrinsics(K64, image_size)
        R, t = E[..., :3, :3], E[..., :3, 3]
        KR = Kbar @ R
        KR_inv = R.mT @ invert_intrinsics(Kbar)
        gamma = (Kbar @ t.unsqueeze(-1)).squeeze(-1)  # K_bar t = P[:3, 3]
        return (
            TiledMatrix(P.mT),
            TiledMatrix(P_inv),
            RotTransSplit(KR_inv, -gamma),
            RotTransSplit(KR, gamma),
        )

    return make_camera_encoding(
        "dppe_tadd", build, grid=grid, num_special=num_special, patch_offset=patch_offset, K=K,
        w2c=w2c, num_views=num_views, rope_base=rope_base, max_translation=max_translation,
        cls=TAddBlockwise if softmax == "blockwise" else None,
    )
