"""The EXIF orientation tag as a decoder would apply it (``data.format.image_bytes.exif_orientation``):
a PNG's eXIf chunk counts only before the image data (IDAT), as the PNG specification has it, and a
tag outside 1..8 (0, 9: written by some broken software) is no orientation (1)."""

from __future__ import annotations

import struct
import zlib

import cv2
import numpy as np
import pytest

from depthpe.scenes.format.image_bytes import decode_rgb, exif_orientation
from tests.helpers.exif import PORTRAIT, jpeg_with_orientation

RGB = np.random.default_rng(0).integers(0, 256, (6, 8, 3), dtype=np.uint8)
_IHDR_END = 8 + 25  # signature, then the IHDR chunk (13 bytes of data + length, type, CRC)


def _tiff_block(orientation: int) -> bytes:
    """The TIFF block (from the byte-order mark on) of ``jpeg_with_orientation``'s APP1 segment."""
    jpeg = jpeg_with_orientation(RGB, orientation)
    assert jpeg[2:4] == b"\xff\xe1" and jpeg[6:12] == b"Exif\0\0"
    return jpeg[12:4 + int.from_bytes(jpeg[4:6], "big")]


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_with_exif(orientation: int, after_idat: bool) -> bytes:
    """A PNG of RGB with an eXIf chunk holding ``orientation``, right after IHDR or just before IEND."""
    ok, buf = cv2.imencode(".png", cv2.cvtColor(RGB, cv2.COLOR_RGB2BGR))
    assert ok
    png, exif = buf.tobytes(), _chunk(b"eXIf", _tiff_block(orientation))
    assert png[12:16] == b"IHDR" and png[-8:-4] == b"IEND"
    return png[:-12] + exif + png[-12:] if after_idat else png[:_IHDR_END] + exif + png[_IHDR_END:]


def test_a_png_exif_chunk_before_the_image_data_is_read():
    data = png_with_exif(PORTRAIT, after_idat=False)
    rgb, tag = decode_rgb(data)
    assert tag == PORTRAIT and exif_orientation(data) == PORTRAIT and np.array_equal(rgb, RGB)


def test_a_png_exif_chunk_after_the_image_data_is_ignored():
    data = png_with_exif(PORTRAIT, after_idat=True)
    rgb, tag = decode_rgb(data)  # a valid PNG: every chunk complete with its CRC
    assert tag == 1 and exif_orientation(data) == 1 and np.array_equal(rgb, RGB)


@pytest.mark.parametrize("tag, expected", [(0, 1), (9, 1), (255, 1), (8, 8), (2, 2)])
def test_a_jpeg_orientation_outside_one_to_eight_is_none(tag, expected):
    data = jpeg_with_orientation(RGB, tag)
    assert exif_orientation(data) == expected and decode_rgb(data)[1] == expected
