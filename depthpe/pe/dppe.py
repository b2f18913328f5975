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

The preset's ``softmax="blockwise"`` option splits PRoPE's logits into two softmaxes
(``tadd_blockwise_channels``, head dim d % 16 == 0):

* rotation logits: q/k camera 4-chunks in ``[0, d/4)`` plus all RoPE channels ``[d/2, d)``;
* translation logits: q/k camera 4-chunks in ``[d/4, d/2)`` plus all RoPE channels ``[d/2, d)``;
* rotation weights mix the value rotation slots r, the pass-through channels and the RoPE value
  channels; translation weights mix the translation slots s.

Both sets of logits see P = K [R|t], so its rotation weights still change with a translation. The
paper's appendix A form is the pair ``{qk: KRtAdd2d, vo: KRtAdd2d}`` with ``softmax="blockwise"``
(``tadd_appendix_channels``): q and k are cut into the same 6-chunks, the rotation logits use only
the r slots (through K_i R_i, never t) and the translation logits only the s slots (through K_i t_i,
never R), each plus the RoPE block. Each SDPA call uses the default scale of its own width.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .camera import CameraBlockEncoding

__all__ = ["TAddBlockwise", "tadd_blockwise_channels", "tadd_appendix_channels"]


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


def tadd_appendix_channels(d: int) -> dict[str, torch.Tensor]:
    """Channel index lists of the appendix-A DPPE-tAdd split {qk: KRtAdd2d, vo: KRtAdd2d}, head dim d.

    With n = (d/2) // 6 camera 6-chunks ``[r | s]``: ``qk_rot`` = ``v_rot`` = the r slots, the
    (d/2) % 6 pass-through channels and the RoPE block [d/2, d); ``qk_trans`` = the s slots plus the
    RoPE block; ``v_trans`` = the s slots. Same keys as ``tadd_blockwise_channels``.
    """
    if d % 8:
        raise ValueError(f"blockwise DPPE-tAdd needs a head dim divisible by 8, got {d}")
    dc = d // 2
    n6 = dc // 6
    rope = list(range(dc, d))
    r_slots = [6 * m + i for m in range(n6) for i in range(3)]
    s_slots = [6 * m + 3 + i for m in range(n6) for i in range(3)]
    rest = list(range(6 * n6, dc))
    as_t = lambda xs: torch.tensor(xs, dtype=torch.long)  # noqa: E731
    return {"qk_rot": as_t(r_slots + rest + rope), "qk_trans": as_t(s_slots + rope),
            "v_rot": as_t(r_slots + rest + rope), "v_trans": as_t(s_slots)}


class TAddBlockwise(CameraBlockEncoding):
    """DPPE-tAdd with separate rotation / translation softmaxes (two SDPA calls; see module doc).

    The split is ``tadd_appendix_channels`` for qk ``KRtAdd2d`` (the paper's appendix A) and
    ``tadd_blockwise_channels`` for qk ``p2d`` (the ``dppe_tadd`` preset's ``softmax`` option).
    Each SDPA call uses the default scale of its own width, 1/sqrt(len(qk channels)).
    """

    def channels(self, d: int, device) -> dict[str, torch.Tensor]:
        """This encoding's channel index lists for head dim d, on ``device``."""
        split = tadd_appendix_channels if self.transforms["q"] == "KRtAdd2d" else tadd_blockwise_channels
        return {key: idx.to(device) for key, idx in split(d).items()}

    def block_weights(self, q: torch.Tensor, k: torch.Tensor, rows: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """{"rot", "trans"} attention weights (B, heads, len(rows), N) of query tokens ``rows`` (None =
        all N), each a softmax over all N keys. Materializes them: for tests and diagnostics."""
        ch = self.channels(q.shape[-1], q.device)
        qt, kt = self.transform_q(q), self.transform_k(k)
        if rows is not None:
            qt = qt[:, :, rows]
        weights = {}
        for block in ("rot", "trans"):
            idx = ch[f"qk_{block}"]
            weights[block] = (qt[..., idx] @ kt[..., idx].mT / math.sqrt(len(idx))).softmax(dim=-1)
        return weights

    def _mixed(self, q: torch.Tensor, weights: dict[str, torch.Tensor]) -> torch.Tensor:
        """``(|v_rot| w_rot + |v_trans| w_trans) / head_dim`` in float32 (``attention_probs``)."""
        ch = self.channels(q.shape[-1], q.device)
        n_rot, n_trans = len(ch["v_rot"]), len(ch["v_trans"])
        return (n_rot * weights["rot"].float() + n_trans * weights["trans"].float()) / (n_rot + n_trans)

    def attention_probs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """(B, heads, N, N) float32: the two softmaxes weighted by the value channels each one mixes,
        ``(|v_rot| w_rot + |v_trans| w_trans) / head_dim``, i.e. the weights with which an average
        output channel mixes the keys (rows sum to 1). For diagnostics; materializes the matrices."""
        return self._mixed(q, self.block_weights(q, k))

    def attention_scores(self, q, k, rows=None, cols=None):
        """Log of ``attention_probs`` for query tokens ``rows`` over key tokens ``cols`` (None = all):
        (B, heads, len(rows), len(cols)); each softmax still runs over all N keys. With gradients."""
        weights = self.block_weights(q, k, rows)
        if cols is not None:
            weights = {block: w[..., cols] for block, w in weights.items()}
        return self._mixed(q, weights).log()

    def attend(self, q, k, v, *, dropout_p: float = 0.0):
        ch = self.channels(q.shape[-1], q.device)
        qt, kt, vt = self.transform_q(q), self.transform_k(k), self.transform_v(v)
        # The appendix form pads narrow value slices so that q, k and v share one width (CPU/GPU
        # fused kernels need it; else SDPA materializes the attention matrix). The preset's split
        # keeps its original kernel choice, so its outputs stay bit-identical.
        sdpa = _sdpa_equal_width if self.transforms["q"] == "KRtAdd2d" else F.scaled_dot_product_attention
        o_rot = sdpa(qt[..., ch["qk_rot"]], kt[..., ch["qk_rot"]], vt[..., ch["v_rot"]], dropout_p=dropout_p)
        o_trans = sdpa(qt[..., ch["qk_trans"]], kt[..., ch["qk_trans"]], vt[..., ch["v_trans"]],
                       dropout_p=dropout_p)
        inv = torch.argsort(torch.cat([ch["v_rot"], ch["v_trans"]]))
        o = torch.cat([o_rot, o_trans], dim=-1)[..., inv]
        return self.transform_out(o)


def _sdpa_equal_width(q, k, v, *, dropout_p: float = 0.0):
    """SDPA of q, k (..., N, a) and v (..., N, b <= a) with v zero-padded to width a; returns (..., N, b).

    Same result as SDPA on the unpadded tensors (default scale 1/sqrt(a)), but eligible for the
    fused (flash) kernels, which need equal q/k/v widths."""
    a, b = q.shape[-1], v.shape[-1]
    if b == a:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    if b > a:
        raise ValueError(f"value width {b} exceeds the query-key width {a}")
    out = F.scaled_dot_product_attention(q, k, F.pad(v, (0, a - b)), dropout_p=dropout_p)
    return out[..., :b]

