"""Encodings by name: ``prepare_encoding``, ``available_encodings`` and ``register_encoding``.

The registry starts with one entry per preset of ``spec.PRESET_PAIRS`` (each prepares its (qk, vo)
pair with ``pairs.make_pair_encoding``); ``register_encoding`` adds your own factories to the same
table. This is the entry point of ``depthpe.pe``: it sits above the families and their composition
(``pairs``) and below the functional form (``functional``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Callable

import torch

from .base import Encoding
from .pairs import make_pair_encoding
from .spec import PRESET_PAIRS

__all__ = ["register_encoding", "prepare_encoding", "available_encodings", "options_problem"]

_REGISTRY: dict[str, Callable[..., Encoding]] = {
    name: functools.partial(make_pair_encoding, name) for name in PRESET_PAIRS
}


def register_encoding(name: str):
    """Decorator registering ``factory(**geometry, **options) -> Encoding`` under ``name``.

    ``geometry`` holds the keyword arguments ``prepare_encoding`` passes every factory (image_size,
    grid, num_special, patch_offset, K, w2c, num_views); ``options`` are the caller's. Raises
    ``ValueError`` when ``name`` is taken (the presets are registered from the start).
    """

    def deco(factory):
        if name in _REGISTRY:
            raise ValueError(f"encoding {name!r} is already registered")
        _REGISTRY[name] = factory
        return factory

    return deco


def available_encodings() -> list[str]:
    """Names accepted by ``prepare_encoding``: the presets (``model.global_pe``) and registered names."""
    return sorted(_REGISTRY)


def prepare_encoding(
    method: str | Mapping[str, str],
    *,
    image_size: tuple[int, int],
    grid: tuple[int, int],
    num_special: int = 0,
    patch_offset: int = 1,
    K: torch.Tensor | None = None,
    w2c: torch.Tensor | None = None,
    num_views: int | None = None,
    **options,
) -> Encoding:
    """Prepare the encoding ``method`` for one forward pass.

    method: a registered name (``available_encodings()``) or a pair ``{"qk": NAME, "vo": NAME}`` of
    DPPE transforms (``depthpe.pe.pairs``, ``depthpe.pe.spec``).
    image_size: (H, W) pixels; grid: (h, w) patches per view; num_special: special tokens per view
    (RoPE position 0, their own view's camera); patch_offset: patch (x, y) sits at RoPE position
    (x + patch_offset, y + patch_offset). K: (B, S, 3, 3) pixel intrinsics and w2c: (B, S, 3|4, 4)
    OpenCV world-to-camera, required by the camera encodings. num_views: S, inferred from K/w2c when
    given. ``options`` are method specific (``pe_options`` in the model config), except
    ``fused_attention`` (auto, on, off: whether the camera encodings and URoPE run their fused
    attention function, ``depthpe.pe.camera.use_fused``; auto: on CPU only).
    """
    if isinstance(method, Mapping):
        factory = functools.partial(make_pair_encoding, dict(method))
    elif method in _REGISTRY:
        factory = _REGISTRY[method]
    else:
        raise ValueError(
            f"unknown positional encoding {method!r}; available: {', '.join(available_encodings())} "
            "or a pair {qk: NAME, vo: NAME}"
        )
    if num_views is None:
        cams = K if K is not None else w2c
        num_views = int(cams.shape[1]) if cams is not None else 1
    fused = _fused_option(options.pop("fused_attention", "auto"))
    enc = factory(
        image_size=tuple(image_size),
        grid=tuple(grid),
        num_special=int(num_special),
        patch_offset=int(patch_offset),
        K=K,
        w2c=w2c,
        num_views=int(num_views),
        **options,
    )
    if hasattr(enc, "fused"):  # the encodings with a fused attention function (camera.use_fused)
        enc.fused = fused
    return enc


FUSED_ATTENTION = {"auto": None, "on": True, "off": False, True: True, False: False}


def _fused_option(value) -> bool | None:
    """``pe_options.fused_attention``: auto (None: the device's default), on/true or off/false."""
    key = value.lower() if isinstance(value, str) else value
    key = {"true": True, "false": False}.get(key, key)
    if key not in FUSED_ATTENTION:
        raise ValueError(f"pe_options.fused_attention must be auto, on or off, got {value!r}")
    return FUSED_ATTENTION[key]


def options_problem(method: str | Mapping[str, str], options: Mapping, *, num_heads: int, head_dim: int,
                    num_special: int = 1) -> str | None:
    """Why ``method`` cannot run with ``options`` (``pe_options``), or None when it can.

    Prepares the encoding on a tiny two-view rig (28 x 28 px, a 2 x 2 patch grid, ``num_special``
    special tokens per view, the second camera 0.1 to the right) and runs one attention of
    ``num_heads`` heads of ``head_dim`` channels without gradients, so that an unknown option, a bad
    value or options the head layout cannot take (URoPE anchors that do not divide the heads) are
    found when a config is made, not at the first training step. Runs on plain CPU tensors whatever
    autocast, fake-tensor or dispatch mode the caller is in, and leaves the global random state alone
    (a model seeded before its config is made initializes the same); results are cached per argument set.
    """
    key = json.dumps([method, dict(options)], sort_keys=True, default=str)
    return _options_problem(key, int(num_heads), int(head_dim), int(num_special))


@functools.lru_cache(maxsize=256)
def _options_problem(key: str, num_heads: int, head_dim: int, num_special: int) -> str | None:
    from torch.utils._python_dispatch import _disable_current_modes

    method, options = json.loads(key)
    with _disable_current_modes(), torch._C.DisableTorchFunction(), torch.autocast("cpu", enabled=False):
        K = torch.tensor([[28.0, 0.0, 14.0], [0.0, 28.0, 14.0], [0.0, 0.0, 1.0]]).expand(1, 2, 3, 3)
        w2c = torch.eye(4).repeat(1, 2, 1, 1)
        w2c[0, 1, 0, 3] = 0.1
        seeded = torch.Generator().manual_seed(0)
        q = torch.randn(1, num_heads, 2 * (num_special + 4), head_dim, generator=seeded)
        try:
            enc = prepare_encoding(method, image_size=(28, 28), grid=(2, 2), num_special=num_special,
                                   K=K, w2c=w2c, **options)
            with torch.no_grad():
                enc.attend(q, q, q)
        except (TypeError, ValueError) as err:
            return str(err)
    return None
