"""The JPEG marker walk and the PNG chunk chain of ``image_bytes``: what a valid file may hold
before its frame header (fill bytes, standalone markers) is accepted, and each way the header or
the first chunk can be wrong is refused with its own message before anything is decoded."""

from __future__ import annotations

import re
import struct
import zlib

import numpy as np
import pytest

from depthpe.scenes.format.image_bytes import ImageBytesError, decode_image_bytes, inspect_image_bytes
from depthpe.scenes.format.scene_file import encode_image

SOI, EOI, SOS, SOF0 = b"\xff\xd8", b"\xff\xd9", b"\xff\xda", b"\xff\xc0"


@pytest.fixture(scope="module")
def image() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (24, 40, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def jpeg(image) -> bytes:
    return encode_image(image).tobytes()


def _chunk(kind: bytes, payload: bytes) -> bytes:
    """One PNG chunk with its length and correct CRC."""
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def test_fill_bytes_and_standalone_markers_before_the_frame_header_are_valid(jpeg):
    filled = SOI + b"\xff\xff\xff" + jpeg[2:]  # fill bytes before the next marker
    assert inspect_image_bytes(filled) == ("jpeg", 24, 40)
    np.testing.assert_array_equal(decode_image_bytes(filled), decode_image_bytes(jpeg))
    assert inspect_image_bytes(SOI + b"\xff\x01" + jpeg[2:]) == ("jpeg", 24, 40)  # TEM: no length field


@pytest.mark.parametrize("make, kind, message", [
    (lambda j: SOI + b"\x00" + j[2:], "corrupt", "corrupt JPEG: no marker at byte 2"),
    (lambda j: SOI + SOS + j[2:], "corrupt", "corrupt JPEG: image data before the frame header"),
    (lambda j: SOI + EOI, "truncated", "truncated JPEG: the file ends before the frame header"),
    (lambda j: j[:j.find(SOF0) + 8], "truncated", "truncated JPEG: the file ends before the frame header"),
    (lambda j: j[:j.find(SOF0) + 5] + b"\x00\x00" + j[j.find(SOF0) + 7:], "corrupt",
     "corrupt JPEG: frame header claims 0x40 pixels"),
    (lambda j: j[:j.find(SOS)] + EOI, "truncated", "truncated JPEG: no image data (start-of-scan marker)"),
])
def test_a_jpeg_header_that_cannot_be_right_is_refused_by_kind(jpeg, make, kind, message):
    with pytest.raises(ImageBytesError, match=re.escape(message)) as err:
        inspect_image_bytes(make(jpeg))
    assert err.value.kind == kind


def test_a_png_whose_first_chunk_is_not_ihdr_is_corrupt(image):
    png = encode_image(image, "png").tobytes()
    signature = png[:8]
    shuffled = signature + _chunk(b"tEXt", b"comment\x00hello") + png[8:]
    with pytest.raises(ImageBytesError, match="corrupt PNG: the first chunk is not IHDR") as err:
        inspect_image_bytes(shuffled)
    assert err.value.kind == "corrupt"
    assert inspect_image_bytes(png[:8 + 25] + _chunk(b"tEXt", b"a\x00b") + png[8 + 25:]) == ("png", 24, 40)


def test_bytes_that_pass_the_checks_but_do_not_decode_are_a_value_error(jpeg):
    """A well-formed marker structure around scan data OpenCV cannot use: ValueError, not None."""
    header = jpeg[:jpeg.find(SOS)]
    broken = header + SOS + b"\x00\x03\x00" + EOI  # a start-of-scan segment with no components
    assert inspect_image_bytes(broken) == ("jpeg", 24, 40)
    with pytest.raises(ValueError, match="image bytes could not be decoded"):
        decode_image_bytes(broken)
