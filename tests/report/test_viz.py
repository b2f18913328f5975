"""Tests for depthpe.report.viz: shapes, dtypes, invalid pixels black, shared range, PNG round trip."""

import cv2
import numpy as np
import pytest
import torch

from depthpe.report.viz import colorize_depth, depth_panel, depth_range, error_map, save_png, views_grid


def _depth(h=5, w=6):
    d = np.linspace(1.0, 4.0, h * w).reshape(h, w)
    valid = np.ones((h, w), dtype=bool)
    valid[0, 0] = False
    d[1, 1] = 0.0  # invalid by GT rule
    return d, valid


def test_colorize_depth_shape_dtype_invalid_black():
    d, valid = _depth()
    d[2, 2] = np.nan
    img = colorize_depth(d, valid)
    assert img.shape == (5, 6, 3) and img.dtype == np.uint8
    for y, x in ((0, 0), (1, 1), (2, 2)):
        assert (img[y, x] == 0).all()
    assert img[valid & (d > 0) & np.isfinite(d)].max(axis=1).min() > 0  # turbo has no black
    # explicit range: values at vmin / vmax get the colour map's end colours
    a = colorize_depth(np.array([[1.0, 3.0]]), vmin=1.0, vmax=3.0, cmap="magma")
    b = colorize_depth(np.array([[0.5, 9.0]]), vmin=1.0, vmax=3.0, cmap="magma")  # clipped
    assert (a == b).all() and not (a[0, 0] == a[0, 1]).all()


def test_depth_range_robust_and_degenerate():
    lo, hi = depth_range(np.arange(1, 101, dtype=float))
    assert 2 < lo < 4 and 97 < hi < 99
    assert depth_range(np.zeros((3, 3))) == (0.0, 1.0)
    lo, hi = depth_range(np.full((3, 3), 2.0))
    assert hi > lo


def test_error_map_zero_error_and_invalid():
    d, valid = _depth()
    e = error_map(d, d, valid)
    assert e.shape == (5, 6, 3) and e.dtype == np.uint8
    assert (e[0, 0] == 0).all() and (e[1, 1] == 0).all()
    e2 = error_map(d * 1.5, d, valid)  # AbsRel 0.5 > vmax 0.2 -> top colour everywhere valid
    m = valid & (d > 0)
    assert (e[m] == e[2, 3]).all() and (e2[m] == e2[2, 3]).all() and not (e[2, 3] == e2[2, 3]).all()


def test_depth_panel_layout_and_shared_range():
    d, valid = _depth()
    rgb = np.random.default_rng(0).uniform(size=(5, 6, 3))
    panel = depth_panel(rgb, d, d.copy(), valid)
    assert panel.shape == (5, 24, 3) and panel.dtype == np.uint8
    assert np.array_equal(panel[:, :6], (rgb * 255 + 0.5).astype(np.uint8))
    gt_part, pred_part = panel[:, 6:12], panel[:, 12:18]
    m = valid & (d > 0)
    assert np.array_equal(gt_part[m], pred_part[m])  # same colours for the same depth
    assert (gt_part[~m] == 0).all()
    # CHW float and uint8 images and torch tensors are accepted
    chw = torch.from_numpy(rgb).permute(2, 0, 1)
    assert np.array_equal(depth_panel(chw, torch.from_numpy(d), d, valid), panel)
    with pytest.raises(ValueError, match="share"):
        depth_panel(rgb, d, d[:, :5], valid)


def test_views_grid_hwc_and_chw():
    d, valid = _depth()
    gt = np.stack([d, 2 * d, 3 * d])
    images = np.zeros((3, 3, 5, 6), dtype=np.float32)
    grid = views_grid(images, gt, gt, np.stack([valid] * 3))
    assert grid.shape == (15, 24, 3) and grid.dtype == np.uint8
    chw = views_grid(images, gt, gt, np.stack([valid] * 3), max_views=2, channels_first=True)
    assert chw.shape == (3, 10, 24)
    # max_views=2 is the grid of the first two views (colour range from those views' GT)
    assert np.array_equal(chw.transpose(1, 2, 0), views_grid(images[:2], gt[:2], gt[:2], np.stack([valid] * 2)))
    # one colour range for all views: view 1 (twice as deep) is coloured differently from view 0
    assert not np.array_equal(grid[0:5, 6:12], grid[5:10, 6:12])


def test_save_png_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, size=(7, 9, 3), dtype=np.uint8)
    path = save_png(tmp_path / "sub" / "x.png", rgb)
    back = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)[..., ::-1]
    assert np.array_equal(back, rgb)
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.png"]  # no temp file left
    gray16 = rng.integers(0, 65536, size=(4, 5), dtype=np.uint16)
    assert np.array_equal(cv2.imread(str(save_png(tmp_path / "g.png", gray16)), cv2.IMREAD_UNCHANGED), gray16)
    with pytest.raises(ValueError, match="uint8"):
        save_png(tmp_path / "bad.png", rgb.astype(np.float32))
