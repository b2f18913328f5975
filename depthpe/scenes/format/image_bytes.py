"""Strict decoding of encoded JPEG and PNG images (scene files, converters, ``depthpe check``).

OpenCV decodes a truncated JPEG without an error (libjpeg only warns and fills the missing part
with grey), so the bytes are checked before they are decoded:

* JPEG: starts with SOI (FF D8), has a frame header (SOF) and an end-of-image marker (FF D9) after
  its last start-of-scan marker (FF DA). Inside compressed data FF is always followed by 00 or a
  restart marker, so an EOI after the last scan means the scan data is complete; bytes after the
  EOI (some cameras append data) are allowed.
* PNG: the signature, then a chain of chunks each complete and with a correct CRC, up to IEND.

The size in the header (SOF or IHDR) is checked against ``MAX_FRAME_SIDE`` before the decoder
allocates anything. Every failure is an ``ImageBytesError`` whose ``kind`` says what is wrong:
``"truncated"``, ``"corrupt"``, ``"format"`` (neither JPEG nor PNG) or ``"size"``.

**Pixel grid.** Every decode here returns the pixels in the grid they are stored in: an EXIF
orientation tag (phone photos taken in portrait: the sensor's landscape grid plus "rotate by 90")
is never applied (``cv2.IMREAD_IGNORE_ORIENTATION``), because cameras (COLMAP, a cameras JSON, a
phone's own intrinsics) describe the stored sensor grid, and depth maps are written in it too.
``decode_rgb`` is the reader of users' images (converters, ``predict``); it also returns the tag
it ignored, and ``orientation_notes`` turns those tags into the one line a command prints.
"""

from __future__ import annotations

import zlib

import cv2
import numpy as np

from .limits import MAX_FRAME_SIDE

__all__ = ["ImageBytesError", "inspect_image_bytes", "decode_image_bytes", "decode_rgb", "exif_orientation",
           "orientation_notes"]

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# SOF0-SOF15 except DHT (C4), JPG (C8) and DAC (CC): the markers that hold the frame size
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


class ImageBytesError(ValueError):
    """Encoded image bytes that must not be decoded; ``kind`` is "truncated", "corrupt", "format" or
    "size"."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _jpeg_size(data: bytes) -> tuple[int, int]:
    """(height, width) from the frame header of a JPEG; raises ImageBytesError."""
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            raise ImageBytesError("corrupt", f"corrupt JPEG: no marker at byte {i}")
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            i += 2
            continue
        if marker in (0xD9, 0xDA):
            raise ImageBytesError("corrupt", "corrupt JPEG: image data before the frame header")
        if marker in _SOF_MARKERS:
            if i + 9 > len(data):
                break
            height, width = int.from_bytes(data[i + 5:i + 7], "big"), int.from_bytes(data[i + 7:i + 9], "big")
            if not height or not width:
                raise ImageBytesError("corrupt", f"corrupt JPEG: frame header claims {height}x{width} pixels")
            return height, width
        i += 2 + int.from_bytes(data[i + 2:i + 4], "big")
    raise ImageBytesError("truncated", "truncated JPEG: the file ends before the frame header")


def _check_jpeg(data: bytes) -> tuple[int, int]:
    """(height, width) of a JPEG with a frame header, image data and an end-of-image marker after it."""
    size = _jpeg_size(data)
    if data.find(b"\xff\xda") < 0:
        raise ImageBytesError("truncated", "truncated JPEG: no image data (start-of-scan marker)")
    if not data.endswith(b"\xff\xd9"):  # bytes after the end marker, or cut off: search (slower)
        if data.find(b"\xff\xd9", data.rfind(b"\xff\xda") + 2) < 0:
            raise ImageBytesError("truncated", "truncated JPEG: no end-of-image marker (FF D9) after the image data")
    return size


def _check_png(data: bytes) -> tuple[int, int]:
    """(height, width) of a PNG whose chunks are all complete with correct CRCs, up to IEND."""
    view, pos, size = memoryview(data), len(_PNG_SIGNATURE), None
    while True:
        if pos + 12 > len(data):
            raise ImageBytesError("truncated", "truncated PNG: the file ends before the IEND chunk")
        length = int.from_bytes(data[pos:pos + 4], "big")
        kind = bytes(view[pos + 4:pos + 8])
        end = pos + 12 + length
        if end > len(data):
            raise ImageBytesError("truncated", f"truncated PNG: the {kind!r} chunk is cut off")
        if zlib.crc32(view[pos + 4:pos + 8 + length]) != int.from_bytes(data[end - 4:end], "big"):
            raise ImageBytesError("corrupt", f"corrupt PNG: CRC mismatch in the {kind!r} chunk")
        if size is None:
            if kind != b"IHDR" or length < 8:
                raise ImageBytesError("corrupt", "corrupt PNG: the first chunk is not IHDR")
            size = (int.from_bytes(data[pos + 12:pos + 16], "big"), int.from_bytes(data[pos + 8:pos + 12], "big"))
        if kind == b"IEND":
            return size
        pos = end


def inspect_image_bytes(data, max_side: int = MAX_FRAME_SIDE) -> tuple[str, int, int]:
    """Check encoded image bytes (bytes or a 1-D uint8 array) without decoding them ->
    ``(format "jpeg" | "png", height, width)``; raises ``ImageBytesError`` when they are truncated,
    corrupt, not a JPEG/PNG, or claim a side longer than ``max_side``."""
    data = data if isinstance(data, bytes) else np.ascontiguousarray(data, dtype=np.uint8).tobytes()
    if data.startswith(b"\xff\xd8"):
        fmt, (height, width) = "jpeg", _check_jpeg(data)
    elif data.startswith(_PNG_SIGNATURE):
        fmt, (height, width) = "png", _check_png(data)
    elif not data:
        raise ImageBytesError("truncated", "empty image (0 bytes)")
    else:
        raise ImageBytesError("format", "not a JPEG or PNG image")
    if height > max_side or width > max_side:
        raise ImageBytesError("size", f"image claims {height}x{width} pixels (HxW; at most {max_side} per side)")
    return fmt, height, width


def decode_image_bytes(data, flags: int = cv2.IMREAD_COLOR, max_side: int = MAX_FRAME_SIDE) -> np.ndarray:
    """``inspect_image_bytes`` then ``cv2.imdecode(data, flags | IMREAD_IGNORE_ORIENTATION)``
    (OpenCV channel order: BGR; the stored pixel grid, EXIF orientation not applied: module
    docstring); raises ``ImageBytesError``, or ``ValueError`` when OpenCV cannot decode the bytes."""
    inspect_image_bytes(data, max_side)
    out = cv2.imdecode(np.frombuffer(data, np.uint8) if isinstance(data, bytes) else np.asarray(data, np.uint8),
                       flags | cv2.IMREAD_IGNORE_ORIENTATION)
    if out is None:
        raise ValueError("image bytes could not be decoded")
    return out


_IMREAD_RGB = getattr(cv2, "IMREAD_COLOR_RGB", None)  # OpenCV >= 4.10: the decoder writes RGB directly


def decode_rgb(data, max_side: int = MAX_FRAME_SIDE) -> tuple[np.ndarray, int]:
    """The reader of users' images (JPEG/PNG bytes) -> ((H, W, 3) uint8 RGB in the stored pixel grid,
    the EXIF orientation tag that was not applied: 1 = none or upright, 2-8 otherwise). Grey images
    are expanded, alpha dropped, 16 bit scaled to 8 (``IMREAD_COLOR``). Raises like
    ``decode_image_bytes``."""
    if _IMREAD_RGB is not None:
        rgb = decode_image_bytes(data, _IMREAD_RGB, max_side)
    else:
        rgb = cv2.cvtColor(decode_image_bytes(data, cv2.IMREAD_COLOR, max_side), cv2.COLOR_BGR2RGB)
    return rgb, exif_orientation(data)


def exif_orientation(data) -> int:
    """The EXIF orientation tag (0x0112) of JPEG/PNG bytes where a decoder would apply it (a JPEG's
    APP1 "Exif" segment before the image data, a PNG's eXIf chunk before IDAT) -> 1..8; 1 when there
    is none or it is unreadable. The TIFF block is parsed by Pillow's ``Image.Exif``; it is found by
    hand because Pillow's ``PngImageFile.getexif`` decodes the whole image when a PNG has no eXIf
    chunk in its header."""
    data = data if isinstance(data, bytes) else np.ascontiguousarray(data, dtype=np.uint8).tobytes()
    block = _jpeg_exif_block(data) if data.startswith(b"\xff\xd8") else _png_exif_block(data)
    if not block:
        return 1
    from PIL import Image

    try:
        exif = Image.Exif()
        exif.load(block)
        value = int(exif.get(0x0112, 1))
    except Exception:  # noqa: BLE001 - a malformed EXIF block is no orientation (decoders ignore it too)
        return 1
    return value if 1 <= value <= 8 else 1


def _jpeg_exif_block(data: bytes) -> bytes | None:
    """The payload of the first APP1 segment that starts with ``Exif\\0\\0`` before the first
    start-of-scan marker, or None."""
    i = 2
    while i + 4 <= len(data) and data[i] == 0xFF:
        marker = data[i + 1]
        if marker == 0xFF or marker == 0x01 or 0xD0 <= marker <= 0xD8:
            i += 1 if marker == 0xFF else 2
            continue
        if marker in (0xD9, 0xDA):
            return None
        end = i + 2 + int.from_bytes(data[i + 2:i + 4], "big")
        if marker == 0xE1 and data[i + 4:i + 10] == b"Exif\0\0":
            return data[i + 4:end]
        i = end
    return None


def _png_exif_block(data: bytes) -> bytes | None:
    """The data of a PNG's eXIf chunk before IDAT, or None (also for bytes that are not a PNG)."""
    pos = len(_PNG_SIGNATURE)
    while data.startswith(_PNG_SIGNATURE) and pos + 8 <= len(data):
        length, kind = int.from_bytes(data[pos:pos + 4], "big"), data[pos + 4:pos + 8]
        if kind in (b"IDAT", b"IEND"):
            return None
        if kind == b"eXIf":
            return data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return None


def orientation_notes(count: int) -> list[str]:
    """The line a command prints once about ``count`` images whose EXIF orientation tag was not
    applied (``decode_rgb``): a list with that line, empty when ``count`` is 0."""
    if not count:
        return []
    return [f"EXIF orientation ignored for {count} image(s): images are read in their stored pixel grid, "
            "the one the cameras describe (depth and K are in it too; docs/data.md)"]
