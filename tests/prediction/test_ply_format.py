"""``points.ply`` of `depthpe predict` read byte by byte, without plyfile: the header declares the
columns float32 x, y, z then uint8 red, green, blue (docs/predict.md), and each column holds the
coordinate or channel of its name. Other PLY readers (MeshLab, Open3D, CloudCompare) rely on both."""

from __future__ import annotations

import numpy as np

from depthpe.prediction.files import read_ply, write_ply

COLUMNS = ["property float x", "property float y", "property float z",
           "property uchar red", "property uchar green", "property uchar blue"]


def _parse_binary_ply(data: bytes) -> tuple[list[str], np.ndarray]:
    """(header lines, vertex records with fields x y z red green blue) of a binary PLY, by hand."""
    head, body = data.split(b"end_header\n", 1)
    header = head.decode("ascii").splitlines()
    assert header[0] == "ply"
    order = {"format binary_little_endian 1.0": "<", "format binary_big_endian 1.0": ">"}[header[1]]
    count = int(next(line for line in header if line.startswith("element vertex ")).split()[-1])
    dtype = np.dtype([(a, order + "f4") for a in "xyz"] + [(c, "u1") for c in ("red", "green", "blue")])
    assert len(body) == count * dtype.itemsize
    return header, np.frombuffer(body, dtype, count)


def test_ply_columns_are_x_y_z_red_green_blue(tmp_path):
    rng = np.random.default_rng(0)
    points = rng.normal(size=(7, 3)) * np.array([1.0, 10.0, 100.0])  # columns of different sizes
    colors = rng.integers(0, 256, size=(7, 3), dtype=np.uint8)
    path = write_ply(tmp_path / "points.ply", points, colors)
    header, v = _parse_binary_ply(path.read_bytes())
    assert [line for line in header if line.startswith("property")] == COLUMNS
    np.testing.assert_array_equal(np.stack([v["x"], v["y"], v["z"]], 1), points.astype(np.float32))
    np.testing.assert_array_equal(np.stack([v["red"], v["green"], v["blue"]], 1), colors)
    back_points, back_colors = read_ply(path)
    np.testing.assert_array_equal(back_points, points.astype(np.float32).astype(np.float64))
    np.testing.assert_array_equal(back_colors, colors)
