"""The depth files of an own capture (``depthpe.scenes.convert.folder.read_depth_file``): what is read
and what drops the frame as "unreadable depth" (counted in the summary under that reason)."""

from __future__ import annotations

import pathlib

import cv2
import numpy as np
import pytest

from depthpe.scenes.convert.common import FrameDropped
from depthpe.scenes.convert.folder import read_depth_file


class _TouchOnLoad:
    """Unpickling this object creates the file ``marker``: a stand-in for a malicious pickle."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return pathlib.Path.touch, (pathlib.Path(self.marker),)


def test_a_pickle_in_a_depth_npy_is_never_run(tmp_path):
    marker = tmp_path / "ran"
    arr = np.empty((2, 2), dtype=object)
    arr[:] = [[_TouchOnLoad(marker)] * 2] * 2
    np.save(tmp_path / "d.npy", arr, allow_pickle=True)
    with pytest.raises(FrameDropped, match="^unreadable depth$"):
        read_depth_file(tmp_path / "d.npy", None)
    assert not marker.exists()


@pytest.mark.parametrize("array", [np.ones((2, 3, 4), np.float32), np.ones((5,), np.float32),
                                   np.full((3, 4), "a"), np.zeros((3, 4), complex)])
def test_a_npy_that_is_no_2d_real_map_is_unreadable(tmp_path, array):
    np.save(tmp_path / "d.npy", array)
    with pytest.raises(FrameDropped, match="^unreadable depth$"):
        read_depth_file(tmp_path / "d.npy", None)


def test_a_npy_with_single_dims_and_integers_is_read_and_scaled(tmp_path):
    np.save(tmp_path / "d.npy", np.arange(12, dtype=np.uint16).reshape(1, 3, 4, 1))
    got = read_depth_file(tmp_path / "d.npy", None, npy_factor=0.5)
    assert got.dtype == np.float32 and np.array_equal(got, np.arange(12).reshape(3, 4) * np.float32(0.5))


@pytest.mark.parametrize("image", [np.full((3, 4), 200, np.uint8), np.full((3, 4, 3), 2000, np.uint16)])
def test_a_png_depth_must_be_16_bit_single_channel(tmp_path, image):
    cv2.imwrite(str(tmp_path / "d.png"), image)
    with pytest.raises(FrameDropped, match="^unreadable depth$"):
        read_depth_file(tmp_path / "d.png", None)


@pytest.mark.parametrize("scale, metres", [(None, 2.5), (5000.0, 0.5)])
def test_a_16_bit_png_is_divided_by_the_depth_scale(tmp_path, scale, metres):
    cv2.imwrite(str(tmp_path / "d.png"), np.full((3, 4), 2500, np.uint16))
    got = read_depth_file(tmp_path / "d.png", scale)
    assert got.dtype == np.float32 and got.shape == (3, 4) and np.allclose(got, metres, rtol=0, atol=1e-7)
