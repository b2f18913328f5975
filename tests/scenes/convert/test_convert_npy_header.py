"""A depth ``.npy`` is judged by its header before it is read (reliability IV item 13): a header that
claims a huge array, or more bytes than the file holds, drops the frame without allocating it."""

import numpy as np
import pytest
from numpy.lib import format as npy_format

from depthpe.scenes.convert.common import FrameDropped
from depthpe.scenes.convert.folder import read_depth_file


def _npy_with_header(path, shape, payload=b"", dtype="<f4"):
    with open(path, "wb") as f:
        npy_format.write_array_header_1_0(f, {"descr": dtype, "fortran_order": False, "shape": shape})
        f.write(payload)
    return path


def test_a_header_claiming_a_huge_array_drops_the_frame_before_any_allocation(tmp_path, monkeypatch):
    path = _npy_with_header(tmp_path / "huge.npy", (100_000, 100_000))
    monkeypatch.setattr(np, "load", lambda *a, **k: pytest.fail("np.load must not run for a huge header"))
    with pytest.raises(FrameDropped, match="depth larger than 8192 pixels on a side"):
        read_depth_file(path, None)


def test_a_header_claiming_more_bytes_than_the_file_holds_is_truncated(tmp_path):
    path = _npy_with_header(tmp_path / "cut.npy", (40, 30), payload=b"\0" * (40 * 30 * 4 - 1))
    with pytest.raises(FrameDropped, match="truncated or corrupt depth"):
        read_depth_file(path, None)


def test_an_object_array_and_a_good_map(tmp_path):
    with pytest.raises(FrameDropped, match="unreadable depth"):
        read_depth_file(_npy_with_header(tmp_path / "obj.npy", (2, 2), dtype="|O"), None)
    depth = np.arange(12, dtype=np.float64).reshape(3, 4)
    np.save(tmp_path / "ok.npy", depth)
    got = read_depth_file(tmp_path / "ok.npy", None)
    assert got.dtype == np.float32 and np.array_equal(got, depth.astype(np.float32))
