"""Shared machinery of the camera encodings (PRoPE, DPPE-dual, DPPE-tAdd, GTA, every {qk, vo} pair).

All of them follow the "transform - SDPA - transform" pattern (docs/encodings.md):
the head dim d is split into a camera block ``[0, d/2)`` and a RoPE block ``[d/2, d)``, and each of
q, k, v and the attention output o gets a per-view map on the camera block and a 2D rotation on the
RoPE block. The attention itself is one unmodified ``F.scaled_dot_product_attention`` call.

Layouts (those of the official PRoPE / DPPE code):

* camera block ``[0, d/2)``: contiguous 4-chunks ``[4m, 4m+4)`` each multiplied, as a column vector,
  by the view's 4x4 matrix (``TiledMatrix``); DPPE-tAdd's v/o instead use contiguous 6-chunks
  ``[r0 r1 r2 | s0 s1 s2]`` (``RotTransSplit``), the trailing ``(d/2) % 6`` channels passing through.
* RoPE block: ``[d/2, 3d/4)`` rotated by the token's x position, ``[3d/4, d)`` by its y position.
  Inside each quarter of width w = d/4 the pairing is split-half (c, c + w/2), frequencies
  ``base ** (-m / (w/2))``, m = 0..w/2-1, base 100. The *forward* map (q, k, v) is a rotation by
  **-theta**: (a, b) -> (a cos + b sin, b cos - a sin); o gets the inverse (+theta).
* other layouts of the pairs (``depthpe.pe.spec.transform_layout``): ``p`` / ``Rt`` put
  4-chunks on the whole head, ``2d`` puts the RoPE on the whole head ([x: d/2 | y: d/2]),
  ``vggt2d`` is VGGT's RoPE (``VggtRope``).
* positions: special tokens (0, 0); patch (x, y) at (x + patch_offset, y + patch_offset). The official
  code uses ``patch_offset = 0``; the depthpe model uses 1 (VGGT).

Precision: camera matrices are built in float64 from the cameras (closed-form inverses, no
``torch.linalg.inv``) and applied in float64 when the activations are float64, otherwise in float32,
with autocast disabled; the result is cast back to the input dtype (bf16 kernels get bf16 inputs
exactly as DPPE does before FlashAttention).
"""

from __future__ import annotations

import json
import warnings

import torch

from ..geometry import invert_intrinsics, invert_w2c, normalize_intrinsics, to_4x4
from .base import Encoding
from . import fused
from .kernels import FusedKernel, fused_kernel
from .rope import apply_rope_2d
from .spec import head_dim_multiple, transform_layout

__all__ = [
    "lift_intrinsics",
    "memoized",
    "camera_tensors",
    "validate_cameras",
    "projection_matrices",
    "TiledMatrix",
    "RotTransSplit",
    "PropeRope",
    "VggtRope",
    "CameraBlockEncoding",
    "work_dtype",
    "attention_dtype",
    "head_chunks",
    "use_fused",
    "check_head_dim",
]


def work_dtype(dtype: torch.dtype) -> torch.dtype:
    """Dtype the transforms run in for activations of ``dtype``: float64 stays, all else float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def attention_dtype(q: torch.Tensor) -> torch.dtype:
    """The dtype SDPA computes in for ``q``: autocast's lower precision when autocast is on for q's
    device (it would cast q, k and v to it), else q's own dtype."""
    if torch.is_autocast_enabled(q.device.type):
        return torch.get_autocast_dtype(q.device.type)
    return q.dtype


HEAD_CHUNKS = {"cpu": 8, "cuda": 8}  # head slices the fused attention functions work on, per device type
FUSED_BY_DEFAULT = {"cpu": True}  # device types whose attention runs the fused functions unless told otherwise


def head_chunks(heads: int, device_type: str = "cpu") -> list[slice]:
    """Slices of the head dim, ``heads // HEAD_CHUNKS[device_type]`` heads each (at least 1): the
    fused attention functions transform, attend and differentiate one slice at a time, so that their
    temporaries (v', the pre-transform output, its gradient, the kernel's gradients) are 1/8 of a
    tensor, not a tensor (with one slice their float32 temporaries cost more than they save)."""
    size = max(1, heads // HEAD_CHUNKS.get(device_type, 8))
    return [slice(h, min(h + size, heads)) for h in range(0, heads, size)]


def use_fused(fused: bool | None, device_type: str) -> bool:
    """Whether an encoding's attention runs its fused function: ``fused`` (``pe_options.
    fused_attention`` on/off), or with None (auto) the device's default, ``FUSED_BY_DEFAULT``: on
    CPU, where it keeps RoPE's memory at RoPE's speed; not on CUDA, where the transforms around the
    kernel, written in PyTorch, cost launches: measured on an H200 (docs/speed.md), the fused path
    keeps RoPE's memory at 2-6x its time, the plain path takes 1.1x the time and 1.5x the memory."""
    return FUSED_BY_DEFAULT.get(device_type, False) if fused is None else bool(fused)


def lift_intrinsics(K: torch.Tensor) -> torch.Tensor:
    """(..., 3, 3) -> (..., 4, 4) ``[[K, 0], [0, 1]]`` in K's own dtype and device."""
    out = torch.zeros(*K.shape[:-2], 4, 4, dtype=K.dtype, device=K.device)
    out[..., :3, :3] = K
    out[..., 3, 3] = 1
    return out


def camera_tensors(
    K: torch.Tensor | None,
    w2c: torch.Tensor | None,
    num_views: int,
    *,
    method: str,
    need_K: bool = True,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Shape checks and float64 copies of the cameras, without looking at their values.

    K: (B, S, 3, 3) pixel intrinsics or None; w2c: (B, S, 3|4, 4) OpenCV world-to-camera.
    Returns ``(K (B,S,3,3) float64 or None, w2c (B,S,4,4) float64)``, detached. Raises
    ``ValueError`` for missing cameras or wrong shapes (static checks only: no host-device sync, so
    ``prepare_encoding`` stays traceable by ``torch.compile``). The values are checked by
    ``validate_cameras`` where data enters (``DepthModel.check_inputs``, ``check_encoding_cameras``).
    """
    if w2c is None or (need_K and K is None):
        raise ValueError(
            f"encoding {method!r} needs cameras: pass K=(B, S, 3, 3) pixel intrinsics and "
            "w2c=(B, S, 3|4, 4) world-to-camera extrinsics"
        )
    if w2c.ndim != 4 or w2c.shape[-1] != 4 or w2c.shape[-2] not in (3, 4):
        raise ValueError(f"w2c must have shape (B, S, 3, 4) or (B, S, 4, 4), got {tuple(w2c.shape)}")
    if w2c.shape[1] != num_views:
        raise ValueError(f"w2c has {w2c.shape[1]} views but num_views={num_views}")
    w2c64 = to_4x4(w2c.detach().to(torch.float64))
    K64 = None
    if K is not None:
        if K.ndim != 4 or K.shape[-2:] != (3, 3) or K.shape[:2] != w2c.shape[:2]:
            raise ValueError(
                f"K must have shape (B, S, 3, 3) matching w2c {tuple(w2c.shape[:2])}, got {tuple(K.shape)}"
            )
        K64 = K.detach().to(torch.float64)
    return K64, w2c64


def validate_cameras(
    K: torch.Tensor | None,
    w2c: torch.Tensor | None,
    num_views: int,
    *,
    method: str,
    need_K: bool = True,
    max_translation: float | None = 10.0,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Check camera inputs and return ``(K (B,S,3,3) float64 or None, w2c (B,S,4,4) float64)``.

    K: (B, S, 3, 3) pixel intrinsics (zero skew, positive focal lengths); w2c: (B, S, 3|4, 4) OpenCV
    world-to-camera. Raises ``ValueError`` naming the problem. Warns when a translation is longer
    than ``max_translation`` (camera encodings are not scale-invariant and lose precision in bf16
    for large translations: normalize the scene first, docs/conventions.md).
    Reads the values (one host-device sync): call it where data enters, not inside ``forward``.
    """
    K64, w2c64 = camera_tensors(K, w2c, num_views, method=method, need_K=need_K)
    checks = [torch.isfinite(w2c64).all()]
    if K64 is not None:
        checks += [torch.isfinite(K64).all(), ((K64[..., 0, 0] > 0) & (K64[..., 1, 1] > 0)).all()]
    values = [w2c64[..., :3, 3].norm(dim=-1).max()] + [c.to(torch.float64) for c in checks]
    tmax, *flags = torch.stack(values).tolist()
    for ok, message in zip(flags, ("w2c contains NaN or inf values", "K contains NaN or inf values",
                                   "K has a non-positive focal length (fx or fy <= 0)")):
        if not ok:
            raise ValueError(message)
    if max_translation is not None and tmax > max_translation:
        warnings.warn(
            f"{method}: a camera translation has norm {tmax:.3g} > {max_translation}; camera "
            "encodings are not scale-invariant and lose precision for large translations. "
            "Normalize the scene (depthpe.geometry.normalize_scene) before the model.",
            stacklevel=3,
        )
    return K64, w2c64


def projection_matrices(
    K: torch.Tensor, w2c: torch.Tensor, image_size: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """PRoPE projection matrices and their closed-form inverses.

    K: (..., 3, 3) pixel intrinsics; w2c: (..., 4, 4); image_size (H, W). Returns
    ``P = lift(K_bar) @ w2c`` and ``P^-1 = w2c^-1 @ lift(K_bar^-1)`` (..., 4, 4) with ``K_bar`` the
    normalized intrinsics of ``geometry.normalize_intrinsics``.
    """
    Kbar = normalize_intrinsics(K, image_size)
    P = lift_intrinsics(Kbar) @ w2c
    P_inv = invert_w2c(w2c) @ lift_intrinsics(invert_intrinsics(Kbar))
    return P, P_inv


def memoized(cache: dict, key, compute):
    """``compute()``, stored in ``cache[key]`` and reused in eager mode.

    Under ``torch.compile`` the value is computed inline instead: a write to a Python dict inside a
    checkpointed block or an ``autograd.Function`` is a side effect Dynamo cannot trace (a graph
    break), and the compiled graph computes these small constant tables once anyway. Nor is the cache
    read or written under a ``FakeTensorMode`` (``depthpe bench memory``'s shape-only run, the
    compiler's runs of ``depthpe.pe.fused``'s operators): a fake tensor in a cache shared across
    models (e.g. the DPT head's) would make every later real forward with the same key return fake
    tensors, and a real one mixed into fake operations is refused.
    """
    if torch.compiler.is_compiling() or torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE):
        return compute()
    if key not in cache:
        cache[key] = compute()
    return cache[key]


class _Cached:
    """Holds float64 tensors and hands out copies in a work dtype/device (``memoized``)."""

    def __init__(self, **tensors: torch.Tensor):
        self._master = tensors
        self._cache: dict = {}

    def get(self, name: str, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return memoized(self._cache, (name, dtype, device),
                        lambda: self._master[name].to(device=device, dtype=dtype))


class TiledMatrix(_Cached):
    """Camera-block map: every contiguous 4-chunk of a token multiplied by its view's 4x4 matrix.

    matrix: (B, S, 4, 4). ``apply(x, out)`` with x, out (B, H, S, T, c), c % 4 == 0, writes
    ``out[..., 4m:4m+4] = matrix[b, s] @ x[..., 4m:4m+4]`` (``adjoint=True``: ``matrix^T``).
    """

    NUM_TENSORS = 1  # of ``flat``

    def __init__(self, matrix: torch.Tensor):
        super().__init__(M_T=matrix.transpose(-1, -2).contiguous(), M=matrix.contiguous())

    def flat(self) -> list[torch.Tensor]:
        """The constructor's tensors (``CameraBlockEncoding.flat``)."""
        return [self._master["M"]]

    def apply(self, x: torch.Tensor, out: torch.Tensor, adjoint: bool = False) -> None:
        B, H, S, T, c = x.shape
        M = self.get("M" if adjoint else "M_T", x.dtype, x.device)  # right factor, (B, S, 4, 4)
        y = torch.matmul(x.reshape(B, H, S, T * c // 4, 4), M.unsqueeze(1))
        out.copy_(y.view(B, H, S, T, c))


class RotTransSplit(_Cached):
    """DPPE-tAdd camera-block map on contiguous 6-chunks ``[r0 r1 r2 | s0 s1 s2]``.

    rot: (B, S, 3, 3), trans: (B, S, 3). ``r <- rot @ r``, ``s <- s + trans``; the trailing
    ``c % 6`` channels pass through unchanged. ``apply(x, out)``: x, out (B, H, S, T, c).
    ``adjoint=True`` applies the adjoint of the linear part (``rot^T``, no translation), which is
    what backward needs.
    """

    NUM_TENSORS = 2  # of ``flat``

    def __init__(self, rot: torch.Tensor, trans: torch.Tensor):
        super().__init__(R_T=rot.transpose(-1, -2).contiguous(), R=rot.contiguous(),
                         t=trans.contiguous())

    def flat(self) -> list[torch.Tensor]:
        """The constructor's tensors (``CameraBlockEncoding.flat``)."""
        return [self._master["R"], self._master["t"]]

    def apply(self, x: torch.Tensor, out: torch.Tensor, adjoint: bool = False) -> None:
        B, H, S, T, c = x.shape
        n6 = c // 6
        R = self.get("R" if adjoint else "R_T", x.dtype, x.device)  # right factor, (B, S, 3, 3)
        chunks = x[..., : 6 * n6].unflatten(-1, (n6, 6))
        out6 = out[..., : 6 * n6].unflatten(-1, (n6, 6))
        r = torch.matmul(chunks[..., :3].reshape(B, H, S, T * n6, 3), R.unsqueeze(1))
        out6[..., :3].copy_(r.view(B, H, S, T, n6, 3))
        if adjoint:
            out6[..., 3:].copy_(chunks[..., 3:])
        else:
            t = self.get("t", x.dtype, x.device)[:, None, :, None, None, :]
            out6[..., 3:].copy_(chunks[..., 3:] + t)  # not add(out=): a strided out= breaks Dynamo graphs
        if 6 * n6 < c:
            out[..., 6 * n6 :].copy_(x[..., 6 * n6 :])


def _patch_positions(grid, num_special, patch_offset, dtype=torch.float64):
    """(T,) x and (T,) y positions of one view's tokens (special tokens first at 0, x fastest)."""
    h, w = grid
    yy, xx = torch.meshgrid(torch.arange(h, dtype=dtype), torch.arange(w, dtype=dtype), indexing="ij")
    zeros = torch.zeros(num_special, dtype=dtype)
    px = torch.cat([zeros, xx.reshape(-1) + patch_offset])
    py = torch.cat([zeros, yy.reshape(-1) + patch_offset])
    return px, py


class PropeRope:
    """PRoPE's 2D RoPE on a block of width d/2: ``[x: d/4 | y: d/4]``, split-half pairs, -theta.

    Positions are per view-token (T,) and shared by all views. ``apply(x, inverse)``: x
    (B, H, S, T, d/2) -> same shape; forward rotates by -theta, ``inverse=True`` by +theta.
    """

    def __init__(self, grid, num_special: int, patch_offset: int, base: float = 100.0):
        self.grid, self.args = tuple(grid), (int(num_special), int(patch_offset), float(base))
        self.px, self.py = _patch_positions(grid, num_special, patch_offset)
        self.base = float(base)
        self._cache: dict = {}

    def tables(self, width: int, dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
        """Full-width tables (T, width): ``C`` = cos at every channel, ``Sn`` = +sin on the first
        channel of each pair and -sin on the second, so that the forward map is
        ``x * C + swap(x) * Sn`` with swap exchanging the two halves of each quarter."""
        return memoized(self._cache, (width, dtype, device), lambda: self._tables(width, dtype, device))

    def _tables(self, width: int, dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
        nf = width // 4
        freqs = self.base ** (-torch.arange(nf, dtype=torch.float64) / nf)
        ang = torch.stack([self.px, self.py], dim=-1)[..., None] * freqs  # (T, axis, nf)
        cos, sin = ang.cos().unsqueeze(-2), ang.sin().unsqueeze(-2)  # (T, axis, 1, nf)
        C = cos.expand(-1, 2, 2, nf).reshape(-1, width)
        Sn = torch.cat([sin, -sin], dim=-2).reshape(-1, width)
        return C.to(device, dtype), Sn.to(device, dtype)

    def apply(self, x: torch.Tensor, out: torch.Tensor, inverse: bool = False) -> None:
        """Write the rotated x (..., T, width) into out (same shape).

        Forward: (a, b) -> (a cos + b sin, b cos - a sin); inverse: the transpose.
        """
        width = x.shape[-1]
        C, Sn = self.tables(width, x.dtype, x.device)
        xc = x.contiguous()  # strided inputs make the broadcast products slow on CPU
        swapped = xc.unflatten(-1, (2, 2, width // 4)).flip(-2).flatten(-3)
        y = xc * C
        y.addcmul_(swapped, Sn, value=-1 if inverse else 1)
        out.copy_(y)


class VggtRope:
    """VGGT's 2D RoPE as a block op (``rope.apply_rope_2d``): ``[y: w/2 | x: w/2]``, rotate-half,
    forward +theta. Positions (y, x) per view token, special tokens at 0, shared by all views.
    ``apply(x, out, inverse)``: x, out (B, H, S, T, w); ``inverse=True`` rotates by -theta."""

    def __init__(self, grid, num_special: int, patch_offset: int, base: float = 100.0):
        self.grid, self.args = tuple(grid), (int(num_special), int(patch_offset), float(base))
        px, py = _patch_positions(grid, num_special, patch_offset)
        self.pos = torch.stack([py, px], dim=-1)  # (T, 2) float64
        self.base = float(base)

    def apply(self, x: torch.Tensor, out: torch.Tensor, inverse: bool = False) -> None:
        pos = self.pos.to(device=x.device, dtype=x.dtype)
        out.copy_(apply_rope_2d(x, -pos if inverse else pos, self.base))


class _Transform(torch.autograd.Function):
    """y = A x for a per-token linear(+constant) map A; backward applies the adjoint A^T.

    Nothing is saved for backward (the maps are fixed by the cameras), and backward is one fused
    transform instead of autograd's chain of slices, products and concatenations.
    """

    @staticmethod
    def forward(ctx, x, enc, which):
        ctx.enc, ctx.which = enc, which
        return enc._apply(x, which)

    @staticmethod
    def backward(ctx, grad):
        return ctx.enc._apply(grad, ctx.which, adjoint=True), None, None


def check_head_dim(d: int, method: str, multiple: int = 8) -> None:
    """Raise ``ValueError`` unless d is a multiple of ``multiple`` (8: camera block of d/2 channels
    in 4-chunks and RoPE quarters of even width; 4: whole-head camera 4-chunks or 2D RoPE)."""
    if d % multiple:
        raise ValueError(
            f"{method} needs a head dim divisible by {multiple} (camera 4-chunks, 2D RoPE blocks of "
            f"even width), got head dim {d}"
        )


class CameraBlockEncoding(Encoding):
    """Generic per-tensor encoding: each of q, k, v, o gets its transform's segments.

    ``transforms``: {"q", "k", "v", "o"} -> transform name (``spec.transform_layout`` gives
    its segments); ``ops``: the same keys -> camera op with ``apply(x, out, adjoint)`` on the
    ``cam`` segment (None where there is none); ``rotary``: {"rope": PropeRope, "vggt": VggtRope} with
    ``apply(x, out, inverse)``. q, k, v get the forward rotation, o the inverse. A tensor whose
    transform has no segments passes through unchanged. Tensors passed to ``transform_*`` are
    (B, heads, S*T, d), view-major. ``batch`` None: no camera, any batch size.
    """

    def __init__(self, *, method, num_views, tokens_per_view, batch, transforms, ops, rotary):
        self.method = method
        self.S = fused.as_size(num_views)
        self.T = fused.as_size(tokens_per_view)
        self.B = None if batch is None else fused.as_size(batch)
        self.transforms = dict(transforms)
        self.ops = dict(ops)
        self.rotary = dict(rotary)
        self.fused = None  # None: the device's default (``use_fused``); False: always the plain path

    # -- shape checks -------------------------------------------------------------------------
    def _check(self, x: torch.Tensor) -> None:
        if x.ndim != 4:
            raise ValueError(f"{self.method}: expected (B, heads, S*T, head_dim), got {tuple(x.shape)}")
        B, _, N, d = x.shape
        if N != self.S * self.T:
            raise ValueError(
                f"{self.method}: prepared for {self.S} views x {self.T} tokens = {self.S * self.T} "
                f"tokens, got {N}"
            )
        if self.B is not None and B != self.B:
            raise ValueError(f"{self.method}: prepared for batch {self.B}, got batch {B}")
        for name in set(self.transforms.values()):
            check_head_dim(d, f"{self.method} ({name})", head_dim_multiple(name))

    def _apply(self, x: torch.Tensor, which: str, adjoint: bool = False,
               out: torch.Tensor | None = None) -> torch.Tensor:
        """The map of ``which`` (or its adjoint) on x (B, H, N, d) in the work dtype, no autograd.

        Written into ``out`` (B, H, N, d), any dtype, e.g. a head slice of a larger buffer (the camera
        and RoPE segments are written in place, no split/cat copies); a new tensor when None.
        """
        B, H, N, d = x.shape
        xv = x.unflatten(2, (self.S, self.T))
        if out is None:
            out = torch.empty(B, H, N, d, dtype=x.dtype, device=x.device)
        ov = out.unflatten(2, (self.S, self.T))
        layout = transform_layout(self.transforms[which], d)
        if not layout:
            out.copy_(x)
        for lo, hi, kind in layout:
            if kind == "cam":
                self.ops[which].apply(xv[..., lo:hi], ov[..., lo:hi], adjoint=adjoint)
            else:
                self.rotary[kind].apply(xv[..., lo:hi], ov[..., lo:hi], inverse=(which == "o") != adjoint)
        return out

    def _map(self, x: torch.Tensor, which: str, *, dtype: torch.dtype, adjoint: bool = False,
             out: torch.Tensor | None = None) -> torch.Tensor:
        """``_apply`` from any dtype: x cast to the work dtype, the result in ``dtype`` (or written
        into ``out``); x itself (cast) where the transform of ``which`` is the identity."""
        if not transform_layout(self.transforms[which], x.shape[-1]):
            return x.to(dtype) if out is None else out.copy_(x)
        if out is None:
            out = torch.empty(x.shape, dtype=dtype, device=x.device)
        return self._apply(x.to(work_dtype(x.dtype)), which, adjoint=adjoint, out=out)

    def attend(self, q, k, v, *, dropout_p: float = 0.0):
        """Encoded attention, q, k, v (B, heads, S*T, head_dim) -> (B, heads, S*T, head_dim).

        With gradients, the fused function on (``use_fused``: by default on CPU) and a fused kernel
        (``kernels.fused_kernel``) it runs ``fused.attend`` (``fused_forward`` / ``fused_backward``),
        which keeps for backward what a RoPE layer keeps, compiled or not; otherwise (no gradients,
        dropout, the math backend, CUDA by default) the plain transform - SDPA - transform of
        ``Encoding.attend``.
        """
        kernel, dtype = None, attention_dtype(q)
        if use_fused(self.fused, q.device.type) and torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v)):
            for x in (q, k, v):
                self._check(x)
            kernel = fused_kernel(q, k, v, dropout_p=dropout_p, dtype=dtype)
        if kernel is None:
            return super().attend(q, k, v, dropout_p=dropout_p)
        with torch.autocast(device_type=q.device.type, enabled=False):
            return fused.attend(q, k, v, self, kernel, dtype)

    def fused_forward(self, q, k, v, kernel: FusedKernel, dtype):
        """``o = A_o SDPA(A_q q, A_k k, A_v v)`` with per-token linear maps A (per-view 4x4 / 6-chunk
        camera maps, 2D RoPE rotations; A_o may add a constant), head slice by head slice
        (``head_chunks``). q, k, v (B, H, N, d) -> (o (B, H, N, d) in ``dtype``, saved, states):
        ``saved`` = (q' = A_q q, k' = A_k k, v, o), what SDPA keeps for a RoPE layer, and the kernel
        state of each slice (``depthpe.pe.fused``)."""
        B, H, N, d = q.shape
        qt = torch.empty(B, H, N, d, dtype=dtype, device=q.device)
        kt = torch.empty_like(qt)
        out = torch.empty(B, H, N, v.shape[-1], dtype=dtype, device=q.device)
        states = []
        for h in head_chunks(H, q.device.type):
            self._map(q[:, h], "q", dtype=dtype, out=qt[:, h])
            self._map(k[:, h], "k", dtype=dtype, out=kt[:, h])
            o, state = kernel.forward(qt[:, h], kt[:, h], self._map(v[:, h], "v", dtype=dtype))
            self._map(o, "o", dtype=dtype, out=out[:, h])
            states.append(state)
        return out, (qt, kt, v, out), states

    def fused_backward(self, grad, saved, states, kernel: FusedKernel, dtypes):
        """(dq, dk, dv) in ``dtypes`` for the gradient ``grad`` of ``fused_forward``'s output: v' = A_v v
        and the pre-transform output A_o^-1 o (the v map: every vo transform maps o back with its v
        map) are recomputed per head slice, then the kernel's backward and the adjoints A^T; the
        temporaries are slices, never whole tensors."""
        qt, kt, v, out = saved
        dt = qt.dtype
        grads = [torch.empty(x.shape, dtype=t, device=x.device) for x, t in zip((qt, kt, v), dtypes)]
        for h, state in zip(head_chunks(qt.shape[1], qt.device.type), states):
            g = self._map(grad[:, h], "o", dtype=dt, adjoint=True)
            o = self._map(out[:, h], "v", dtype=dt)  # A_o^-1 o: the pre-transform output
            gq, gk, gv = kernel.backward(g, qt[:, h], kt[:, h], self._map(v[:, h], "v", dtype=dt), o, state)
            del g, o
            for gx, which, dst in zip((gq, gk, gv), "qkv", grads):
                self._map(gx, which, dtype=dst.dtype, adjoint=True, out=dst[:, h])
        return tuple(grads)

    def flat(self) -> tuple[str, list[torch.Tensor], list[int], str]:
        """("camera", the camera ops' tensors, the sizes [S, T, B (-1: None), then each rotary op's
        grid h, w], a JSON spec of the static rest): what ``from_flat`` rebuilds this encoding from,
        inside ``fused``'s custom operators. The sizes stay out of the JSON string: under
        ``torch.compile`` with dynamic shapes they are symbolic."""
        tensors, ops = [], {}
        for which, op in self.ops.items():
            if op is not None:
                ops[which] = [type(op).__name__, len(tensors)]
                tensors += op.flat()
        sizes = [self.S, self.T, -1 if self.B is None else self.B]
        for r in self.rotary.values():
            sizes += r.grid
        spec = dict(method=self.method, transforms=self.transforms, ops=ops,
                    rotary={kind: [type(r).__name__, *r.args] for kind, r in self.rotary.items()})
        return "camera", tensors, sizes, fused.spec_string(spec)

    @classmethod
    def from_flat(cls, tensors: list[torch.Tensor], sizes: list[int], spec: str) -> "CameraBlockEncoding":
        """The encoding ``flat`` describes (its fused attention only: ``fused`` is not kept)."""
        spec = json.loads(spec)
        ops = dict.fromkeys("qkvo")
        for which, (name, i) in spec["ops"].items():
            op_cls = _CAMERA_OPS[name]
            ops[which] = op_cls(*tensors[i:i + op_cls.NUM_TENSORS])
        S, T, B, *grids = sizes
        rotary = {kind: _rotary_op(name, tuple(grids[2 * n: 2 * n + 2]), *rest)
                  for n, (kind, (name, *rest)) in enumerate(spec["rotary"].items())}
        return cls(method=spec["method"], num_views=S, tokens_per_view=T, batch=None if B == -1 else B,
                   transforms=spec["transforms"], ops=ops, rotary=rotary)

    def _transform(self, x: torch.Tensor, which: str) -> torch.Tensor:
        self._check(x)
        if not transform_layout(self.transforms[which], x.shape[-1]):
            return x
        with torch.autocast(device_type=x.device.type, enabled=False):
            out = _Transform.apply(x.to(work_dtype(x.dtype)), self, which)
        return out.to(x.dtype)

    def transform_q(self, q):
        return self._transform(q, "q")

    def transform_k(self, k):
        return self._transform(k, "k")

    def transform_v(self, v):
        return self._transform(v, "v")

    def transform_out(self, o):
        return self._transform(o, "o")


_CAMERA_OPS = {"TiledMatrix": TiledMatrix, "RotTransSplit": RotTransSplit}


def _rotary_op(name: str, grid, num_special: int, patch_offset: int, base: float):
    """A ``PropeRope`` / ``VggtRope`` by class name and arguments. Built anew with each encoding
    ``from_flat`` rebuilds (its tables are recomputed per call, a few kB): a cached one would hold
    real tensors into the operators' fake runs, or fake ones into real runs."""
    return {"PropeRope": PropeRope, "VggtRope": VggtRope}[name](grid, num_special, patch_offset, base)


fused.register("camera", CameraBlockEncoding.from_flat)
