"""RMVD metrics (depthpe.rmvd.metrics) against hand-computed answers."""

import math

import numpy as np

from depthpe.rmvd import metrics


def test_abs_rel_and_inliers_skip_pixels_without_gt():
    gt = np.array([[0.0, 2.0], [4.0, 5.0]])
    pred = np.array([[9.0, 2.2], [4.0, 5.2]])  # rel errors 0.1, 0, 0.04 -> mean 0.14 / 3
    assert math.isclose(metrics.abs_rel(pred, gt), 100 * 0.14 / 3)
    assert math.isclose(metrics.inlier_ratio(pred, gt), 100 / 3)  # only 4.0 vs 4.0 is < 1.03
    assert math.isnan(metrics.abs_rel(pred, np.zeros((2, 2))))


def test_inlier_ratio_is_symmetric_and_zero_prediction_is_outlier():
    gt = np.array([[2.0, 2.0, 2.0]])
    pred = np.array([[2.0 * 1.02, 2.0 / 1.02, 0.0]])
    assert math.isclose(metrics.inlier_ratio(pred, gt), 200 / 3)


def test_a_ratio_of_exactly_the_threshold_is_an_outlier():
    # 103 / 100 is exactly 1.03 in floating point: the threshold is strict ("< 1.03")
    assert 103.0 / 100.0 == metrics.INLIER_THRESHOLD
    assert metrics.inlier_ratio(np.array([[103.0]]), np.array([[100.0]])) == 0.0
    assert metrics.inlier_ratio(np.array([[102.9]]), np.array([[100.0]])) == 100.0


def test_clipping_to_0_1_and_100_metres_before_scoring():
    gt = np.array([[0.2, 50.0]])
    pred = np.array([[0.01, 500.0]])  # clipped to 0.1 and 100
    depth, scale = metrics.prepare_prediction(pred, gt, align=False)
    assert depth.tolist() == [[0.1, 100.0]] and scale == 1.0
    assert math.isclose(metrics.score_keyview(pred, gt, "known_poses")["abs_rel"], 100 * (0.5 + 1.0) / 2)


def test_nearest_resize_to_gt_resolution():
    pred = np.array([[1.0, 2.0], [3.0, 4.0]])
    up = metrics.resize_nearest(pred, (4, 4))
    assert up.tolist() == [[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]]
    down = metrics.resize_nearest(np.arange(16.0).reshape(4, 4), (2, 2))
    assert down.tolist() == [[5.0, 7.0], [13.0, 15.0]]  # centres (0.5 * 2) = rows/cols 1 and 3
    gt = np.full((4, 4), 2.0)
    assert math.isclose(metrics.score_keyview(np.array([[2.0, 2.0], [2.0, 4.0]]), gt, "known_poses")["abs_rel"],
                        100 * 4 / 16)  # the 4.0 covers a 2x2 block: 4 pixels of error 1.0


def test_median_alignment_only_without_known_poses():
    gt = np.array([[0.0, 1.0, 2.0, 3.0]])
    pred = np.array([[7.0, 10.0, 20.0, 60.0]])  # median over gt > 0: gt 2, pred 20 -> ratio 0.1
    assert math.isclose(metrics.median_ratio(pred, gt), 0.1)
    aligned = metrics.score_keyview(pred, gt, "intrinsics_only")
    assert math.isclose(aligned["scale"], 0.1)
    assert math.isclose(aligned["abs_rel"], 100 * (0 + 0 + 3 / 3) / 3)  # aligned: 1, 2, 6
    assert math.isclose(metrics.score_keyview(pred, gt, "single_view")["abs_rel"], aligned["abs_rel"])
    assert metrics.score_keyview(pred, gt, "known_poses")["scale"] == 1.0
    assert math.isclose(metrics.score_keyview(pred, gt, "known_poses")["abs_rel"], 100 * (9 + 9 + 19) / 3)


def test_alignment_happens_before_clipping():
    gt = np.array([[1.0, 1.0, 1.0]])
    pred = np.array([[1000.0, 1000.0, 1000.0]])  # aligned to 1.0 first; clipping first would give 100
    assert metrics.score_keyview(pred, gt, "intrinsics_only")["abs_rel"] == 0.0


def test_benchmark_mean_is_mean_of_dataset_means():
    assert metrics.benchmark_mean({"a": 2.0, "b": 4.0, "c": float("nan")}) == 3.0
    assert math.isnan(metrics.benchmark_mean({}))


def test_depths_under_one_metre_are_scored_like_any_other():
    gt = np.array([[0.5, 0.5, 0.4]])
    pred = np.array([[0.505, 0.6, 0.4]])  # ratios 1.01, 1.2, 1.0: two inliers
    assert math.isclose(metrics.inlier_ratio(pred, gt), 200 / 3)
    # a prediction whose median is under 1 m still aligns
    assert math.isclose(metrics.median_ratio(np.array([[0.25, 0.5, 0.75]]), np.array([[1.0, 2.0, 3.0]])), 4.0)


def test_median_ratio_leaves_out_the_pixels_without_gt():
    gt = np.array([[0.0, 0.0, 0.0, 2.0, 2.0]])
    assert metrics.median_ratio(np.ones((1, 5)), gt) == 2.0  # with the zeros the GT median would be 0


def test_the_scored_prediction_is_float64_whatever_was_written():
    depth, _ = metrics.prepare_prediction(np.full((2, 2), 1.1, np.float32), np.ones((2, 2)), align=False)
    assert depth.dtype == np.float64
