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
"""

from __future__ import annotations

import zlib

import cv2
import numpy as np

from .validation import MAX_FRAME_SIDE

__all__ = ["ImageBytesError", "inspect_image_bytes", "decode_image_bytes"]

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
    """``inspect_image_bytes`` then ``cv2.imdecode(data, flags)`` (OpenCV channel order: BGR);
    raises ``ImageBytesError``, or ``ValueError`` when OpenCV cannot decode the bytes."""
    inspect_image_bytes(data, max_side)
    out = cv2.imdecode(np.frombuffer(data, np.uint8) if isinstance(data, bytes) else np.asarray(data, np.uint8),
                       flags)
    if out is None:
        raise ValueError("image bytes could not be decoded")
    return out
