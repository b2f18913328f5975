"""Procedural textures: a lattice hash, value noise and the texture colour at surface coordinates
(``_texture_color``: (N, 2) scene units -> (N, 3) RGB in [0, 1])."""

from __future__ import annotations

import numpy as np

from .scene import TEXTURE_KINDS, Texture


def _hash01(ix: np.ndarray, iy: np.ndarray, seed: int) -> np.ndarray:
    """Deterministic pseudo-random values in [0, 1) on an integer lattice (integer hash)."""
    h = ix.astype(np.int64).astype(np.uint64) * np.uint64(0x9E3779B1)
    h ^= iy.astype(np.int64).astype(np.uint64) * np.uint64(0x85EBCA77)
    h ^= np.uint64((int(seed) * 0xC2B2AE3D) & 0xFFFFFFFFFFFFFFFF)
    h ^= h >> np.uint64(15)
    h *= np.uint64(0x2C1B3C6D)
    h ^= h >> np.uint64(12)
    h *= np.uint64(0x297A2D39)
    h ^= h >> np.uint64(15)
    return (h & np.uint64(0xFFFFFF)).astype(np.float64) / float(1 << 24)


def _value_noise(u: np.ndarray, v: np.ndarray, seed: int) -> np.ndarray:
    """Smooth value noise in [0, 1) at (u, v) (lattice period 1)."""
    iu, iv = np.floor(u), np.floor(v)
    fu, fv = u - iu, v - iv
    fu = fu * fu * (3 - 2 * fu)
    fv = fv * fv * (3 - 2 * fv)
    n00 = _hash01(iu, iv, seed)
    n10 = _hash01(iu + 1, iv, seed)
    n01 = _hash01(iu, iv + 1, seed)
    n11 = _hash01(iu + 1, iv + 1, seed)
    return (n00 * (1 - fu) + n10 * fu) * (1 - fv) + (n01 * (1 - fu) + n11 * fu) * fv


def _fbm(u: np.ndarray, v: np.ndarray, seed: int, octaves: int = 3) -> np.ndarray:
    total, amp, norm = np.zeros_like(u), 1.0, 0.0
    for o in range(octaves):
        total += amp * _value_noise(u * 2**o, v * 2**o, seed + 7919 * o)
        norm += amp
        amp *= 0.5
    return total / norm


def _texture_color(tex: Texture, uv: np.ndarray) -> np.ndarray:
    """Evaluate a texture at surface coordinates uv (N, 2) in scene units -> (N, 3) RGB in [0, 1]."""
    c, s = np.cos(tex.angle), np.sin(tex.angle)
    u = (c * uv[:, 0] + s * uv[:, 1]) / tex.scale
    v = (-s * uv[:, 0] + c * uv[:, 1]) / tex.scale
    if tex.kind == "checker":
        m = ((np.floor(u) + np.floor(v)) % 2).astype(np.float64)
    elif tex.kind == "stripes":
        m = ((u - np.floor(u)) < 0.5).astype(np.float64)
    elif tex.kind == "noise":
        m = _fbm(u, v, tex.seed)
    elif tex.kind == "gradient":
        m = 0.5 + 0.5 * np.sin(2 * np.pi * u / 4 + 3 * _value_noise(u / 4, v / 4, tex.seed))
    else:
        raise ValueError(f"unknown texture kind {tex.kind!r}; expected one of {TEXTURE_KINDS}")
    color = tex.color_a[None, :] * (1 - m[:, None]) + tex.color_b[None, :] * m[:, None]
    fine = _value_noise(uv[:, 0] * 8 / tex.scale, uv[:, 1] * 8 / tex.scale, tex.seed + 1)
    return color * (1 - tex.detail + tex.detail * fine)[:, None]
