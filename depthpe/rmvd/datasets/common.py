"""What the RMVD native readers share: a file's bytes with one-line errors, strictly decoded
16-bit PNGs, an image's (H, W) from its header alone, and the publishers' invalid values as 0."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from ...config import ConfigError
from depthpe.scenes.format.image_bytes import ImageBytesError, decode_image_bytes, inspect_image_bytes

__all__ = ["read_file_bytes", "read_png16", "image_hw", "zero_invalid"]


def read_file_bytes(path: Path, what: str) -> bytes:
    """The bytes of ``path``; a missing or unreadable file is one ConfigError line naming ``what``
    it is and where the native layouts are described."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist (is --data-root right? native layouts: "
                          f"docs/rmvd.md)") from None
    except OSError as err:
        raise ConfigError(f"cannot read {what} {path}: {err.strerror or err}") from None


def read_png16(path: Path, what: str) -> np.ndarray:
    """A single-channel 16-bit PNG, strictly decoded (truncated or corrupt files refused) ->
    (H, W) uint16 as stored; anything else (8-bit, colour, JPEG) is one ConfigError line."""
    data = read_file_bytes(path, what)
    try:
        arr = decode_image_bytes(data, cv2.IMREAD_UNCHANGED)
    except ValueError as err:  # ImageBytesError is a ValueError
        raise ConfigError(f"{what} {path} is not a readable PNG ({err})") from None
    if arr.dtype != np.uint16 or arr.ndim != 2:
        raise ConfigError(f"{what} {path} must be a single-channel 16-bit PNG, got {arr.dtype} "
                          f"with shape {arr.shape}")
    return arr


def image_hw(path: Path, what: str = "image") -> tuple[int, int]:
    """(height, width) in pixels of a JPEG or PNG, from its header (the file is checked, not decoded)."""
    try:
        _, height, width = inspect_image_bytes(read_file_bytes(path, what))
    except ImageBytesError as err:
        raise ConfigError(f"{what} {path} is not a readable JPEG or PNG ({err})") from None
    return height, width


def zero_invalid(depth: np.ndarray) -> np.ndarray:
    """``depth`` (H, W) as float64 metres with every NaN, infinite or non-positive value set to 0
    (RMVD's "no ground truth"), as the reference does for every dataset."""
    out = np.asarray(depth, dtype=np.float64).copy()
    out[~np.isfinite(out) | (out <= 0)] = 0.0
    return out
