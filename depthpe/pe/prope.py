"""PRoPE (``prope``) and GTA (``gta``): the pairs (p2d, p2d) and (Rt2d, Rt2d) of ``pairs``.

PRoPE (DPPE preset ``PRoPE = (p2d, p2d)``), per view i with
``P_i = lift(K_bar_i) @ w2c_i``: q <- P_i^T, k <- P_i^-1, v <- P_i^-1, o <- P_i on the camera
block, so ``logit_ij = q_i^T P_i P_j^-1 k_j + RoPE`` and ``o_i = sum_j a_ij P_i P_j^-1 v_j``.

GTA as in the PRoPE/DPPE baselines (DPPE preset ``GTA = (Rt2d, Rt2d)``):
the same with ``P = E = w2c`` (no intrinsics) and PRoPE's RoPE. Option ``translation_scale`` c
scales the translation column (``E^c = [R, c t]``) like GTA's ``trans_coeff`` (official GTA learns
it per layer, initialised to 0.01; here it is a fixed number, default 1 = the DPPE preset).
"""

from __future__ import annotations

from .base import register_encoding
from .pairs import make_pair_encoding

__all__ = ["make_prope", "make_gta"]


@register_encoding("prope")
def make_prope(*, rope_base: float = 100.0, max_translation: float | None = 10.0, **geometry):
    """Prepare PRoPE. K: (B,S,3,3) pixel intrinsics; w2c: (B,S,3|4,4) OpenCV world-to-camera."""
    return make_pair_encoding("prope", method="prope", rope_base=rope_base,
                              max_translation=max_translation, **geometry)


@register_encoding("gta")
def make_gta(*, translation_scale: float = 1.0, rope_base: float = 100.0,
             max_translation: float | None = 10.0, **geometry):
    """Prepare GTA (SE(3) part from w2c only; K is not used and may be None)."""
    return make_pair_encoding("gta", method="gta", translation_scale=translation_scale,
                              rope_base=rope_base, max_translation=max_translation, **geometry)
