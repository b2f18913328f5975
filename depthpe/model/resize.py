"""Bilinear resizing for the DPT head that ``torch.compile`` keeps as one kernel on the CPU.

Inductor decomposes ``F.interpolate(mode="bilinear")`` into index arithmetic, and the backward of
that decomposition is a scatter-add (``index_put`` with accumulation) that its CPU code generator
runs slowly: in a compiled training step of the DPT head (8 views, 224 px, features 256, 1 thread)
the resizes' backward took about 3 s where eager's ``upsample_bilinear2d_backward`` takes under
0.1 s (docs/compile.md). Inductor has no switch to keep one op; a custom op is opaque to it, so
under compilation on the CPU the resize runs as the ATen kernels, forward and backward.

Eager mode, and compilation for other devices (where the decomposition is the compiler's own,
tuned choice), call ``F.interpolate`` directly.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["resize_bilinear"]


@torch.library.custom_op("depthpe::resize_bilinear", mutates_args=())
def _resize_op(x: torch.Tensor, height: int, width: int) -> torch.Tensor:
    return F.interpolate(x, size=(height, width), mode="bilinear", align_corners=True)


@_resize_op.register_fake
def _(x: torch.Tensor, height: int, width: int) -> torch.Tensor:
    # The ATen op on fake tensors gives the right shape and memory format (channels-last in ->
    # channels-last out).
    return F.interpolate(x, size=(height, width), mode="bilinear", align_corners=True)


@torch.library.custom_op("depthpe::resize_bilinear_backward", mutates_args=())
def _resize_backward_op(grad: torch.Tensor, in_shape: list[int], channels_last: bool) -> torch.Tensor:
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    out = torch.ops.aten.upsample_bilinear2d_backward(
        grad.contiguous(memory_format=fmt), list(grad.shape[-2:]), in_shape, True)
    return out.contiguous(memory_format=fmt)


@_resize_backward_op.register_fake
def _(grad: torch.Tensor, in_shape: list[int], channels_last: bool) -> torch.Tensor:
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    return grad.new_empty(in_shape).contiguous(memory_format=fmt)


def _is_channels_last(x: torch.Tensor) -> bool:
    """Whether ``x`` (N, C, H, W) is stored channels-last (and not also plain contiguous)."""
    return x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()


def _setup_context(ctx, inputs, output) -> None:
    # Only the input's shape and layout are needed, not its values: nothing is kept alive.
    ctx.in_shape = list(inputs[0].shape)
    ctx.channels_last = _is_channels_last(inputs[0])


def _backward(ctx, grad: torch.Tensor):
    return _resize_backward_op(grad, ctx.in_shape, ctx.channels_last), None, None


_resize_op.register_autograd(_backward, setup_context=_setup_context)


def resize_bilinear(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Bilinear resize with ``align_corners=True`` (VGGT's DPT convention).

    x: (N, C, h, w) float, any memory format -> (N, C, H, W) with ``size = (H, W)`` in pixels, in
    x's memory format. Equal to ``F.interpolate(x, size, mode="bilinear", align_corners=True)``;
    under ``torch.compile`` on the CPU it is one opaque op (see the module docstring).
    """
    H, W = int(size[0]), int(size[1])
    if torch.compiler.is_compiling() and x.device.type == "cpu":
        return _resize_op(x, H, W)
    return F.interpolate(x, size=(H, W), mode="bilinear", align_corners=True)
