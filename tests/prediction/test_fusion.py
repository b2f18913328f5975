"""Multi-view consistency fusion (depthpe.prediction.fusion, issue 44 item 3): planted outlier depths
are removed and true ones kept; the fused point of a consistent pixel is the true point; the track of
a point names the views that agree with it."""

import numpy as np

from depthpe.scenes.synth import generate_scene
from depthpe.prediction.fusion import check_source, consistency_masks, fuse_view
from depthpe.prediction.result import FusionSettings, ImagePrediction, PredictionResult, fuse_result

H, W = 30, 40
K = np.array([[40.0, 0, (W - 1) / 2], [0, 40.0, (H - 1) / 2], [0, 0, 1]])


def _plane_views(shifts=(0.0, 0.3, -0.3), depth=5.0):
    """Cameras translated along x looking at the plane z = ``depth``: (depth maps, K, w2c)."""
    w2c = np.stack([np.c_[np.eye(3), [-s, 0, 0]] for s in shifts])
    return [np.full((H, W), depth) for _ in shifts], np.stack([K] * len(shifts)), w2c


def _planted(shape, count, seed=0):
    mask = np.zeros(shape, bool)
    mask.ravel()[np.random.default_rng(seed).choice(mask.size, count, replace=False)] = True
    return mask


def test_planted_outliers_are_removed_and_true_depth_kept_on_a_plane():
    depth, Ks, w2c = _plane_views()
    out = _planted((H, W), 40)
    depth[0] = np.where(out, depth[0] * 0.8, depth[0])  # 20 % too near: floaters
    keep = consistency_masks(depth, Ks, w2c, min_views=2)[0]
    assert not (keep & out).any()
    # every true pixel that lands inside both other views is kept: the shift 0.3 at depth 5 is 2.4 px,
    # so column c lands at c - 2.4 and c + 2.4, whose nearest pixels are inside for c = 2 .. W - 3
    inside = np.zeros((H, W), bool)
    inside[:, 2:W - 2] = True
    np.testing.assert_array_equal(keep, inside & ~out)


def test_pixel_threshold_and_source_track():
    depth, Ks, w2c = _plane_views((0.0, 0.3))
    check = check_source(depth[0], Ks[0], w2c[0], depth[1], Ks[1], w2c[1], pixel_threshold=0.5)
    row, col = 10, 20
    assert check.ok[row, col]
    np.testing.assert_allclose(check.uv[row, col], [col - 40 * 0.3 / 5, row])  # the pixel's place in view 1
    np.testing.assert_allclose(check.points[row, col], [(col - (W - 1) / 2) / 8, (row - (H - 1) / 2) / 8, 5])


def test_synthetic_scene_outliers_removed_true_depth_kept():
    """True depth of a rendered scene with 5 % of view 0's pixels pushed 30 % away: none of them
    survives; the true pixels of view 0 keep exactly the mask they have without the outliers."""
    sc = generate_scene(11, views=4, height=H, width=W)
    depth = sc["depth"].astype(np.float64)
    clean = consistency_masks(depth, sc["K"], sc["w2c"], min_views=1)
    out = _planted((H, W), 60) & (depth[0] > 0)
    planted = depth.copy()
    planted[0][out] *= 1.3
    keep = consistency_masks(planted, sc["K"], sc["w2c"], min_views=1)
    assert out.sum() > 40 and not (keep[0] & out).any()
    np.testing.assert_array_equal(keep[0] & ~out, clean[0] & ~out)
    assert (clean[0] & ~out).sum() > 0.5 * ((depth[0] > 0) & ~out).sum()


def test_fuse_result_tracks_and_merge():
    depth, Ks, w2c = _plane_views()
    names = ["a.png", "b.png", "c.png"]
    image = np.zeros((H, W, 3), np.uint8)
    frames = [ImagePrediction(n, depth[i].astype(np.float32), np.full((H, W), 2.0, np.float32), image, Ks[i], w2c[i],
                              names) for i, n in enumerate(names)]
    result = PredictionResult(frames, (H, W), "cameras", "all", 3)
    cloud, masks = fuse_result(result, fusion=FusionSettings(min_views=2))
    assert len(cloud.points) == sum(int(m.sum()) for m in masks) and masks[0][:, 3:W - 3].all()
    np.testing.assert_allclose(cloud.points[:, 2], 5.0)
    # the point of view 0's pixel (15, 20) is seen by all three views (points are in row-major pixel order)
    p = np.flatnonzero(masks[0].ravel()).tolist().index(15 * W + 20)
    assert set(cloud.obs_frame[cloud.obs_point == p]) == {0, 1, 2}
    unfused, _ = fuse_result(result)
    assert len(unfused.points) == 3 * H * W and (np.bincount(unfused.obs_point) == 1).all()


def test_min_views_zero_keeps_every_pixel_with_depth_and_none_without():
    depth, Ks, w2c = _plane_views()
    depth[0][5, 5] = 0.0
    depth[1][:, :] = 3.0  # view 1 disagrees everywhere; view 2 agrees on columns 0 .. W - 3
    fused = fuse_view(0, depth, Ks, w2c, [1, 2], min_views=0)
    expected = np.ones((H, W), bool)
    expected[5, 5] = False
    np.testing.assert_array_equal(fused.keep, expected)
    assert fused.count[5, 5] == 0 and fused.count[10, 20] == 1 and fused.count[10, W - 1] == 0
    np.testing.assert_array_equal(fuse_view(0, depth, Ks, w2c, [1, 2], min_views=1).keep, expected & (fused.count >= 1))


def test_the_fused_point_averages_only_the_agreeing_sources():
    depth, Ks, w2c = _plane_views()
    depth[1] = np.full((H, W), 3.0)  # view 1 disagrees (20 % nearer everywhere)
    depth[2] = np.full((H, W), 5.02)  # view 2 agrees (0.4 %) with its own, slightly farther points
    fused = fuse_view(0, depth, Ks, w2c, [1, 2], min_views=1)
    row, col = 10, 20
    own = np.array([(col - (W - 1) / 2) / 8, (row - (H - 1) / 2) / 8, 5.0])
    assert fused.count[row, col] == 1 and fused.checks[1].ok[row, col] and not fused.checks[0].ok[row, col]
    np.testing.assert_allclose(fused.points[row, col], (own + fused.checks[1].points[row, col]) / 2)
    assert abs(fused.points[row, col, 2] - 5.01) < 1e-9  # (5 + 5.02) / 2


def test_the_relative_depth_threshold_includes_its_boundary():
    # same camera twice: the reference's z is its own depth, 5, against the source's 4: |5 - 4| = 0.25 * 4
    depth, Ks, w2c = _plane_views((0.0, 0.0))
    check = check_source(depth[0], Ks[0], w2c[0], np.full((H, W), 4.0), Ks[1], w2c[1], rel_threshold=0.25)
    assert check.ok.all()
    assert not check_source(depth[0], Ks[0], w2c[0], np.full((H, W), 4.0), Ks[1], w2c[1], rel_threshold=0.24).ok.any()
