"""Attention positional encodings for multi-view transformers, a library that knows nothing of the model.

``prepare_encoding(method, ...)`` prepares an encoding once per forward pass; its ``attend(q, k, v)``
runs encoded attention. ``multiview_attention(q, k, v, method=..., ...)`` does both in one call.
Methods: the presets none, rope (VGGT 2D RoPE), prope, dppe_dual, dppe_tadd, gta, urope, or a pair
``{"qk": NAME, "vo": NAME}`` of the official DPPE transforms (names, presets and layouts in
``spec``, numerics in ``pairs``). See ``base`` for the contract and ``available_encodings()`` for
the names.

Encodings only check shapes when prepared (no host-device sync, so they compile into one graph);
``check_encoding_cameras(method, K, w2c, **options)`` checks the camera values (NaN/inf, focal
lengths, large translations) where data enters.

Modules, each importing only those before it (and ``depthpe.geometry``): ``spec`` (names, no
torch), ``base``, ``rope``, ``kernels`` (the fused SDPA kernels' forward/backward), ``camera``, ``dppe``, ``urope``, ``pairs``, ``registry``, ``functional``.
The names below are imported on first access, so that ``depthpe.pe.spec`` imports without torch.
"""

__all__ = [
    "Encoding",
    "available_encodings",
    "prepare_encoding",
    "register_encoding",
    "token_positions",
    "apply_rope_2d",
    "multiview_attention",
    "validate_cameras",
    "check_encoding_cameras",
    "encoding_state",
    "options_problem",
]

_LAZY = {
    "Encoding": "base",
    "token_positions": "base",
    "available_encodings": "registry",
    "prepare_encoding": "registry",
    "register_encoding": "registry",
    "apply_rope_2d": "rope",
    "multiview_attention": "functional",
    "validate_cameras": "camera",
    "check_encoding_cameras": "pairs",
    "encoding_state": "pairs",
    "options_problem": "registry",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
