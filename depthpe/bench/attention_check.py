"""``depthpe bench attention --check-fused``: the fused attention functions against the plain path.

The camera encodings and URoPE run their attention through custom autograd functions around the
fused kernel SDPA would pick (``depthpe.pe.kernels``; a different kernel per device and dtype:
CPU flash, CUDA FlashAttention in bfloat16/float16, CUDA memory-efficient attention in float32).
This check runs, per method, one forward and backward through that function and through the plain
path (``enc.fused = False``: transform - SDPA - transform, or URoPE's hooks path) on the same
inputs and upstream gradient, and reports the relative error ``max|a - b| / max|b|`` of the output
and of dq, dk, dv. The two paths round differently (the fused backward recomputes v' and the
pre-transform output from the saved tensors), so the tolerance follows the dtype (``TOLERANCE``).
It is how the CUDA kernels' calls are checked on a GPU machine (``depthpe bench gpu-check`` runs it);
the unit tests check the CPU kernel the same way.
"""

from __future__ import annotations

import torch

from ..pe.camera import attention_dtype
from ..pe.kernels import fused_kernel

TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-4, torch.bfloat16: 5e-2, torch.float16: 1e-2}


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| / max |b| in float64 (unitless); 0 where both are all zero."""
    a, b = a.double(), b.double()
    scale = float(b.abs().max())
    return float((a - b).abs().max()) / scale if scale else float((a - b).abs().max())


def _forward_backward(enc, qkv, grad, fused: bool) -> list[torch.Tensor]:
    """[output, dq, dk, dv] of one pass of ``enc.attend`` with ``enc.fused`` set to ``fused``."""
    inputs = [x.detach().clone().requires_grad_() for x in qkv]
    before, enc.fused = enc.fused, fused
    try:
        out = enc.attend(*inputs)
        grads = torch.autograd.grad(out, inputs, grad.to(out.dtype))
    finally:
        enc.fused = before
    return [out.detach(), *grads]


def check_methods(setup, methods) -> dict:
    """Per method: ``kernel`` (the fused kernel's name, or ``"none"`` where the method has no fused
    function or no kernel was picked), ``errors`` {out, dq, dk, dv}, ``tolerance`` and ``ok``."""
    q, k, v = setup.qkv
    kernel = fused_kernel(q, k, v, dtype=attention_dtype(q))
    tol = TOLERANCE[setup.dtype]
    results = {}
    for method in methods:
        enc = setup.prepare(method)
        if not hasattr(enc, "fused"):
            results[method] = {"kernel": "none", "errors": {}, "tolerance": tol, "ok": True}
            continue
        fused = _forward_backward(enc, setup.qkv, setup.grad, True)
        plain = _forward_backward(enc, setup.qkv, setup.grad, False)
        errors = {name: relative_error(a, b) for name, a, b in zip(("out", "dq", "dk", "dv"), fused, plain)}
        results[method] = {"kernel": kernel.name if kernel else "none", "errors": errors, "tolerance": tol,
                           "ok": all(e <= tol for e in errors.values())}
    return results


def format_check(results: dict) -> str:
    """The check as a markdown table, one row per method."""
    lines = ["| method | kernel | out | dq | dk | dv | tolerance | result |", "|---|---|---|---|---|---|---|---|"]
    for method, r in results.items():
        errs = [f"{r['errors'][n]:.1e}" if n in r["errors"] else "-" for n in ("out", "dq", "dk", "dv")]
        verdict = ("ok" if r["ok"] else "FAILED") if r["errors"] else "no fused function"
        lines.append(f"| {method} | {r['kernel']} | " + " | ".join(errs) + f" | {r['tolerance']:.0e} | {verdict} |")
    return "\n".join(lines)
