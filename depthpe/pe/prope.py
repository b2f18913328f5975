"""PRoPE (``prope``) and GTA (``gta``): tiled 4x4 camera matrices plus PRoPE's 2D RoPE.

PRoPE (DPPE preset ``PRoPE = (p2d, p2d)``), per view i with
``P_i = lift(K_bar_i) @ w2c_i``: q <- P_i^T, k <- P_i^-1, v <- P_i^-1, o <- P_i on the camera
block, so ``logit_ij = q_i^T P_i P_j^-1 k_j + RoPE`` and ``o_i = sum_j a_ij P_i P_j^-1 v_j``.

GTA as in the PRoPE/DPPE baselines (DPPE preset ``GTA = (Rt2d, Rt2d)``):
the same with ``P = E = w2c`` (no intrinsics) and PRoPE's RoPE. Option ``translation_scale`` c
scales the translation column (``E^c = [R, c t]``) like GTA's ``trans_coeff`` (official GTA learns
it per layer, initialised to 0.01; here it is a fixed number, default 1 = the DPPE preset).
"""

from __future__ import annotations

from ..geometry import invert_w2c
from .base import register_encoding
from .camera import TiledMatrix, make_camera_encoding, projection_matrices

__all__ = ["make_prope", "make_gta"]


@register_encoding("prope")
def make_prope(*, image_size, grid, num_special, patch_offset, K, w2c, num_views,
               rope_base: float = 100.0, max_translation: float | None = 10.0):
    """Prepare PRoPE. K: (B,S,3,3) pixel intrinsics; w2c: (B,S,3|4,4) OpenCV world-to-camera."""

    def build(K64, E):
        P, P_inv = projection_matrices(K64, E, image_size)
        return TiledMatrix(P.mT), TiledMatrix(P_inv), TiledMatrix(P_inv), TiledMatrix(P)

    return make_camera_encoding(
        "prope", build, grid=grid, num_special=num_special, patch_offset=patch_offset, K=K,
        w2c=w2c, num_views=num_views, rope_base=rope_base, max_translation=max_translation,
    )


@register_encoding("gta")
def make_gta(*, image_size, grid, num_special, patch_offset, K, w2c, num_views,
             translation_scale: float = 1.0, rope_base: float = 100.0,
             max_translation: float | None = 10.0):
    """Prepare GTA (SE(3) part from w2c only; K is not used and may be None)."""

    def build(K64, E):
        Ec = E.clone()
        Ec[..., :3, 3] = Ec[..., :3, 3] * translation_scale
        E_inv = invert_w2c(Ec)
        return TiledMatrix(Ec.mT), TiledMatrix(E_inv), TiledMatrix(E_inv), TiledMatrix(Ec)

    return make_camera_encoding(
        "gta", build, grid=grid, num_special=num_special, patch_offset=patch_offset, K=K,
        w2c=w2c, num_views=num_views, need_K=False, rope_base=rope_base,
        max_translation=max_translation,
    )
