"""Attention positional encodings for multi-view transformers.

``prepare_encoding(method, ...)`` prepares an encoding once per forward pass; its ``attend(q, k, v)``
runs encoded attention. ``multiview_attention(q, k, v, method=..., ...)`` does both in one call.
Methods: the presets none, rope (VGGT 2D RoPE), prope, dppe_dual, dppe_tadd, gta, urope, or a pair
``{"qk": NAME, "vo": NAME}`` of the official DPPE transforms (``pairs``, names in
``depthpe.model.encoding_spec``). See ``base`` for the contract and ``available_encodings()`` for the
preset names.

Encodings only check shapes when prepared (no host-device sync, so they compile into one graph);
``check_encoding_cameras(method, K, w2c, **options)`` checks the camera values (NaN/inf, focal
lengths, large translations) where data enters.
"""

from .base import Encoding, available_encodings, prepare_encoding, register_encoding, token_positions
from . import rope as _rope  # noqa: F401  (registers "rope" and "none")
from . import prope as _prope  # noqa: F401  (registers "prope" and "gta")
from . import dppe as _dppe  # noqa: F401  (registers "dppe_dual" and "dppe_tadd")
from . import urope as _urope  # noqa: F401  (registers "urope")
from .rope import apply_rope_2d
from .functional import multiview_attention
from .camera import validate_cameras
from .pairs import check_encoding_cameras

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
]
