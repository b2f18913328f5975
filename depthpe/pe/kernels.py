"""The fused attention kernels that ``F.scaled_dot_product_attention`` dispatches to, called directly.

The camera encodings and URoPE wrap their attention in a custom autograd function (compiled: custom
operators) that keeps, for backward, only what a plain RoPE layer keeps (q', k', v, the output and
the per-row log-sum-exp) and recomputes the rest (``fused.py``, ``camera.py``, ``urope_fused.py``). For that they need the forward and backward
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

import torch

__all__ = ["FusedKernel", "fused_kernel"]

_aten = torch.ops.aten
_FLASH, _EFFICIENT, _CUDNN = 1, 2, 3  # torch.nn.attention.SDPBackend values of torch._fused_sdp_choice


class FusedKernel:
    """Forward/backward pair of one fused attention kernel (see module docstring).

    ``forward(q, k, v) -> (out, state)``: out (B, h, Lq, dv) and a tuple of ``state_size`` tensors
    the backward needs besides q, k, v and out (the log-sum-exp, rng state); ``backward(g, q, k, v,
    out, state) -> (dq, dk, dv)`` for the upstream gradient g of out. ``name``: ``cpu_flash``,
    ``cuda_flash`` or ``cuda_efficient``. States hold tensors only, so that a caller can save them
    with ``save_for_backward`` or return them from a custom operator (``depthpe.pe.fused``).
    """

    STATE_SIZES = {"cpu_flash": 1, "cuda_flash": 3, "cuda_efficient": 3}

    def __init__(self, name: str):
        if name not in self.STATE_SIZES:
            raise ValueError(f"unknown fused kernel {name!r}; known: {sorted(self.STATE_SIZES)}")
        self.name = name

    @property
    def state_size(self) -> int:
        """The number of tensors in one call's state."""
        return self.STATE_SIZES[self.name]

    def group(self, tensors) -> list[tuple]:
        """A flat sequence of the states of several calls, back to one tuple per call."""
        n = self.state_size
        return [tuple(tensors[i:i + n]) for i in range(0, len(tensors), n)]

    def forward(self, q, k, v):
        if self.name == "cpu_flash":
            out, lse = _aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False)
            return out, (lse,)
        if self.name == "cuda_flash":
            # cum_q, cum_k (undefined for dense inputs) and max_q, max_k (the sequence lengths)
            # are rebuilt in backward, so that the state holds tensors only
            out, lse, _, _, _, _, rng, unused, _ = _aten._scaled_dot_product_flash_attention(
                q, k, v, 0.0, False, False)
            return out, (lse, rng, unused)
        out, lse, seed, offset = _aten._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, False)
        return out, (lse, seed, offset)

    def backward(self, g, q, k, v, out, state):
        if self.name == "cpu_flash":
            return _aten._scaled_dot_product_flash_attention_for_cpu_backward(
                g, q, k, v, out, state[0], 0.0, False)
        if self.name == "cuda_flash":
            lse, rng, unused = state
            return _aten._scaled_dot_product_flash_attention_backward(
                g, q, k, v, out, lse, None, None, q.shape[2], k.shape[2], 0.0, False, rng, unused)
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
    from torch._subclasses.fake_tensor import FakeTensor

    if isinstance(q, FakeTensor) and q.device.type != "cpu":
        return _CUDNN
    return _choice_for(_probe_shapes(q, k, v), dtype, str(q.device))


def _probe_shapes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple:
    """The shapes ``_choice_for`` probes: those of q, k, v in eager code; under ``torch.compile``
    one token of one head of one batch per tensor, with their head dims.

    A compiled training run whose views or aspect change per batch gets dynamic batch and sequence
    sizes, which cannot be a trace-time constant (dynamo would break the graph). The choice reads
    them only to reject zero-length or mismatched inputs, which the attention call rejects anyway;
    head dims, dtype and device decide it. (Head dims are static: every model here has a fixed
    head dim, and ``torch.compile(dynamic=True)``, which makes them symbolic too, still breaks.)"""
    if torch.compiler.is_compiling():
        return tuple((1, 1, 1, x.shape[-1]) for x in (q, k, v))
    return tuple(tuple(int(n) for n in x.shape) for x in (q, k, v))


@torch.compiler.assume_constant_result
def _choice_for(shapes: tuple, dtype: torch.dtype, device: str) -> int:
    """``torch._fused_sdp_choice`` on probes of ``shapes`` (q, k, v) in ``dtype`` on ``device``.

    Takes no tensors, so ``torch.compile`` runs it once while tracing and keeps the answer as a
    constant (the choice reads shapes, dtypes and the enabled backends only) instead of breaking
    the graph on an op that returns an int.
    """
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        probe = [torch.empty((1, 1, 1, s[-1]), dtype=dtype, device=device).expand(*s[:-1], -1)
                 for s in shapes]
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
