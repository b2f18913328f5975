"""Reading a download's files: strict decoding of image and 16-bit depth files (failures become
``FrameDropped`` with a stable reason) and finding the scene folders of a download."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import cv2
import numpy as np

from ..format.image_bytes import ImageBytesError, decode_image_bytes, decode_rgb
from .contract import FrameDropped

__all__ = ["read_image_file", "read_rgb_image", "read_rgb", "read_uint16", "find_dirs_with"]


def _decode_file(path: str | os.PathLike, decode: Callable[[np.ndarray], Any], what: str):
    """``decode(bytes of path)``, its failures raised as ``FrameDropped`` (reasons: ``read_image_file``)."""
    try:
        data = np.fromfile(str(path), dtype=np.uint8)
    except OSError as err:
        raise FrameDropped(f"unreadable {what}") from err
    try:
        return decode(data)
    except ImageBytesError as err:
        reason = {"truncated": f"truncated or corrupt {what}", "corrupt": f"truncated or corrupt {what}",
                  "size": f"{what} too large"}.get(err.kind, f"unreadable {what}")
        raise FrameDropped(reason) from err
    except ValueError as err:
        raise FrameDropped(f"unreadable {what}") from err


def read_image_file(path: str | os.PathLike, flags: int, what: str = "image") -> np.ndarray:
    """Read and strictly decode an image file with ``cv2.imdecode(flags)`` (OpenCV channel order;
    the stored pixel grid, EXIF orientation not applied: ``image_bytes``).

    Raises ``FrameDropped`` with reason ``"unreadable <what>"`` (missing file, not a JPEG/PNG, not
    decodable), ``"truncated or corrupt <what>"`` (a JPEG without its end marker, a PNG cut off or
    with a bad CRC: OpenCV alone would decode these with a grey lower part) or ``"<what> too
    large"`` (larger than ``MAX_FRAME_SIDE``, refused before decoding).
    """
    return _decode_file(path, lambda data: decode_image_bytes(data, flags), what)


def read_rgb_image(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """Read a colour image file -> ((H, W, 3) uint8 RGB in its stored pixel grid, the EXIF
    orientation tag that was not applied, 1 = none): ``image_bytes.decode_rgb``, the one reader of
    users' images. Raises ``FrameDropped`` like ``read_image_file``."""
    return _decode_file(path, decode_rgb, "image")


def read_rgb(path: str | os.PathLike) -> np.ndarray:
    """Read an 8-bit colour image file as (H, W, 3) uint8 RGB in its stored pixel grid; an alpha
    channel is discarded. Raises ``FrameDropped`` (``read_image_file``) if the file is missing, not
    an image, truncated or corrupt."""
    return read_rgb_image(path)[0]


def read_uint16(path: str | os.PathLike) -> np.ndarray:
    """Read a single-channel 16-bit PNG unchanged -> (H, W) uint16 (the default imread flag would
    silently convert to 8 bit). Raises ``FrameDropped`` ("unreadable depth", "truncated or corrupt
    depth") on failure."""
    arr = read_image_file(path, cv2.IMREAD_UNCHANGED, "depth")
    if arr.dtype != np.uint16 or arr.ndim != 2:
        raise FrameDropped("unreadable depth")
    return arr



def find_dirs_with(root: str | os.PathLike, filename: str, max_depth: int = 6) -> list[Path]:
    """Folders at most ``max_depth`` levels below ``root`` (root included) that contain ``filename``,
    sorted. A folder holding the file is not searched further, so the (huge) frame folders inside a
    scene are never listed."""
    found, stack = [], [(Path(root), 0)]
    while stack:
        folder, depth = stack.pop()
        if (folder / filename).is_file():
            found.append(folder)
            continue
        if depth >= max_depth:
            continue
        try:
            with os.scandir(folder) as it:
                stack.extend((Path(e.path), depth + 1) for e in it if e.is_dir(follow_symlinks=True))
        except OSError:
            continue
    return sorted(found)


# --------------------------------------------------------------------------------------------
