"""Composable encodings ``{qk: NAME, vo: NAME}``: the transforms of the official DPPE code.

A pair names the query-key transform (on q and k) and the value-output transform (on v before and
on the attention output o after one SDPA call). Names, layouts and validation are in
``depthpe.pe.spec``; this module builds the numbers, for the pairs and for every preset (a preset
is a named pair: PRoPE = (p2d, p2d), GTA = (Rt2d, Rt2d), ...; ``spec.PRESET_PAIRS``). For a camera
transform with the 4x4 map M_i of view i (``camera_maps``), tokens of view i get

    q <- M_i^T,  k <- M_i^-1   (qk: logit_ij = q_i^T M_i M_j^-1 k_j)
    v <- M_i^-1, o <- M_i      (vo: o_i = sum_j a_ij M_i M_j^-1 v_j)

on every 4-chunk of the camera segment (``TiledMatrix``), and PRoPE's 2D RoPE (forward on q, k,
v; inverse on o) on the RoPE segment. ``KRtAdd2d`` works on 6-chunks ``[r | s]`` instead
(``RotTransSplit``): vo: v: r <- (K_j R_j)^-1 r, s <- s - K_j t_j; o: r <- K_i R_i r,
s <- s + K_i t_i; qk: q: r <- (K_i R_i)^T r, k: r <- (K_j R_j)^-1 r, and both s <- s - K t.
K is the normalized intrinsics (``geometry.normalize_intrinsics``). All matrices are built in
float64 with closed-form inverses.

``softmax="blockwise"`` (vo ``KRtAdd2d``): separate rotation and translation softmaxes
(``depthpe.pe.dppe.TAddBlockwise``); with qk ``KRtAdd2d`` this is the DPPE paper's appendix A.
``translation_scale`` c (``Rt`` / ``Rt2d``) scales the translation column, ``E^c = [R | c t]``, like
GTA's ``trans_coeff`` (official GTA learns it per layer, initialised to 0.01; here it is a fixed
number, default 1 = the DPPE preset).

This module composes the families below it (``camera``, ``rope``, ``dppe``, ``urope``) and is
composed by ``registry`` (names -> encodings) above it.
"""

from __future__ import annotations

import torch

from ..geometry import invert_intrinsics, invert_w2c, normalize_intrinsics
from .base import Encoding, token_positions
from .camera import (
    CameraBlockEncoding,
    PropeRope,
    RotTransSplit,
    TiledMatrix,
    VggtRope,
    camera_tensors,
    lift_intrinsics,
    validate_cameras,
)
from .dppe import TAddBlockwise
from .rope import Rope2D
from .spec import encoding_label, encoding_pair, transform_layout
from .urope import LearnableAnchors, make_urope, resolve_anchors

__all__ = ["camera_maps", "make_pair_encoding", "uses_cameras", "uses_intrinsics", "check_encoding_cameras",
           "encoding_state"]

_NO_CAMERA = ("none", "2d", "vggt2d")
_NO_INTRINSICS = ("Rt", "Rt2d", "R2d", "t2d")


def uses_cameras(name: str) -> bool:
    """Whether transform ``name`` reads the cameras (w2c)."""
    return name not in _NO_CAMERA


def uses_intrinsics(name: str) -> bool:
    """Whether transform ``name`` reads the intrinsics K."""
    return uses_cameras(name) and name not in _NO_INTRINSICS


def check_encoding_cameras(method, K: torch.Tensor | None, w2c: torch.Tensor | None,
                           **options) -> None:
    """Check the cameras that encoding ``method`` (a preset name or {qk, vo}) will read, by value.

    K: (B, S, 3, 3) pixel intrinsics; w2c: (B, S, 3|4, 4) OpenCV world-to-camera; ``options`` the
    encoding's options (only ``max_translation``, default 10, is read here). Raises ``ValueError``
    for missing, NaN/inf cameras or non-positive focal lengths and warns for translations longer
    than ``max_translation`` (``validate_cameras``); does nothing for encodings without cameras.
    ``prepare_encoding`` only checks shapes (no host sync inside ``forward``): call this where data
    enters, as ``DepthModel.check_inputs`` does.
    """
    qk, vo = encoding_pair(method)
    if not (uses_cameras(qk) or uses_cameras(vo)):
        return
    cams = w2c if w2c is not None else K
    num_views = int(cams.shape[1]) if cams is not None and cams.ndim > 1 else 0
    validate_cameras(K, w2c, num_views, method=encoding_label(method),
                     need_K=uses_intrinsics(qk) or uses_intrinsics(vo),
                     max_translation=options.get("max_translation", 10.0))


def encoding_state(spec, num_layers: int, **options) -> torch.nn.Module | None:
    """The learnable state of encoding ``spec`` (a preset name or {qk, vo}) with ``options`` for a
    model of ``num_layers`` encoded attention layers, or None when the encoding learns nothing.

    The model owns it (a sub-module, so it is trained, saved and loaded with the model) and gives
    layer i the encoding ``state.layer_encoding(enc, i)`` of the encoding ``enc`` it prepared once
    per forward. Today only URoPE with ``learnable_anchors: true`` has state (``LearnableAnchors``,
    initialised at the anchors its options place).
    """
    qk, _ = encoding_pair(spec)
    if qk != "urope" or not options.get("learnable_anchors", False):
        return None
    placement = ("anchors", "num_anchors", "anchor_near", "anchor_far", "anchor_spacing")
    return LearnableAnchors(resolve_anchors(*(options.get(key) for key in placement)), num_layers)


def _rigid(E: torch.Tensor, rotation: bool, translation: bool) -> torch.Tensor:
    """(B, S, 4, 4) copy of E keeping its rotation and/or translation (the rest identity)."""
    G = torch.eye(4, dtype=E.dtype, device=E.device).expand_as(E).clone()
    if rotation:
        G[..., :3, :3] = E[..., :3, :3]
    if translation:
        G[..., :3, 3] = E[..., :3, 3]
    return G


def camera_maps(name: str, Kbar: torch.Tensor | None, E: torch.Tensor,
                translation_scale: float = 1.0):
    """The per-view map of camera transform ``name`` and its inverse, float64.

    Kbar: (B, S, 3, 3) normalized intrinsics (None when unused); E: (B, S, 4, 4) world-to-camera.
    Returns (M, M^-1), each (B, S, 4, 4), for the 4x4 transforms; for ``KRtAdd2d``
    (K R, (K R)^-1, K t) with shapes (B, S, 3, 3), (B, S, 3, 3), (B, S, 3).
    ``translation_scale`` c scales t in E for ``Rt`` / ``Rt2d`` (GTA's E^c = [R | c t]).
    """
    if name == "KRtAdd2d":
        R, t = E[..., :3, :3], E[..., :3, 3]
        return Kbar @ R, R.mT @ invert_intrinsics(Kbar), (Kbar @ t.unsqueeze(-1)).squeeze(-1)
    if name in ("Rt", "Rt2d"):
        G = E.clone()
        G[..., :3, 3] = G[..., :3, 3] * translation_scale
        return G, invert_w2c(G)
    if name in ("p", "p2d", "pT2d", "pIT2d"):
        G = E
    else:
        G = _rigid(E, rotation=name in ("R2d", "KR2d"), translation=name in ("t2d", "Kt2d"))
    if uses_intrinsics(name):
        M, M_inv = lift_intrinsics(Kbar) @ G, invert_w2c(G) @ lift_intrinsics(invert_intrinsics(Kbar))
    else:
        M, M_inv = G, invert_w2c(G)
    if name == "pT2d":
        return M.mT, M_inv.mT
    if name == "pIT2d":
        return M_inv.mT, M.mT
    return M, M_inv


def _slot_ops(name: str, slot: str, Kbar, E, translation_scale: float):
    """Camera ops of transform ``name`` on ``slot`` "qk" -> (q_op, k_op) or "vo" -> (v_op, o_op)."""
    if not uses_cameras(name) or name == "urope":
        return None, None
    maps = camera_maps(name, Kbar, E, translation_scale)
    if name == "KRtAdd2d":
        KR, KR_inv, gamma = maps
        if slot == "qk":
            return RotTransSplit(KR.mT, -gamma), RotTransSplit(KR_inv, -gamma)
        return RotTransSplit(KR_inv, -gamma), RotTransSplit(KR, gamma)
    M, M_inv = maps
    if slot == "qk":
        return TiledMatrix(M.mT), TiledMatrix(M_inv)
    return TiledMatrix(M_inv), TiledMatrix(M)


def _rotary(qk: str, vo: str, grid, num_special: int, patch_offset: int, rope_base: float) -> dict:
    """The 2D RoPE ops the pair's layouts need: {"rope": PropeRope, "vggt": VggtRope}."""
    kinds = {kind for name in (qk, vo) for _, _, kind in transform_layout(name, 8)}
    ops = {}
    if "rope" in kinds:
        ops["rope"] = PropeRope(grid, num_special, patch_offset, rope_base)
    if "vggt" in kinds:
        ops["vggt"] = VggtRope(grid, num_special, patch_offset, rope_base)
    return ops


def _check_options(method: str, qk: str, vo: str, softmax: str, translation_scale: float) -> None:
    """Options that only some pairs understand are refused elsewhere (one-line ``ValueError``)."""
    if softmax not in ("shared", "blockwise"):
        raise ValueError(f"{method}: softmax must be 'shared' or 'blockwise', got {softmax!r}")
    if softmax == "blockwise" and not (vo == "KRtAdd2d" and qk in ("p2d", "KRtAdd2d")):
        raise ValueError(f"{method}: softmax 'blockwise' needs vo KRtAdd2d and qk KRtAdd2d (the paper's "
                         "appendix A) or p2d (the dppe_tadd preset)")
    if translation_scale != 1.0 and "Rt" not in (qk, vo) and "Rt2d" not in (qk, vo):
        raise ValueError(f"{method}: translation_scale applies to the Rt / Rt2d transforms only")


def make_pair_encoding(spec, *, image_size, grid, num_special, patch_offset, K, w2c, num_views,
                       base: float | None = None, **options) -> Encoding:
    """Prepare the encoding of ``spec`` (a preset name or {qk, vo}); geometry as ``prepare_encoding``.

    K: (B, S, 3, 3) pixel intrinsics, w2c: (B, S, 3|4, 4) OpenCV world-to-camera (None allowed when
    no transform of the pair reads them; only their shapes are checked here, values by
    ``check_encoding_cameras``). Options: ``rope_base`` (2D RoPE base, 100; ``base`` is its older
    name, which the ``rope`` preset took), ``max_translation`` (``check_encoding_cameras`` warns above
    this |t|), ``translation_scale`` (Rt / Rt2d) and ``softmax`` (vo KRtAdd2d); the pair
    {qk: urope, vo: none} takes URoPE's options instead (``urope.make_urope``).
    """
    qk, vo = encoding_pair(spec)
    method = encoding_label(spec)
    if base is not None:
        if "rope_base" in options:
            raise ValueError(f"{method}: give rope_base or its older name base, not both")
        options["rope_base"] = base
    geometry = dict(image_size=image_size, grid=grid, num_special=num_special,
                    patch_offset=patch_offset, K=K, w2c=w2c, num_views=num_views)
    if qk == "urope":
        return make_urope(**geometry, **options)
    return _make_transform_pair(qk, vo, method, **geometry, **options)


def _make_transform_pair(qk: str, vo: str, method: str, *, image_size, grid, num_special, patch_offset,
                         K, w2c, num_views, rope_base: float = 100.0,
                         max_translation: float | None = 10.0, translation_scale: float = 1.0,
                         softmax: str = "shared", **unknown) -> Encoding:
    """The encoding of the pair (qk, vo) of ``spec.OFFICIAL_TRANSFORMS`` or qk ``vggt2d``; arguments as
    ``make_pair_encoding`` (``max_translation`` is read by ``check_encoding_cameras``, not here)."""
    if unknown:
        raise TypeError(f"{method}: unknown option(s) {sorted(unknown)}; accepted: rope_base (or base), "
                        "max_translation, translation_scale, softmax")
    _check_options(method, qk, vo, softmax, translation_scale)
    if qk == "vggt2d" and vo == "none":
        positions = token_positions(num_views, grid, num_special, patch_offset, dtype=torch.float64)
        return Rope2D(positions, base=rope_base)
    if qk == vo == "none":
        return Encoding()
    Kbar = E = batch = None
    if uses_cameras(qk) or uses_cameras(vo):
        need_K = uses_intrinsics(qk) or uses_intrinsics(vo)
        K64, E = camera_tensors(K, w2c, num_views, method=method, need_K=need_K)
        Kbar = normalize_intrinsics(K64, image_size) if need_K else None
        batch = E.shape[0]
    with torch.autocast(device_type="cpu" if E is None else E.device.type, enabled=False):
        q_op, k_op = _slot_ops(qk, "qk", Kbar, E, translation_scale)
        v_op, o_op = _slot_ops(vo, "vo", Kbar, E, translation_scale)
    cls = TAddBlockwise if softmax == "blockwise" else CameraBlockEncoding
    h, w = grid
    return cls(method=method, num_views=num_views, tokens_per_view=num_special + h * w, batch=batch,
               transforms={"q": qk, "k": qk, "v": vo, "o": vo},
               ops={"q": q_op, "k": k_op, "v": v_op, "o": o_op},
               rotary=_rotary(qk, vo, grid, num_special, patch_offset, rope_base))
