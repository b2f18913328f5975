"""The fused attention kernels that ``F.scaled_dot_product_attention`` dispatches to, called directly.

The camera encodings and URoPE wrap their attention in custom autograd functions that keep, for
backward, only what a plain RoPE layer keeps (q', k', v, the output and the per-row log-sum-exp)
and recompute the rest (``camera.py``, ``urope_fused.py``). For that they need the forward and backward
of the fused kernel as separate calls, which SDPA does not expose: ``fused_kernel(q, k, v, ...)``
picks the kernel SDPA would pick for these inputs (``torch._fused_sdp_choice``, which honours
``torch.nn.attention.sdpa_kernel``) and returns its forward/backward pair, or None where there is no
such pair (the math backend, attention dropout, other devices); the callers then run the plain
transform - SDPA - transform path.

* CPU: ``aten._scaled_dot_product_flash_attention_for_cpu`` and its ``_backward``;
* CUDA: FlashAttention (``aten._scaled_dot_product_flash_attention`` / ``_backward``) or the
  memory-efficient kernel (``aten._scaled_dot_product_efficient_attention`` / ``_backward``); where
  SDPA would pick cuDNN attention, FlashAttention (or the memory-efficient kernel) instead.

Hand-written because PyTorch has no public API for a fused attention backward with caller-chosen
saved tensors. Tensors are (B, heads, L, head_dim); every kernel here uses the default scale
1/sqrt(head_dim), no mask, no dropout. Imports nothing of depthpe.
"""

from __future__ import annotations

import contextlib

import torch

__all__ = ["FusedKernel", "fused_kernel"]

_aten = torch.ops.aten
_FLASH, _EFFICIENT, _CUDNN = 1, 2, 3  # torch.nn.attention.SDPBackend values of torch._fused_sdp_choice


class FusedKernel:
    """Forward/backward pair of one fused attention kernel (see module docstring).

    ``forward(q, k, v) -> (out, state)``: out (B, h, Lq, dv) and a tuple of tensors/ints the
    backward needs besides q, k, v and out (the log-sum-exp, rng state); ``backward(g, q, k, v,
    out, state) -> (dq, dk, dv)`` for the upstream gradient g of out. ``name``: ``cpu_flash``,
    ``cuda_flash`` or ``cuda_efficient``.
    """

    def __init__(self, name: str):
        self.name = name

    def forward(self, q, k, v):
        if self.name == "cpu_flash":
            out, lse = _aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False)
            return out, (lse,)
        if self.name == "cuda_flash":
            out, lse, cum_q, cum_k, max_q, max_k, rng, unused, _ = _aten._scaled_dot_product_flash_attention(
                q, k, v, 0.0, False, False)
            return out, (lse, cum_q, cum_k, max_q, max_k, rng, unused)
        out, lse, seed, offset = _aten._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, False)
        return out, (lse, seed, offset)

    def backward(self, g, q, k, v, out, state):
        if self.name == "cpu_flash":
            return _aten._scaled_dot_product_flash_attention_for_cpu_backward(
                g, q, k, v, out, state[0], 0.0, False)
        if self.name == "cuda_flash":
            lse, cum_q, cum_k, max_q, max_k, rng, unused = state
            return _aten._scaled_dot_product_flash_attention_backward(
                g, q, k, v, out, lse, cum_q, cum_k, max_q, max_k, 0.0, False, rng, unused)
        lse, seed, offset = state
        dq, dk, dv, _ = _aten._scaled_dot_product_efficient_attention_backward(
            g, q, k, v, None, out, lse, seed, offset, 0.0, [True, True, True, False], False)
        return dq, dk, dv


def fused_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, dropout_p: float = 0.0,
                 dtype: torch.dtype | None = None) -> FusedKernel | None:
    """The fused kernel SDPA would run for q, k, v (B, heads, L, head_dim) cast to ``dtype`` (None:
    their own), or None where the caller must use plain SDPA: dropout, the math backend, devices
    other than CPU and CUDA, or a choice this module does not know (e.g. cuDNN attention)."""
    if dropout_p != 0.0 or q.device.type not in ("cpu", "cuda") or q.shape[-1] != v.shape[-1]:
        return None
    dtype = dtype or q.dtype
    choice = _sdpa_choice(q, k, v, dtype)
    if q.device.type == "cpu":
        return FusedKernel("cpu_flash") if choice == _FLASH else None
    if choice == _CUDNN:
        choice = _instead_of_cudnn(dtype, q.shape[-1])
    return {_FLASH: FusedKernel("cuda_flash"), _EFFICIENT: FusedKernel("cuda_efficient")}.get(choice)


def _sdpa_choice(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dtype: torch.dtype) -> int:
    """``torch._fused_sdp_choice`` for q, k, v in ``dtype`` (it reads shapes, dtypes and devices only).

    Fake tensors (``depthpe bench memory``'s shape-only runs) are asked with real probes on CPU; on a
    fake CUDA device nothing can be asked, so the answer is cuDNN attention, which ``fused_kernel``
    replaces by FlashAttention or the memory-efficient kernel exactly as on a GPU that picks it.
    """
    from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

    fake = isinstance(q, FakeTensor)
    if fake and q.device.type != "cpu":
        return _CUDNN
    with unset_fake_temporarily() if fake else contextlib.nullcontext():
        probe = [torch.empty((1, 1, 1, x.shape[-1]), dtype=dtype, device=x.device).expand(*x.shape[:-1], -1)
                 for x in (q, k, v)]
        return int(torch._fused_sdp_choice(*probe, None, 0.0, False))


def _instead_of_cudnn(dtype: torch.dtype, head_dim: int) -> int | None:
    """The kernel used where SDPA picks cuDNN attention (PyTorch 2.11 does for bfloat16 on an H200,
    docs/speed.md), whose forward and backward this module does not call: FlashAttention where it is
    enabled and takes the inputs (fp16/bf16, head dim a multiple of 8 up to 256), else the
    memory-efficient kernel where enabled, else None (plain SDPA)."""
    if (dtype in (torch.float16, torch.bfloat16) and head_dim % 8 == 0 and head_dim <= 256
            and torch.backends.cuda.flash_sdp_enabled()):
        return _FLASH
    return _EFFICIENT if torch.backends.cuda.mem_efficient_sdp_enabled() else None
