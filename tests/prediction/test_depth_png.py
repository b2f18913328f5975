"""The 16-bit depth PNGs of `depthpe predict` (depthpe.prediction.files.write_depth_png and
read_depth_png): the range kept to half a step, and an all-zero map with a usable sidecar."""

import json

import numpy as np
import pytest

from depthpe.prediction.files import read_depth_png, write_depth_png


def test_a_depth_png_keeps_its_range_to_half_a_step(tmp_path):
    depth = np.array([[0.0, 0.5], [1.25, 40.0]])
    scale = write_depth_png(tmp_path / "d.png", depth, "m")
    assert scale == 40.0 / 65535  # the largest depth is the largest 16-bit value
    back = read_depth_png(tmp_path / "d.png")
    assert back[0, 0] == 0 and back[1, 1] == pytest.approx(40.0) and np.abs(back - depth).max() <= scale / 2


def test_an_all_zero_map_has_scale_one_and_reads_back_as_zeros(tmp_path):
    assert write_depth_png(tmp_path / "z.png", np.zeros((2, 3)), "m") == 1.0  # a usable scale, never 0
    side = json.loads((tmp_path / "z.json").read_text())
    assert side == {"scale": 1.0, "unit": "m", "invalid": 0, "formula": "depth = png_value * scale"}
    assert (read_depth_png(tmp_path / "z.png") == 0).all()
