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


def _rotate_groups(x: torch.Tensor, ph: torch.Tensor, g0: int, g1: int, dtype) -> torch.Tensor:
    """Keys x (B, h, N, d) in pair order, heads of groups g0..g1-1, rotated by those groups' phases
    ``ph`` (``URoPE._view_phases``): (B, h, N, d) in ``dtype``."""
    return _rotate_pairs(_by_group(x, g0, g1), ph, dtype).reshape(x.shape)


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
    view of a contiguous copy)."""
    return torch.view_as_complex((x if _has_complex_view(x) else x.contiguous()).unflatten(-1, (-1, 2)))


def fused_forward(enc, q, k, v, kernel: FusedKernel, dtype):
    """URoPE attention with one fused-kernel call per (query view, head slice): q, k, v (B, H, N, d)
    -> (out (B, H, N, d) in ``dtype``, saved, states) for ``depthpe.pe.fused``. ``saved`` is what a
    RoPE layer keeps: the rotated queries q', the keys (unrotated, in pair order), v and the output;
    ``states`` the kernel states of the calls. The keys rotated for a query view exist only during
    that view's kernel call (forward) and are recomputed for its backward.

    The calls go head group by head group, and inside a group view by view (``calls``): the key
    phases of a (view, group) are computed once for the group's heads, and a head slice's keys,
    values and gradient sums stay in the processor's cache while its views go by.
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
    states = []
    for g0, g1, h, rows, ph in calls(enc, H, d, cdt, q.device):
        o, state = kernel.forward(qp[:, h, rows], _rotate_groups(kp[:, h], ph, g0, g1, dtype), vd[:, h])
        out[:, h, rows] = o
        states.append(state)
    return out, (qp, kp, v, out), states


def calls(enc, H: int, d: int, cdt, device):
    """(first group g0, end group g1, head slice, token rows of view i, key phases of view i for
    groups g0..g1-1 (``URoPE._view_phases``)) per kernel call: the slices that span the same
    groups (on CPU the heads of one group) view by view, then the next groups, so that the phases
    are computed once per (view, groups) and, on CPU, a head's keys, values and gradient sums stay
    in the cache while its views go by."""
    chunks = enc._group_chunks(H, torch.device(device).type)  # slices of the same groups are adjacent
    for (g0, g1), same in itertools.groupby(chunks, key=lambda c: (c[0], c[1])):
        heads = [h for _, _, h in same]
        for i in range(enc.S):
            ph = enc._view_phases(i, g0, g1, d, cdt, device)
            for h in heads:
                yield g0, g1, h, slice(i * enc.T, (i + 1) * enc.T), ph


def fused_backward(enc, grad, saved, states, kernel: FusedKernel, dtypes):
    """(dq, dk, dv) in ``dtypes`` for the gradient ``grad`` of ``fused_forward``'s output; every
    gradient is written or summed straight into dq, dk, dv, so the temporaries are head slices."""
    qp, kp, v, out = saved
    dt = qp.dtype
    B, H, N, d = qp.shape
    states = iter(states)
    cdt = _complex(work_dtype(dtypes[0]))
    dk = torch.empty(kp.shape, dtype=work_dtype(dtypes[1]), device=kp.device)  # pair order
    dk_c, dv = _complex_view(dk), torch.empty(v.shape, dtype=work_dtype(dtypes[2]), device=v.device)
    dq = torch.empty(qp.shape, dtype=dtypes[0], device=qp.device)
    conj_q = enc._query_phases(d, cdt, qp.device).conj().resolve_conj()
    vd = v.to(dt)
    first = set()  # head slices whose dk, dv are written (the first view), the others add
    for g0, g1, h, rows, ph in calls(enc, H, d, cdt, qp.device):
        gq, gk, gv = kernel.backward(grad[:, h, rows], qp[:, h, rows], _rotate_groups(kp[:, h], ph, g0, g1, dt),
                                     vd[:, h], out[:, h, rows], next(states))
        _rotate_into(gq, conj_q[rows], dq[:, h, rows])  # pair order until the end
        gk, conj = _by_group(_complex_view(gk.to(dk.dtype)), g0, g1), ph.conj()
        if h.start not in first:
            first.add(h.start)
            torch.mul(gk, conj, out=_by_group(dk_c[:, h], g0, g1))
            dv[:, h] = gv
        else:
            _by_group(dk_c[:, h], g0, g1).addcmul_(gk, conj)
            dv[:, h] += gv
    for h in head_chunks(H, qp.device.type):  # back from pair order, in place
        _pair_order(dk[:, h].clone(), dk[:, h], inverse=True)
        _pair_order(dq[:, h].clone(), dq[:, h], inverse=True)
    return dq, dk.to(dtypes[1]), dv.to(dtypes[2])
