"""URoPE's fused attention (``fused_forward``, ``fused_backward``: see ``depthpe.pe.fused``) and the
pair-order helpers it works with.

Split from ``urope.py``, which prepares the encoding (key positions, anchors, phase tables) and calls
these functions from ``URoPE.attend`` through ``fused.attend``; they read the prepared encoding only through its
methods (``_group_chunks``, ``_view_phases``, ``_query_phases``) and attributes (``S``, ``T``).
Tensors are (B, heads, S*T, head_dim); "pair order" puts the two members of each VGGT rotate-half
pair side by side, so that a complex view multiplies them by unit phases.
"""

from __future__ import annotations

import itertools

import torch

from .camera import head_chunks, work_dtype
from .kernels import FusedKernel


def _real(cdtype):
    """The real dtype of complex ``cdtype`` (complex128 -> float64, else float32)."""
    return torch.float64 if cdtype == torch.complex128 else torch.float32


def _complex(dtype):
    """The complex dtype for real ``dtype`` (float64 -> complex128, else complex64)."""
    return torch.complex128 if dtype == torch.float64 else torch.complex64


def _pair_order(x: torch.Tensor, out: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """Write x (..., d) into ``out`` (..., d, any dtype and strides, not overlapping x) in pair order
    (``_as_pairs``'s channel order, as reals), or with ``inverse`` from pair order back to VGGT's
    channel order; one copy."""
    d = x.shape[-1]
    rotate_half, pairs = (2, 2, d // 4), (2, d // 4, 2)
    src, dst = (pairs, rotate_half) if inverse else (rotate_half, pairs)
    out.unflatten(-1, dst).copy_(x.unflatten(-1, src).transpose(-1, -2))
    return out


def _rotate_pairs(x: torch.Tensor, phases: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x (..., d) real in pair order times unit complex ``phases`` (..., d/2), as reals in ``dtype``."""
    return torch.view_as_real(_complex_view(x.to(_real(phases.dtype))) * phases).flatten(-2).to(dtype)


def _by_group(x: torch.Tensor, g0: int, g1: int) -> torch.Tensor:
    """Heads (B, h, ...) of groups g0..g1-1 as (B, g1-g0, h/(g1-g0), ...); unchanged for one group."""
    return x if g1 - g0 == 1 else x.unflatten(1, (g1 - g0, -1))


class _RotatedKeys:
    """The keys of each head slice of ``calls`` rotated for one query view: ``keys(h, ph)`` is the
    slice h of kp (B, H, N, d, pair order) times the phases ``ph`` of its groups
    (``URoPE._view_phases``), (B, h, N, d) in ``dtype``.

    Every call writes the same buffer (a call's keys live only during its kernel call), so no call
    allocates: rotating one head's keys at S = 8 into a new tensor measured 45-99 µs, into this
    buffer 34-35 µs. The views of each slice are made once here, so where the keys are in the
    phases' real dtype (float32, float64) a call costs one complex multiply and one dispatch."""

    def __init__(self, enc, kp: torch.Tensor, dtype: torch.dtype, cdt: torch.dtype):
        chunks = enc._group_chunks(kp.shape[1], kp.device.type)
        size = max(h.stop - h.start for _, _, h in chunks)
        buf = torch.empty(kp.shape[0], size, *kp.shape[2:], dtype=dtype, device=kp.device)
        self.slices = {}
        for g0, g1, h in chunks:
            src, out = _by_group(kp[:, h], g0, g1), buf[:, :h.stop - h.start]
            fast = dtype == kp.dtype == _real(cdt) and _has_complex_view(out)
            views = (_complex_view(src), _complex_view(_by_group(out, g0, g1))) if fast else None
            self.slices[h.start] = (src, _by_group(out, g0, g1), out, views)

    def __call__(self, h: slice, ph: torch.Tensor) -> torch.Tensor:
        src, grouped_out, out, views = self.slices[h.start]
        if views is not None:
            torch.mul(views[0], ph, out=views[1])
        else:
            _rotate_into(src, ph, grouped_out)
        return out


def _rotate_into(x: torch.Tensor, phases: torch.Tensor, out: torch.Tensor) -> None:
    """``out[...] = _rotate_pairs(x, phases, out.dtype)``, without a temporary where ``out`` is in the
    phases' real dtype and its layout has a complex view."""
    if out.dtype == _real(phases.dtype) and _has_complex_view(out):
        torch.mul(_complex_view(x.to(out.dtype)), phases, out=_complex_view(out))
    else:
        out.copy_(_rotate_pairs(x, phases, out.dtype))


def _has_complex_view(x: torch.Tensor) -> bool:
    """Whether ``torch.view_as_complex`` can view x's last dim as pairs (unit stride, even strides and offset)."""
    return x.stride(-1) == 1 and all(s % 2 == 0 for s in x.stride()[:-1]) and x.storage_offset() % 2 == 0


def _complex_view(x: torch.Tensor) -> torch.Tensor:
    """x (..., d) real in pair order as (..., d/2) complex (a view where x's layout allows one, else a
    view of a copy: a clone, since ``contiguous`` keeps an already contiguous tensor's odd offset)."""
    return torch.view_as_complex((x if _has_complex_view(x) else x.clone(memory_format=torch.contiguous_format))
                                 .unflatten(-1, (-1, 2)))


def fused_forward(enc, q, k, v, kernel: FusedKernel, dtype):
    """URoPE attention with one fused-kernel call per (query view, head slice): q, k, v (B, H, N, d)
    -> (out (B, H, N, d) in ``dtype``, saved, states) for ``depthpe.pe.fused``. ``saved`` is what a
    RoPE layer keeps: the rotated queries q', the keys (unrotated, in pair order), v and the output;
    ``states`` the kernel states of the calls. The keys rotated for a query view exist only during
    that view's kernel call (forward) and are recomputed for its backward.

    The calls go in ``calls``'s order (anchor group, block of query views, head slice, view): the key
    phases of a (view, group) are computed once for the group's heads, and a head slice's keys and
    values stay in the processor's caches while a block of views goes by. The rotated keys of every
    call are written into one buffer (``_RotatedKeys``).
    """
    B, H, N, d = q.shape
    cdt = _complex(work_dtype(q.dtype))
    qp = torch.empty(B, H, N, d, dtype=dtype, device=q.device)
    kp = torch.empty_like(qp)
    ph_q = enc._query_phases(d, cdt, q.device)
    for h in head_chunks(H, q.device.type):
        _rotate_into(_pair_order(q[:, h], torch.empty(q[:, h].shape, dtype=ph_q.real.dtype, device=q.device)),
                     ph_q, qp[:, h])
        _pair_order(k[:, h], kp[:, h])
    out = torch.empty(B, H, N, v.shape[-1], dtype=dtype, device=q.device)
    vd = v.to(dtype)
    states, keys = [], _RotatedKeys(enc, kp, dtype, cdt)
    for _, _, h, rows, ph in calls(enc, H, d, cdt, q.device):
        o, state = kernel.forward(qp[:, h, rows], keys(h, ph), vd[:, h])
        out[:, h, rows] = o
        states.append(state)
    return out, (qp, kp, v, out), states


VIEW_BLOCK = 4  # query views whose key phases are computed together (``calls``)


def calls(enc, H: int, d: int, cdt, device, view_block: int | None = None, conjugate: bool = False):
    """(first group g0, end group g1, head slice, token rows of view i, key phases of view i for
    groups g0..g1-1 (``URoPE._view_phases``)) per kernel call.

    Order: anchor group by anchor group; inside a group, blocks of ``view_block`` (``VIEW_BLOCK``)
    query views whose phases are computed once; inside a block, head slice by head slice, and for
    each slice the block's views. A head slice's keys and values (and in backward its gradient sums)
    so stay in the processor's caches while a block of views goes by, at the memory of one block's
    phases (``view_block`` / H of a (B, H, N, d) float32 tensor per group for one-head slices).
    With ``conjugate`` the last item is (phases, their complex conjugates), both computed once per
    (view, groups) (backward rotates the key gradients back with the conjugates).
    Measured on CPU (docs/speed.md): views inside heads, not heads inside views, is what keeps the
    per-view calls near RoPE's one call."""
    chunks = enc._group_chunks(H, torch.device(device).type)  # slices of the same groups are adjacent
    block = max(1, view_block or VIEW_BLOCK)
    for (g0, g1), same in itertools.groupby(chunks, key=lambda c: (c[0], c[1])):
        heads = [h for _, _, h in same]
        for first in range(0, enc.S, block):
            views = range(first, min(first + block, enc.S))
            phases = [enc._view_phases(i, g0, g1, d, cdt, device) for i in views]
            if conjugate:
                phases = [(ph, ph.conj().resolve_conj()) for ph in phases]
            for h in heads:
                for i, ph in zip(views, phases):
                    yield g0, g1, h, slice(i * enc.T, (i + 1) * enc.T), ph


def fused_backward(enc, grad, saved, states, kernel: FusedKernel, dtypes):
    """(dq, dk, dv) in ``dtypes`` for the gradient ``grad`` of ``fused_forward``'s output; every
    gradient is written or summed straight into dq, dk, dv, so the temporaries are head slices.
    dq is written in VGGT's channel order call by call; dk is summed over the views in pair order
    (the key gradients are rotated back in complex pairs) and reordered at the end."""
    qp, kp, v, out = saved
    dt = qp.dtype
    B, H, N, d = qp.shape
    states = iter(states)
    cdt = _complex(work_dtype(dtypes[0]))
    dk = torch.empty(kp.shape, dtype=work_dtype(dtypes[1]), device=kp.device)  # pair order
    dv = torch.empty(v.shape, dtype=work_dtype(dtypes[2]), device=v.device)
    dq = torch.empty(qp.shape, dtype=dtypes[0], device=qp.device)
    conj_q = enc._query_phases(d, cdt, qp.device).conj().resolve_conj()
    vd = v.to(dt)
    sums = _GradientSums(enc, dk, dv)
    keys = _RotatedKeys(enc, kp, dt, cdt)
    for g0, g1, h, rows, (ph, conj) in calls(enc, H, d, cdt, qp.device, conjugate=True):
        gq, gk, gv = kernel.backward(grad[:, h, rows], qp[:, h, rows], keys(h, ph), vd[:, h], out[:, h, rows],
                                     next(states))
        _pair_order(_rotate_pairs(gq, conj_q[rows], _real(cdt)), dq[:, h, rows], inverse=True)
        sums.add(h, gk, gv, conj)
    for h in head_chunks(H, qp.device.type):  # back from pair order, in place
        _pair_order(dk[:, h].clone(), dk[:, h], inverse=True)
    return dq, dk.to(dtypes[1]), dv.to(dtypes[2])


class _GradientSums:
    """The key and value gradients of ``fused_backward`` summed over the query views, per head slice
    of ``calls``: the first view of a slice writes, the others add. dk (B, H, N, d) is in pair order
    and receives each view's key gradient rotated back by the view's conjugate phases; dv (B, H, N, d)
    receives the value gradients as they are. The views of each slice are made once."""

    def __init__(self, enc, dk: torch.Tensor, dv: torch.Tensor):
        dk_c = _complex_view(dk)
        self.slices = {h.start: (g0, g1, _by_group(dk_c[:, h], g0, g1), dv[:, h])
                       for g0, g1, h in enc._group_chunks(dk.shape[1], dk.device.type)}
        self.written = set()

    def add(self, h: slice, gk: torch.Tensor, gv: torch.Tensor, conj: torch.Tensor) -> None:
        """Add one call's key gradient gk (B, h, N, d, pair order, rotated keys) and value gradient
        gv (B, h, N, d) to head slice h; ``conj``: the call's conjugate key phases."""
        g0, g1, dk_h, dv_h = self.slices[h.start]
        gk = _by_group(_complex_view(gk.to(dk_h.real.dtype)), g0, g1)
        if h.start in self.written:
            dk_h.addcmul_(gk, conj)
            dv_h.add_(gv)
        else:
            self.written.add(h.start)
            torch.mul(gk, conj, out=dk_h)
            dv_h.copy_(gv)
