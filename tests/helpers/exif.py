"""JPEGs with an EXIF orientation, as phones write them, for the orientation tests."""

from __future__ import annotations

import struct

import cv2
import numpy as np


PORTRAIT = 6  # EXIF orientation: rotate 90 degrees clockwise to display


def jpeg_with_orientation(rgb: np.ndarray, orientation: int, quality: int = 98) -> bytes:
    """A JPEG of ``rgb`` (H, W, 3) in its stored grid with an APP1 Exif segment holding only the
    Orientation tag (0x0112, SHORT), inserted after SOI as cameras write it."""
    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [int(cv2.IMWRITE_JPEG_QUALITY), quality])
    assert ok
    ifd = struct.pack(">H", 1) + struct.pack(">HHIHH", 0x0112, 3, 1, orientation, 0) + struct.pack(">I", 0)
    payload = b"Exif\0\0" + b"MM\0\x2a" + struct.pack(">I", 8) + ifd
    jpeg = buf.tobytes()
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload + jpeg[2:]
