"""URoPE (arXiv 2604.18747; no public code): depthpe's reconstruction (docs/encodings.md).

For query view i, key view j, key patch (c, r) and head group g with depth anchor ``d_g``:

* the patch centre pixel (OpenCV, pixel centres at integers) ``u = (c + 0.5) W/w - 0.5``,
  ``v = (r + 0.5) H/h - 0.5`` is lifted along its ray to the point at **z-depth** ``d_g`` in camera j,
  ``X_j = d_g K_j^-1 [u, v, 1]``, moved into camera i, ``X_i = R_i R_j^T X_j + t_i - R_i R_j^T t_j``,
  and projected, ``[u', v', z'] = K_i X_i``;
* points behind (or almost on) the query camera's image plane use ``z_safe = max(z', eps d_g)``
  (``behind_eps``, default 1e-3); the projected position in patch units
  ``((u'/z_safe + 0.5) w/W - 0.5, (v'/z_safe + 0.5) h/H - 0.5)`` is clipped to
  ``[-clip w, (1 + clip) w] x [-clip h, (1 + clip) h]`` (``clip`` default 1), so everything stays finite;
* same-view pairs (j = i) use the exact grid, so the i-i block is exactly 2D RoPE;
* special tokens sit at position 0 (no camera); patches are shifted by ``patch_offset`` (keys too).

q gets VGGT 2D RoPE (``rope.py``: y on the first half, x on the second, +theta, base 100) at its own
grid position; k gets the same RoPE at its position projected into the query view, per head group:
heads ``[g H/G, (g+1) H/G)`` use anchor g (H must be a multiple of the number of anchors G). v and the
output are not transformed. Anchors are in the normalized scene unit (docs/conventions.md, scene
normalization); default 4 anchors log-spaced over 0.5..8.

The ablations of the paper are options (docs/encodings.md): ``num_anchors``, ``anchor_near``,
``anchor_far`` and ``anchor_spacing`` (log, depth or inverse_depth) place the anchors;
``anchor_assignment: channels`` gives every head all anchors instead, anchor ``m mod G`` on the RoPE
frequency m of both axes (head dim / 4 must be a multiple of G); ``learnable_anchors: true`` asks the
model for per-layer anchors (``LearnableAnchors``, owned by the model; ``URoPE.with_anchors``).
Their default values give today's URoPE bit for bit.

Memory is bounded by processing ``view_chunk`` query views per SDPA call (default 1): each call sees
the chunk's queries and all keys rotated for those views; keys and values are never copied for all
views at once. cos/sin are computed per chunk from the stored positions (``cache_tables=True``
keeps them for all layers instead: faster, B*S*S*T*G*d/2 complex numbers of memory).

Implementation detail: the rotation is a complex multiplication. q and k channels are permuted once
per call into adjacent (a, b) pairs; a common permutation of q and k leaves every logit unchanged.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import weakref

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..geometry import invert_intrinsics
from .base import Encoding, token_positions
from .camera import HEAD_CHUNKS, attention_dtype, camera_tensors, memoized, use_fused, work_dtype
from . import fused, urope_fused
from .kernels import FusedKernel, fused_kernel
from .urope_fused import _complex, _real

__all__ = ["URoPE", "make_urope", "default_anchors", "resolve_anchors", "project_key_positions",
           "LearnableAnchors", "ANCHOR_SPACINGS", "ANCHOR_ASSIGNMENTS"]

ANCHOR_SPACINGS = ("log", "depth", "inverse_depth")
ANCHOR_ASSIGNMENTS = ("heads", "channels")


def default_anchors(num: int = 4, near: float = 0.5, far: float = 8.0, spacing: str = "log") -> list[float]:
    """``num`` depth anchors over [near, far] (normalized scene units), evenly spaced in log depth
    (``spacing="log"``, the default), in depth (``"depth"``) or in inverse depth (``"inverse_depth"``);
    one anchor sits at the geometric, arithmetic or harmonic mean of near and far."""
    if spacing not in ANCHOR_SPACINGS:
        raise ValueError(f"urope anchor_spacing must be one of {list(ANCHOR_SPACINGS)}, got {spacing!r}")
    if not (isinstance(num, int) and num >= 1) or not (0 < near <= far < math.inf):
        raise ValueError(f"urope needs num_anchors >= 1 and 0 < anchor_near <= anchor_far, got {num}, {near}, {far}")
    if spacing == "log":
        if num == 1:
            return [math.sqrt(near * far)]
        return [near * (far / near) ** (i / (num - 1)) for i in range(num)]
    fractions = [0.5] if num == 1 else [i / (num - 1) for i in range(num)]
    if spacing == "depth":
        return [near + (far - near) * f for f in fractions]
    return [1.0 / (1.0 / near + (1.0 / far - 1.0 / near) * f) for f in fractions]


def resolve_anchors(anchors=None, num_anchors=None, anchor_near=None, anchor_far=None,
                    anchor_spacing=None) -> list[float]:
    """The anchor depths of URoPE's options: an explicit list ``anchors``, or ``default_anchors`` of
    ``num_anchors`` (4), ``anchor_near`` (0.5), ``anchor_far`` (8) and ``anchor_spacing`` ("log").
    Raises ``ValueError`` when both forms are given or an anchor is not a positive number."""
    placement = {"num_anchors": num_anchors, "anchor_near": anchor_near, "anchor_far": anchor_far,
                 "anchor_spacing": anchor_spacing}
    given = sorted(k for k, v in placement.items() if v is not None)
    if anchors is not None and given:
        raise ValueError(f"urope: give anchors or {given}, not both")
    if anchors is None:
        anchors = default_anchors(4 if num_anchors is None else num_anchors,
                                  0.5 if anchor_near is None else anchor_near,
                                  8.0 if anchor_far is None else anchor_far,
                                  "log" if anchor_spacing is None else anchor_spacing)
    anchors = list(anchors)
    if not anchors or any(not (a > 0) for a in anchors):
        raise ValueError(f"urope anchors must be a non-empty list of positive depths, got {anchors}")
    return anchors


def project_key_positions(
    K: torch.Tensor,
    w2c: torch.Tensor,
    anchors: torch.Tensor,
    image_size: tuple[int, int],
    grid: tuple[int, int],
    *,
    behind_eps: float = 1e-3,
    clip: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Key patch positions projected into every query view, in patch units (no offset).

    K: (B, S, 3, 3) pixel intrinsics; w2c: (B, S, 4, 4); anchors: (G,) z-depths. Returns
    ``pos`` (B, S_q, G, S_k, h*w, 2) as (y, x) grid coordinates (exact grid on the diagonal
    i = j) and ``behind`` (B, S_q, G, S_k, h*w) bool (projected depth <= eps * anchor).
    """
    H, W = image_size
    h, w = grid
    B, S = w2c.shape[:2]
    dt, dev = w2c.dtype, w2c.device
    pw, ph = W / w, H / h
    rr, cc = torch.meshgrid(torch.arange(h, dtype=dt, device=dev), torch.arange(w, dtype=dt, device=dev),
                            indexing="ij")
    cc, rr = cc.reshape(-1), rr.reshape(-1)
    pix = torch.stack([(cc + 0.5) * pw - 0.5, (rr + 0.5) * ph - 0.5, torch.ones_like(cc)], -1)
    rays = pix @ invert_intrinsics(K).mT  # (B, S, n, 3), z = 1
    R, t = w2c[..., :3, :3], w2c[..., :3, 3]
    R_ij = R[:, :, None] @ R[:, None].mT  # (B, Sq, Sk, 3, 3)
    t_ij = t[:, :, None] - (R_ij @ t[:, None, :, :, None]).squeeze(-1)  # (B, Sq, Sk, 3)
    M = K[:, :, None] @ R_ij  # K_i R_ij
    m = (K[:, :, None] @ t_ij.unsqueeze(-1)).squeeze(-1)  # K_i t_ij
    dirs = torch.einsum("bijxy,bjny->bijnx", M, rays)  # (B, Sq, Sk, n, 3)
    a = anchors.to(dt).view(1, 1, -1, 1, 1, 1)
    p = a * dirs.unsqueeze(2) + m[:, :, None, :, None, :]  # (B, Sq, G, Sk, n, 3)
    z = p[..., 2]
    eps = behind_eps * a[..., 0]
    behind = z <= eps
    z_safe = torch.maximum(z, eps)
    x = ((p[..., 0] / z_safe + 0.5) / pw - 0.5).clamp(-clip * w, (1 + clip) * w)
    y = ((p[..., 1] / z_safe + 0.5) / ph - 0.5).clamp(-clip * h, (1 + clip) * h)
    pos = torch.stack([y, x], dim=-1)
    eye = torch.eye(S, dtype=torch.bool, device=dev).view(1, S, 1, S, 1, 1)
    exact = torch.stack([rr, cc], dim=-1).view(1, 1, 1, 1, -1, 2)
    pos = torch.where(eye, exact, pos)
    behind = behind & ~eye[..., 0]
    return pos, behind


def _as_pairs(x: torch.Tensor) -> torch.Tensor:
    """(..., d) -> (..., d/2) complex: VGGT's rotate-half pairs (c, c + d/4) of each half as a + ib.

    Complex index ``half * d/4 + m`` holds channels (half*d/2 + m, half*d/2 + m + d/4); the
    channel permutation is the same for q and k, so their dot products are unchanged.
    """
    d = x.shape[-1]
    pairs = x.unflatten(-1, (2, 2, d // 4)).transpose(-1, -2).contiguous()  # (..., half, m, a|b)
    return torch.view_as_complex(pairs).flatten(-2)


def _phases(pos: torch.Tensor, d: int, base: float, dtype) -> torch.Tensor:
    """Unit complex numbers (..., d/2) for positions (..., 2) = (y, x), VGGT frequencies.

    Index ``axis * d/4 + m`` (axis 0 = y, 1 = x) holds ``exp(i pos[axis] base^(-m / (d/4)))``.
    """
    ang = (pos.to(dtype).unsqueeze(-1) * _frequencies(d // 4, base, dtype, pos.device)).flatten(-2)
    return torch.complex(ang.cos(), ang.sin())


_FREQUENCIES: dict = {}


def _frequencies(nf: int, base: float, dtype, device) -> torch.Tensor:
    """(nf,) VGGT RoPE frequencies ``base ** (-m / nf)``, computed in float64, in ``dtype`` (memoized)."""
    return memoized(_FREQUENCIES, (nf, base, dtype, device), lambda: (
        base ** (-torch.arange(nf, dtype=torch.float64, device=device) / nf)).to(dtype))


def _as_planes(x: torch.Tensor) -> torch.Tensor:
    """(..., d) -> (..., 2, d/2): plane 0 holds the first member of every rotate-half pair
    (channel ``half*d/2 + m``), plane 1 the second (``half*d/2 + m + d/4``), both in the index
    order ``half*d/4 + m`` of ``_phases``. The same permutation for q and k keeps every logit."""
    d = x.shape[-1]
    return x.unflatten(-1, (2, 2, d // 4)).transpose(-3, -2).flatten(-2)


def _cos_sin(pos: torch.Tensor, d: int, base: float, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin (..., d/2) of the angles of ``_phases`` for positions (..., 2) = (y, x)."""
    ang = (pos.to(dtype).unsqueeze(-1) * _frequencies(d // 4, base, dtype, pos.device)).flatten(-2)
    return ang.cos(), ang.sin()


def _rotate_planes(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate every (a, b) pair of planes x (..., 2, d/2) by the angles of cos, sin (..., d/2)."""
    a, b = x[..., 0, :], x[..., 1, :]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-2)


class URoPE(Encoding):
    """Prepared URoPE; ``attend`` loops over chunks of query views (see module docstring).

    ``num_groups`` is the number of anchors A; ``G`` the number of head groups (A head-wise, 1
    channel-wise). ``reproject(anchors (A,) float64) -> (key_pos, behind)`` recomputes the key
    positions for other anchors (``with_anchors``)."""

    def __init__(self, *, key_pos, query_pos, behind, num_views, tokens_per_view, num_groups,
                 view_chunk: int = 1, base: float = 100.0, cache_tables: bool = False,
                 assignment: str = "heads", reproject=None):
        self.key_pos = key_pos  # (B, Sq, A, N, 2) (y, x) float64, offset applied
        self.query_pos = query_pos  # (N, 2) float64
        self.behind = behind  # (B, Sq, A, Sk, n) diagnostics
        if assignment not in ANCHOR_ASSIGNMENTS:
            raise ValueError(f"urope anchor_assignment must be one of {list(ANCHOR_ASSIGNMENTS)}, got {assignment!r}")
        self.assignment = assignment
        self.num_anchors = int(num_groups)
        self.S, self.T = fused.as_size(num_views), fused.as_size(tokens_per_view)
        self.G = self.num_anchors if assignment == "heads" else 1
        self.B = key_pos.shape[0]
        if view_chunk < 1:
            raise ValueError(f"urope view_chunk must be >= 1, got {view_chunk}")
        self.view_chunk = int(view_chunk)
        self.base = float(base)
        self.cache_tables = bool(cache_tables)
        self._reproject = reproject
        self._cache: dict = {}
        self._backward_phases: dict = {}  # chunk -> phases, from recompute to rotate-backward
        self.fused = None  # None: the device's default (``camera.use_fused``); False: always the hooks path

    def with_anchors(self, anchors: torch.Tensor) -> "URoPE":
        """This encoding with the keys projected at other anchors: (A,) float64 depths, e.g. a
        layer's learnable anchors (gradients flow to them). Same number of anchors as prepared."""
        if self._reproject is None:
            raise ValueError("urope: this encoding was built without its cameras; prepare it with make_urope")
        if anchors.shape != (self.num_anchors,):
            raise ValueError(f"urope: with_anchors needs {self.num_anchors} anchors, got shape {tuple(anchors.shape)}")
        enc = copy.copy(self)
        enc.key_pos, enc.behind = self._reproject(anchors)
        enc._cache, enc._backward_phases = {}, {}
        return enc

    def _assign(self, table: torch.Tensor) -> torch.Tensor:
        """Per-anchor tables (..., A, N, d/2) -> per head group (..., G, N, d/2): unchanged head-wise;
        channel-wise, index ``axis * d/4 + m`` takes anchor ``m mod A`` (G = 1)."""
        if self.assignment == "heads":
            return table
        d2 = table.shape[-1]
        pick = (torch.arange(d2, device=table.device) % (d2 // 2)) % self.num_anchors
        index = pick.view(*([1] * (table.ndim - 1)), d2).expand(*table.shape[:-3], 1, table.shape[-2], d2)
        return torch.gather(table, -3, index)

    # -- checks and tables ---------------------------------------------------------------------
    def _check(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        if q.ndim != 4 or k.shape != q.shape or v.shape[:-1] != q.shape[:-1]:
            raise ValueError(f"urope: q, k, v must be (B, heads, S*T, head_dim), got {tuple(q.shape)}, "
                             f"{tuple(k.shape)}, {tuple(v.shape)}")
        B, H, N, d = q.shape
        if N != self.S * self.T:
            raise ValueError(f"urope: prepared for {self.S} views x {self.T} tokens = "
                             f"{self.S * self.T} tokens, got {N}")
        if B != self.B:
            raise ValueError(f"urope: prepared for batch {self.B}, got batch {B}")
        if d % 4:
            raise ValueError(f"urope needs a head dim divisible by 4 (2D RoPE), got {d}")
        if self.assignment == "channels" and (d // 4) % self.num_anchors:
            raise ValueError(f"urope: channel-wise anchors need head_dim / 4 = {d // 4} to be a multiple of "
                             f"the number of anchors {self.num_anchors}; use fewer anchors or head-wise")
        if H % self.G:
            raise ValueError(f"urope: {H} heads cannot be split into {self.G} anchor groups; use a "
                             "number of anchors that divides the number of heads")

    def _key_phases(self, i0: int, i1: int, d: int, cdtype, device) -> torch.Tensor:
        """(B, i1-i0, G, 1, N, d/2) complex key phases for query views i0..i1-1."""
        if self.cache_tables:
            key = ("k", d, cdtype, device)
            table = memoized(self._cache, key,
                             lambda: self._assign(_phases(self.key_pos.to(device), d, self.base, _real(cdtype))))
            return table[:, i0:i1, :, None]
        pos = self._key_pos_as(_real(cdtype), device)[:, i0:i1]
        return self._assign(_phases(pos, d, self.base, _real(cdtype)))[:, :, :, None]

    def _view_phases(self, i: int, g0: int, g1: int, d: int, cdtype, device) -> torch.Tensor:
        """Complex key phases of query view i for head groups g0..g1-1, shaped to multiply heads
        grouped by ``_by_group``: (B, 1, N, d/2) for one group, (B, g1-g0, 1, N, d/2) for several."""
        if self.cache_tables:
            ph = self._key_phases(i, i + 1, d, cdtype, device)[:, 0, g0:g1]
        else:
            pos = self._key_pos_as(_real(cdtype), device)[:, i]  # (B, A, N, 2)
            if self.assignment == "heads":
                pos = pos[:, g0:g1]
            ph = self._assign(_phases(pos, d, self.base, _real(cdtype))).unsqueeze(2)  # (B, g1-g0, 1, N, d/2)
        return ph[:, 0] if g1 - g0 == 1 else ph

    def _key_pos_as(self, dtype, device) -> torch.Tensor:
        key = ("pos", dtype, device)
        return memoized(self._cache, key, lambda: self.key_pos.to(device=device, dtype=dtype))

    def _query_phases(self, d: int, cdtype, device) -> torch.Tensor:
        key = ("q", d, cdtype, device)
        return memoized(self._cache, key, lambda: _phases(self.query_pos.to(device), d, self.base, _real(cdtype)))

    # -- attention -----------------------------------------------------------------------------
    def _rotated(self, q: torch.Tensor, k: torch.Tensor):
        """Permuted, complex views: q rotated at its grid (B,H,N,d/2), k unrotated (B,G,H/G,N,d/2)."""
        B, H, N, d = q.shape
        wd = work_dtype(q.dtype)
        qc, kc = _as_pairs(q.to(wd)), _as_pairs(k.to(wd))
        q_rot = torch.view_as_real(qc * self._query_phases(d, qc.dtype, q.device)).flatten(-2)
        return q_rot.to(q.dtype), kc.unflatten(1, (self.G, H // self.G))

    def _chunk_keys(self, kr: torch.Tensor, i0: int, i1: int, out_dtype,
                    keep_phases: bool = False) -> torch.Tensor:
        """Keys rotated for query views i0..i1-1: (B*(i1-i0), H, N, d) in ``out_dtype``.

        kr: (B, G, H/G, N, d/2, 2) permuted keys in the work dtype (real view of complex pairs).
        keep_phases: leave the phases for ``_RotateKeys.backward`` (used during backward only).
        """
        B, G, Hg, N, d2, _ = kr.shape
        ph = self._key_phases(i0, i1, 2 * d2, _complex(kr.dtype), kr.device)
        if keep_phases:
            self._backward_phases[(i0, i1)] = ph
        k_rot = torch.view_as_complex(kr).unsqueeze(1) * ph
        return torch.view_as_real(k_rot).reshape(B * (i1 - i0), G * Hg, N, 2 * d2).to(out_dtype)

    def attend(self, q, k, v, *, dropout_p: float = 0.0):
        """URoPE attention. q, k, v: (B, heads, S*T, head_dim) -> (B, heads, S*T, head_dim).

        Memory: the rotated keys of a chunk are not kept for backward; a saved-tensor hook
        recomputes them from the permuted keys and the positions (one complex multiply).
        With a fused kernel (``_fused_kernel``) the fused attention of ``urope_fused`` runs instead,
        compiled or not (``fused.attend``). Otherwise, under ``torch.compile`` the same attention
        runs as plain real-valued tensor code (``_attend_traced``: no hooks, no custom autograd
        function, no caches), and the compiler's own partitioner decides what to keep for backward.
        """
        self._check(q, k, v)
        kernel, dtype = self._fused_kernel(q, k, v, dropout_p), attention_dtype(q)
        if kernel is not None:
            with torch.autocast(device_type=q.device.type, enabled=False):
                return fused.attend(q, k, v, self, kernel, dtype)
        if torch.compiler.is_compiling():
            return self._attend_traced(q, k, v, dropout_p)
        B, H, N, d = q.shape
        with torch.autocast(device_type=q.device.type, enabled=False):
            q_rot, kc = self._rotated(q, k)
        kr = torch.view_as_real(kc)  # (B, G, H/G, N, d/2, 2), work dtype
        kr_const = kr.detach()
        anchor_grad = self.key_pos.requires_grad and torch.is_grad_enabled()
        dt = attention_dtype(q)  # cast here, not by autocast inside SDPA: the hooks must see k_rot itself
        q_rot, v = q_rot.to(dt), v.to(dt)
        q_views = q_rot.unflatten(2, (self.S, self.T))  # (B, H, S, T, d)
        outs = []
        for n, q_blk in enumerate(q_views.split(self.view_chunk, dim=2)):  # (B, H, c, T, d)
            i0 = n * self.view_chunk
            c = q_blk.shape[2]
            i1 = i0 + c
            with torch.autocast(device_type=q.device.type, enabled=False):
                k_rot = _RotateKeys.apply(kr, self, i0, i1, dt)
                if anchor_grad:
                    k_rot = k_rot + self._anchor_gradient(kr_const, i0, i1, dt)
            if c == 1:
                q_c, v_c = q_blk.squeeze(2), v
            else:
                q_c = q_blk.transpose(1, 2).reshape(B * c, H, self.T, d)
                v_c = v.unsqueeze(1).expand(B, c, H, N, v.shape[-1]).reshape(B * c, H, N, v.shape[-1])
            with torch.autograd.graph.saved_tensors_hooks(
                *self._recompute_hooks(k_rot, kr_const, i0, i1, dt)
            ):
                o = F.scaled_dot_product_attention(q_c, k_rot, v_c, dropout_p=dropout_p)
            del k_rot
            outs.append(o.unsqueeze(2) if c == 1 else o.view(B, c, H, self.T, -1).transpose(1, 2))
        return torch.cat(outs, dim=2).flatten(2, 3)  # (B, H, S, T, dv) -> (B, H, N, dv)

    def fused_forward(self, q, k, v, kernel: FusedKernel, dtype):
        """``urope_fused.fused_forward`` of this encoding (the interface of ``depthpe.pe.fused``)."""
        return urope_fused.fused_forward(self, q, k, v, kernel, dtype)

    def fused_backward(self, grad, saved, states, kernel: FusedKernel, dtypes):
        """``urope_fused.fused_backward`` of this encoding."""
        return urope_fused.fused_backward(self, grad, saved, states, kernel, dtypes)

    def flat(self) -> tuple[str, list[torch.Tensor], list[int], str]:
        """("urope", [key_pos, query_pos], the sizes [S, T], a JSON spec of the static rest): what
        ``from_flat`` rebuilds the encoding's fused attention from (``depthpe.pe.fused``'s custom
        operators; the sizes are symbolic under ``torch.compile`` with dynamic shapes)."""
        spec = dict(num_groups=self.num_anchors, base=self.base, cache_tables=self.cache_tables,
                    assignment=self.assignment)
        return "urope", [self.key_pos, self.query_pos], [self.S, self.T], fused.spec_string(spec)

    @classmethod
    def from_flat(cls, tensors: list[torch.Tensor], sizes: list[int], spec: str) -> "URoPE":
        """The encoding ``flat`` describes, for its fused attention (no diagnostics, no reprojection)."""
        spec = json.loads(spec)
        key_pos, query_pos = tensors
        (S, T) = sizes
        return cls(key_pos=key_pos, query_pos=query_pos, behind=None, num_views=S, tokens_per_view=T,
                   num_groups=spec["num_groups"], base=spec["base"], cache_tables=spec["cache_tables"],
                   assignment=spec["assignment"])

    def _fused_kernel(self, q, k, v, dropout_p: float) -> FusedKernel | None:
        """The fused kernel of ``urope_fused.fused_forward`` (``kernels.fused_kernel``), or None where ``attend``
        takes the hooks path: no gradients, ``fused`` off, ``view_chunk`` > 1, learnable anchors
        (gradients to the key positions), or no fused kernel for these inputs."""
        if not (use_fused(self.fused, q.device.type) and self.view_chunk == 1 and torch.is_grad_enabled()
                and any(x.requires_grad for x in (q, k, v)) and not self.key_pos.requires_grad):
            return None
        return fused_kernel(q, k, v, dropout_p=dropout_p, dtype=attention_dtype(q))

    def _group_chunks(self, heads: int, device_type: str) -> list[tuple[int, int, slice]]:
        """(first group, end group, head slice) per fused-kernel call: a slice lies inside one anchor
        group or covers whole groups. On CPU one head per call (measured fastest there: a head's
        keys, values and gradient sums stay in the cache); elsewhere ``HEAD_CHUNKS`` slices."""
        per = heads // self.G
        size = 1 if device_type == "cpu" else max(1, heads // HEAD_CHUNKS.get(device_type, 8))
        size = per * (size // per) if size >= per else max(n for n in range(1, size + 1) if per % n == 0)
        return [(h // per, (h + size - 1) // per + 1, slice(h, h + size)) for h in range(0, heads, size)]

    def _anchor_gradient(self, kr_const, i0: int, i1: int, out_dtype) -> torch.Tensor:
        """Zero in value, but in backward the gradient of the rotated keys of query views i0..i1-1
        w.r.t. the key positions (and so the learnable anchors), which ``_RotateKeys`` does not give.

        ``k - k.detach()`` is exactly 0, so adding it leaves the forward and every other gradient bit
        for bit as with fixed anchors; ``kr_const`` (B, G, H/G, N, d/2, 2) is detached, so q, k get
        nothing twice. Keeps the chunk's phases for backward (only with learnable anchors)."""
        B, G, Hg, N, d2, _ = kr_const.shape
        pos = self.key_pos[:, i0:i1].to(kr_const.device)
        ph = self._assign(_phases(pos, 2 * d2, self.base, kr_const.dtype))[:, :, :, None]
        k = torch.view_as_real(torch.view_as_complex(kr_const).unsqueeze(1) * ph)
        k = k.reshape(B * (i1 - i0), G * Hg, N, 2 * d2).to(out_dtype)
        return k - k.detach()

    def _attend_traced(self, q, k, v, dropout_p: float):
        """``attend`` written for tracing: real (a, b) channel planes instead of complex views.

        q, k, v: (B, heads, S*T, head_dim). Same logits as the eager path up to float rounding
        (both permute q and k channels alike; the planes put the a and b members of every
        rotation pair in two contiguous halves).
        """
        B, H, N, d = q.shape
        with torch.autocast(device_type=q.device.type, enabled=False):
            wd = work_dtype(q.dtype)
            cos_q, sin_q = _cos_sin(self.query_pos, d, self.base, wd)  # (N, d/2)
            q_rot = _rotate_planes(_as_planes(q.to(wd)), cos_q, sin_q).flatten(-2).to(q.dtype)
            kp = _as_planes(k.to(wd)).unflatten(1, (self.G, H // self.G))  # (B, G, H/G, N, 2, d/2)
        q_views = q_rot.unflatten(2, (self.S, self.T))  # (B, H, S, T, d)
        outs = []
        for i0 in range(0, self.S, self.view_chunk):
            i1 = min(i0 + self.view_chunk, self.S)
            c = i1 - i0
            with torch.autocast(device_type=q.device.type, enabled=False):
                cos_k, sin_k = _cos_sin(self.key_pos[:, i0:i1], d, self.base, wd)  # (B, c, A, N, d/2)
                cos_k, sin_k = self._assign(cos_k), self._assign(sin_k)  # (B, c, G, N, d/2)
                k_rot = _rotate_planes(kp.unsqueeze(1), cos_k[:, :, :, None], sin_k[:, :, :, None])
                k_rot = k_rot.reshape(B * c, H, N, d).to(q.dtype)
            q_c = q_views[:, :, i0:i1].transpose(1, 2).reshape(B * c, H, self.T, d)
            v_c = v.unsqueeze(1).expand(B, c, H, N, v.shape[-1]).reshape(B * c, H, N, v.shape[-1])
            o = F.scaled_dot_product_attention(q_c, k_rot, v_c, dropout_p=dropout_p)
            outs.append(o.view(B, c, H, self.T, -1).transpose(1, 2))
        return torch.cat(outs, dim=2).flatten(2, 3)

    def _recompute_hooks(self, k_rot, kr_const, i0, i1, out_dtype):
        """Saved-tensor hooks that store a recipe instead of the rotated keys ``k_rot``.

        Every other tensor goes to the hooks that were active before (``outer``), e.g. those of
        activation checkpointing, which then drops and recomputes it as for any other layer:
        saved-tensor hooks do not nest by themselves (the innermost pair gets every tensor). The
        recipe's ingredient, the permuted keys ``kr_const``, goes to them too (under checkpointing
        a handle, recomputed with the layer), and the hooks hold it only weakly: autograd keeps both
        hooks as long as the graph, and a closure holding ``kr_const`` kept one float32 key tensor
        per checkpointed layer alive until backward (docs/speed.md).
        """
        sig = (k_rot.data_ptr(), k_rot.shape, k_rot.stride(), k_rot.dtype)
        outer = torch._C._autograd._top_saved_tensors_default_hooks(False)
        keys = weakref.ref(kr_const)

        def pack(t):
            if (t.data_ptr(), t.shape, t.stride(), t.dtype) == sig:
                return _Recompute(outer[0](keys()) if outer is not None else keys())
            return _Outer(outer[0](t)) if outer is not None else t

        def unpack(x):
            if isinstance(x, _Recompute):
                kr = outer[1](x.keys) if outer is not None else x.keys
                with torch.no_grad(), torch.autocast(device_type=kr.device.type, enabled=False):
                    return self._chunk_keys(kr, i0, i1, out_dtype, keep_phases=True)
            return outer[1](x.packed) if isinstance(x, _Outer) else x

        return pack, unpack

    def attention_logits(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Debug/test helper: (B, heads, N, N) logits. Materializes the matrix."""
        return self.attention_scores(q, k)

    def attention_scores(self, q, k, rows=None, cols=None):
        """Logits of query tokens ``rows`` over key tokens ``cols`` (None = all): (B, heads,
        len(rows), len(cols)), the keys rotated for each query's own view; with gradients."""
        B, H, N, d = q.shape
        rows = torch.arange(N, device=q.device) if rows is None else rows.to(q.device)
        q_rot, kc = self._rotated(q, k)
        views = rows // self.T
        blocks, order = [], []
        for i in views.unique().tolist():
            mine = (views == i).nonzero().squeeze(1)
            k_rot = self._chunk_keys(torch.view_as_real(kc), i, i + 1, q_rot.dtype)
            if cols is not None:
                k_rot = k_rot[:, :, cols.to(q.device)]
            blocks.append(q_rot[:, :, rows[mine]] @ k_rot.mT / math.sqrt(d))
            order.append(mine)
        return torch.cat(blocks, dim=2)[:, :, torch.argsort(torch.cat(order))]

    def _no_transform(self, x):
        raise NotImplementedError(
            "urope rotates keys differently for every query view, so it has no per-tensor "
            "transform; call attend(q, k, v)"
        )

    transform_q = transform_k = _no_transform


class _Recompute:
    """Stored by the saved-tensor hook in place of a chunk's rotated keys: the permuted keys they are
    recomputed from (``keys``: the tensor, or what the enclosing hooks packed for it)."""

    def __init__(self, keys):
        self.keys = keys


class _Outer:
    """What the enclosing saved-tensor hooks (e.g. activation checkpointing's) packed for a tensor."""

    def __init__(self, packed):
        self.packed = packed


class _RotateKeys(torch.autograd.Function):
    """Rotate permuted keys for query views i0..i1-1 without saving anything large for backward.

    forward(kr (B,G,H/G,N,d/2,2) work dtype, enc, i0, i1, out_dtype) -> (B*c, H, N, d) out_dtype.
    backward multiplies by the conjugate phases (recomputed) and sums over the c query views.
    """

    @staticmethod
    def forward(ctx, kr, enc, i0, i1, out_dtype):
        ctx.enc, ctx.i0, ctx.i1, ctx.shape = enc, i0, i1, kr.shape
        ctx.kr_dtype = kr.dtype
        return enc._chunk_keys(kr, i0, i1, out_dtype)

    @staticmethod
    def backward(ctx, grad):
        B, G, Hg, N, d2, _ = ctx.shape
        c = ctx.i1 - ctx.i0
        with torch.autocast(device_type=grad.device.type, enabled=False):
            ph = ctx.enc._backward_phases.pop((ctx.i0, ctx.i1), None)
            if ph is None:
                ph = ctx.enc._key_phases(ctx.i0, ctx.i1, 2 * d2, _complex(ctx.kr_dtype), grad.device)
            g = grad.to(ctx.kr_dtype).reshape(B, c, G, Hg, N, d2, 2).contiguous()
            gk = torch.view_as_complex(g) * ph.conj()
            gk = gk.squeeze(1) if c == 1 else gk.sum(1)
        return torch.view_as_real(gk), None, None, None, None


def _key_positions(anchors, *, K64, E, image_size, grid, num_special, patch_offset, behind_eps, clip):
    """Key positions (B, Sq, A, S*T, 2) with offset, special tokens at 0, and ``behind`` (B, Sq, A, Sk, n)
    for anchors (A,) (a list or a float64 tensor); see ``project_key_positions``."""
    with torch.autocast(device_type=E.device.type, enabled=False):
        a = torch.as_tensor(anchors, dtype=torch.float64, device=E.device)
        pos, behind = project_key_positions(K64, E, a, image_size, grid, behind_eps=behind_eps,
                                            clip=clip)
    B, S, A, _, n, _ = pos.shape
    pos = pos + patch_offset
    special = torch.zeros(B, S, A, S, num_special, 2, dtype=pos.dtype, device=pos.device)
    return torch.cat([special, pos], dim=4).flatten(3, 4), behind


def make_urope(*, image_size, grid, num_special, patch_offset, K, w2c, num_views,
               anchors=None, num_anchors: int | None = None, anchor_near: float | None = None,
               anchor_far: float | None = None, anchor_spacing: str | None = None,
               anchor_assignment: str = "heads", learnable_anchors: bool = False,
               view_chunk: int = 1, behind_eps: float = 1e-3, clip: float = 1.0,
               rope_base: float = 100.0, cache_tables: bool = False,
               max_translation: float | None = 10.0):
    """Prepare URoPE. K: (B,S,3,3) pixel intrinsics; w2c: (B,S,3|4,4) OpenCV world-to-camera.

    anchors: depth anchors (normalized scene units), one per head group; default
    ``default_anchors()`` = 4 log-spaced over 0.5..8; or ``num_anchors``, ``anchor_near``,
    ``anchor_far``, ``anchor_spacing`` (``resolve_anchors``). anchor_assignment: "heads" (one anchor
    per head group) or "channels" (every head, anchor m mod A on RoPE frequency m).
    learnable_anchors: read by the model, which owns the per-layer anchors (``LearnableAnchors``);
    here the anchors are the fixed initial ones. view_chunk: query views per SDPA call.
    """
    # shapes only: values are checked where data enters (``check_encoding_cameras``; max_translation is read there)
    K64, E = camera_tensors(K, w2c, num_views, method="urope")
    anchors = resolve_anchors(anchors, num_anchors, anchor_near, anchor_far, anchor_spacing)
    reproject = functools.partial(_key_positions, K64=K64, E=E, image_size=image_size, grid=grid,
                                  num_special=num_special, patch_offset=patch_offset,
                                  behind_eps=behind_eps, clip=clip)
    key_pos, behind = reproject(anchors)
    S, h, w = E.shape[1], *grid
    query_pos = token_positions(S, grid, num_special, patch_offset, dtype=torch.float64,
                                device=key_pos.device)  # (S*T, 2) (y, x)
    return URoPE(key_pos=key_pos, query_pos=query_pos, behind=behind, num_views=num_views,
                 tokens_per_view=num_special + h * w, num_groups=len(anchors), view_chunk=view_chunk,
                 base=rope_base, cache_tables=cache_tables, assignment=anchor_assignment,
                 reproject=reproject)


class LearnableAnchors(nn.Module):
    """URoPE depth anchors learned per layer (``learnable_anchors: true``), owned by the model.

    ``log_scale`` (num_layers, A), zeros at init: layer l uses ``anchors * exp(log_scale[l])``
    (float64), so the anchors stay positive and start exactly at the fixed ones (exp(0) = 1).
    """

    def __init__(self, anchors: list[float], num_layers: int):
        super().__init__()
        self.anchors = tuple(float(a) for a in anchors)
        self.log_scale = nn.Parameter(torch.zeros(int(num_layers), len(self.anchors)))

    def forward(self, layer: int) -> torch.Tensor:
        """(A,) float64 anchors of layer ``layer``."""
        base = torch.tensor(self.anchors, dtype=torch.float64, device=self.log_scale.device)
        return base * self.log_scale[layer].to(torch.float64).exp()

    def layer_encoding(self, enc: URoPE, layer: int) -> URoPE:
        """The prepared URoPE ``enc`` with layer ``layer``'s anchors."""
        return enc.with_anchors(self(layer))


fused.register("urope", URoPE.from_flat)
