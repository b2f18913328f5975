"""The fused attention of the camera encodings and URoPE, as one autograd function and, for
``torch.compile``, as two custom operators.

An encoding with a fused attention (``camera.CameraBlockEncoding``, ``urope.URoPE``) provides

* ``fused_forward(q, k, v, kernel, dtype) -> (out, saved, states)``: the attention output, the four
  tensors its backward needs (q', k', v, out: what a RoPE layer keeps) and one state tuple per
  kernel call (``kernels.FusedKernel``);
* ``fused_backward(grad, saved, states, kernel, dtypes) -> (dq, dk, dv)``;
* ``flat() -> (kind, tensors, sizes, spec)``: the encoding as tensors, its sizes (ints: views,
  tokens, grid; symbolic where ``torch.compile`` made them dynamic) and a JSON string of the rest
  (static values only), from which the function registered for ``kind`` (``register``) rebuilds it.

``attend(q, k, v, enc, kernel, dtype)`` runs it. In eager code that is ``FusedAttention``, an
``autograd.Function`` that saves exactly ``saved`` and the kernel states. Under ``torch.compile`` an
autograd function is traced into the joint forward-backward graph and inductor's partitioner chooses
again what to keep (measured: 2.3 x RoPE's layer memory, more than the plain path), so compiled code
calls the custom operators ``depthpe::fused_attention`` and ``depthpe::fused_attention_backward``
instead: opaque to the compiler, they keep what ``setup_context`` saves. Both run the same
``fused_forward`` / ``fused_backward``; the operators' fake (shape) implementations are those same
functions on fake tensors.

Imports nothing of depthpe but ``kernels``: the encodings register themselves here.
"""

from __future__ import annotations

import json
from typing import Callable

import torch
from torch import Tensor

from .kernels import FusedKernel

__all__ = ["FusedAttention", "as_size", "attend", "register", "spec_string"]

_REBUILD: dict[str, Callable[[list[Tensor], list[int], str], object]] = {}


def register(kind: str, rebuild: Callable[[list[Tensor], list[int], str], object]) -> None:
    """Make ``rebuild(tensors, sizes, spec) -> encoding`` the way the operators rebuild an encoding
    whose ``flat()`` names ``kind``."""
    _REBUILD[kind] = rebuild


def as_size(n) -> int:
    """``n`` (an int-like size: views, tokens, batch) as an int; a ``torch.SymInt`` as it is.

    ``int()`` of a symbolic size would specialize it (the operators' fake runs see the sizes of
    ``flat`` as SymInts when ``torch.compile`` made them dynamic) and recompile at every new size."""
    return n if isinstance(n, torch.SymInt) else int(n)


@torch.compiler.assume_constant_result
def spec_string(spec: dict) -> str:
    """``spec`` (plain Python values) as the JSON string of ``flat()``. Dynamo cannot trace
    ``json.dumps``; the decorator makes it run the call while tracing and keep the string."""
    return json.dumps(spec)


def attend(q: Tensor, k: Tensor, v: Tensor, enc, kernel: FusedKernel, dtype: torch.dtype) -> Tensor:
    """The fused attention of ``enc``: q, k, v (B, heads, N, head_dim) -> (B, heads, N, head_dim) in
    ``dtype`` (the attention dtype; gradients in the dtypes of q, k, v). Call with autocast off."""
    if not torch.compiler.is_compiling():
        return FusedAttention.apply(q, k, v, enc, kernel, dtype)
    kind, tensors, sizes, spec = enc.flat()
    return torch.ops.depthpe.fused_attention(q, k, v, tensors, sizes, kind, spec, kernel.name, dtype)[0]


class FusedAttention(torch.autograd.Function):
    """``enc.fused_forward`` with ``enc.fused_backward`` as its backward; keeps for backward the four
    tensors ``saved`` (q', k', v, output) and the kernel states, nothing else.

    forward(q, k, v (B, H, N, d), enc, kernel: ``FusedKernel``, dtype) -> (B, H, N, d) in ``dtype``.
    """

    @staticmethod
    def forward(ctx, q, k, v, enc, kernel: FusedKernel, dtype):
        out, saved, states = enc.fused_forward(q, k, v, kernel, dtype)
        ctx.save_for_backward(*saved, *(t for state in states for t in state))
        ctx.enc, ctx.kernel, ctx.dtypes = enc, kernel, (q.dtype, k.dtype, v.dtype)
        return out

    @staticmethod
    def backward(ctx, grad):
        tensors = ctx.saved_tensors
        grads = ctx.enc.fused_backward(grad, tensors[:4], ctx.kernel.group(tensors[4:]), ctx.kernel, ctx.dtypes)
        return (*grads, None, None, None)


# ----------------------------------------------------------------------------- custom operators
def _forward(q: Tensor, k: Tensor, v: Tensor, tensors: list[Tensor], sizes: list[int], kind: str, spec: str,
             kernel: str, dtype: torch.dtype) -> tuple[Tensor, Tensor, Tensor, list[Tensor]]:
    """(output, q', k', the kernel states flattened) of ``fused_forward`` on the rebuilt encoding."""
    enc = _REBUILD[kind](tensors, sizes, spec)
    out, (qt, kt, _, _), states = enc.fused_forward(q, k, v, FusedKernel(kernel), dtype)
    return out, qt, kt, [t for state in states for t in state]


def _backward(grad: Tensor, qt: Tensor, kt: Tensor, v: Tensor, out: Tensor, states: list[Tensor],
              tensors: list[Tensor], sizes: list[int], kind: str, spec: str, kernel: str,
              dq_dtype: torch.dtype, dk_dtype: torch.dtype, dv_dtype: torch.dtype) -> tuple[Tensor, Tensor, Tensor]:
    """(dq, dk, dv) of ``fused_backward`` on the rebuilt encoding."""
    enc, fk = _REBUILD[kind](tensors, sizes, spec), FusedKernel(kernel)
    dq, dk, dv = enc.fused_backward(grad, (qt, kt, v, out), fk.group(states), fk, (dq_dtype, dk_dtype, dv_dtype))
    return dq, dk, dv


_forward_op = torch.library.custom_op("depthpe::fused_attention", _forward, mutates_args=())
_forward_op.register_fake(_forward)
_backward_op = torch.library.custom_op("depthpe::fused_attention_backward", _backward, mutates_args=())
_backward_op.register_fake(_backward)


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, tensors, sizes, kind, spec, kernel, _ = inputs
    out, qt, kt, states = output
    ctx.save_for_backward(qt, kt, v, out, *states, *tensors)
    ctx.args = (len(states), len(tensors), sizes, kind, spec, kernel, q.dtype, k.dtype, v.dtype)
    ctx.mark_non_differentiable(qt, kt, *states)


def _op_backward(ctx, grad, *unused):
    n, n_tensors, sizes, kind, spec, kernel, *dtypes = ctx.args
    qt, kt, v, out, *rest = ctx.saved_tensors
    dq, dk, dv = torch.ops.depthpe.fused_attention_backward(
        grad, qt, kt, v, out, rest[:n], rest[n:], sizes, kind, spec, kernel, *dtypes)
    return dq, dk, dv, [None] * n_tensors, None, None, None, None, None  # the encoding's tensors get none


_forward_op.register_autograd(_op_backward, setup_context=_setup_context)
