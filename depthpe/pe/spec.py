"""The encoding spec: what ``model.global_pe`` and ``prepare_encoding`` may name (no torch).

A pair names one transform for the query-key path (qk: applied to q and k before the dot product)
and one for the value-output path (vo: applied to v before and to the attention output after).
The transform names are those of the official DPPE code (sbintuitions/dppe, ``dppe/torch.py``);
every combination of two of them is accepted there and here. depthpe adds two query-key-only
names for its own presets: ``vggt2d`` (VGGT's 2D RoPE, any vo) and ``urope`` (vo must be ``none``).
A preset is a named pair and nothing else: ``PRESET_PAIRS`` is the one table of preset names (the
registry of ``depthpe.pe.registry`` is built from it).

This module is the bottom of ``depthpe.pe`` and imports nothing of depthpe: the name table, the
layout of the head dim per transform, and the validation that the model config, the run-config
loader and the encodings share. The numerics live in ``depthpe.pe.pairs``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

__all__ = [
    "OFFICIAL_TRANSFORMS",
    "QK_ONLY_TRANSFORMS",
    "PRESET_PAIRS",
    "TRANSFORM_DEFINITIONS",
    "encoding_pair",
    "encoding_label",
    "transform_layout",
    "head_dim_multiple",
    "valid_pairs_text",
]

# One line per transform: the 4x4 map M_i of view i (q <- M_i^T, k <- M_j^-1, v <- M_j^-1, o <- M_i
# on the camera block), with K = normalized intrinsics, E = [R|t] world-to-camera, P = K E.
TRANSFORM_DEFINITIONS: dict[str, str] = {
    "none": "identity (no encoding on this path)",
    "2d": "2D RoPE only, on the whole head: [x: d/2 | y: d/2], PRoPE's convention",
    "p": "M = P = K [R|t] on the whole head (no RoPE)",
    "p2d": "M = P on [0, d/2), 2D RoPE on [d/2, d) (PRoPE)",
    "pIT2d": "M = P^-T on [0, d/2), 2D RoPE (DPPE-dual)",
    "pT2d": "M = P^T on [0, d/2), 2D RoPE",
    "Rt": "M = E = [R|t] on the whole head (no RoPE; CAPE-like)",
    "Rt2d": "M = E = [R|t] on [0, d/2), 2D RoPE (GTA)",
    "R2d": "M = [R|0] on [0, d/2), 2D RoPE",
    "KR2d": "M = K [R|0] on [0, d/2), 2D RoPE",
    "Kt2d": "M = K [I|t] on [0, d/2), 2D RoPE",
    "t2d": "M = [I|t] on [0, d/2), 2D RoPE",
    "K2d": "M = lift(K) on [0, d/2), 2D RoPE",
    "KRtAdd2d": "6-chunks [r|s] on [0, d/2): r <- K R r, s <- s + K t (vo; qk: both sides subtract K t), "
                "2D RoPE (DPPE-tAdd)",
    "vggt2d": "VGGT's 2D RoPE on the whole head: [y: d/2 | x: d/2], rotate-half, +theta (depthpe; qk only)",
    "urope": "URoPE: keys' RoPE positions projected into each query view (depthpe; qk only, vo none)",
}
OFFICIAL_TRANSFORMS: tuple[str, ...] = (
    "none", "2d", "p", "p2d", "pIT2d", "pT2d", "Rt", "Rt2d", "R2d", "KR2d", "Kt2d", "t2d", "K2d",
    "KRtAdd2d",
)
QK_ONLY_TRANSFORMS: tuple[str, ...] = ("vggt2d", "urope")

# Every preset is a named pair (the DPPE code's RoPE preset is (2d, none) in PRoPE's RoPE layout;
# depthpe's ``rope`` keeps VGGT's layout, hence ``vggt2d``).
PRESET_PAIRS: dict[str, tuple[str, str]] = {
    "none": ("none", "none"),
    "rope": ("vggt2d", "none"),
    "prope": ("p2d", "p2d"),
    "gta": ("Rt2d", "Rt2d"),
    "dppe_dual": ("pIT2d", "pIT2d"),
    "dppe_tadd": ("p2d", "KRtAdd2d"),
    "urope": ("urope", "none"),
}


def valid_pairs_text() -> str:
    """One sentence naming every valid pair (for error messages)."""
    return (f"valid pairs: {{qk: A, vo: B}} with A and B any of {list(OFFICIAL_TRANSFORMS)} "
            "(every combination, as the official DPPE code), or A = 'vggt2d' with any such B, or "
            f"{{qk: urope, vo: none}}; presets: {sorted(PRESET_PAIRS)}")


def encoding_pair(spec: Any) -> tuple[str, str]:
    """The (qk, vo) transform names of ``spec``: a preset name or a mapping {qk: NAME, vo: NAME}.

    This is the one validation of an encoding name: the model config, the run config and the
    encodings all call it. Raises ``ValueError`` (one line, with a did-you-mean hint for a misspelled
    preset, listing the valid names or pairs) for anything else.
    """
    if isinstance(spec, str):
        if spec not in PRESET_PAIRS:
            close = difflib.get_close_matches(spec, sorted(PRESET_PAIRS), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"unknown encoding {spec!r}{hint}: not a preset "
                             f"({', '.join(sorted(PRESET_PAIRS))}) and not a pair; {valid_pairs_text()}")
        return PRESET_PAIRS[spec]
    if not isinstance(spec, Mapping) or set(spec) != {"qk", "vo"}:
        raise ValueError(f"positional encoding {spec!r} must be a preset name or a mapping with exactly "
                         f"the keys qk and vo; {valid_pairs_text()}")
    qk, vo = spec["qk"], spec["vo"]
    qk_ok = qk in OFFICIAL_TRANSFORMS or qk in QK_ONLY_TRANSFORMS
    vo_ok = vo in OFFICIAL_TRANSFORMS and (qk != "urope" or vo == "none")
    if not (isinstance(qk, str) and isinstance(vo, str) and qk_ok and vo_ok):
        raise ValueError(f"positional encoding pair {{qk: {qk}, vo: {vo}}} is not accepted by the official "
                         f"DPPE code or depthpe; {valid_pairs_text()}")
    return qk, vo


def encoding_label(spec: Any) -> str:
    """Short text for logs, tables and file names: the preset name, or ``qk=A,vo=B``."""
    if isinstance(spec, str):
        return spec
    qk, vo = encoding_pair(spec)
    return f"qk={qk},vo={vo}"


def transform_layout(name: str, d: int) -> list[tuple[int, int, str]]:
    """Segments ``(start, stop, kind)`` of a head of width d that transform ``name`` acts on.

    kind: ``cam`` (per-view camera map), ``rope`` (PRoPE's 2D RoPE, [x | y] halves of the segment)
    or ``vggt`` (VGGT's 2D RoPE). ``none`` and ``urope`` have no per-tensor segments.
    """
    if name in ("none", "urope"):
        return []
    if name in ("p", "Rt"):
        return [(0, d, "cam")]
    if name == "2d":
        return [(0, d, "rope")]
    if name == "vggt2d":
        return [(0, d, "vggt")]
    return [(0, d // 2, "cam"), (d // 2, d, "rope")]


def head_dim_multiple(name: str) -> int:
    """The head dim must be a multiple of this for transform ``name`` (4-chunks, even RoPE pairs)."""
    return 8 if len(transform_layout(name, 8)) == 2 else 4
