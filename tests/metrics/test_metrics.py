"""Tests for depthpe.metrics: metric values, alignment modes, aggregation order, baselines, median."""

import math
import random

import numpy as np
import pytest
import torch

from depthpe.metrics import (
    METRIC_KEYS,
    MIN_VALID_PIXELS,
    StreamingMedian,
    aggregate,
    baseline_rows,
    image_metrics,
    min_valid_pixels,
    scene_rows,
    scored_mask,
    scene_summaries,
)


def _gt(s=3, h=6, w=7, seed=0):
    rng = np.random.default_rng(seed)
    gt = rng.uniform(0.5, 5.0, size=(s, h, w))
    valid = rng.uniform(size=(s, h, w)) > 0.2
    gt[~valid] = 0.0
    return gt, valid


def _by_mode(rows):
    out = {}
    for r in rows:
        out.setdefault(r["mode"], []).append(r)
    return out


def test_perfect_prediction():
    gt, valid = _gt()
    for rows in _by_mode(scene_rows(gt.copy(), gt, valid)).values():
        assert len(rows) == 3
        for r in rows:
            assert r["abs_rel"] == 0 and r["rmse"] == 0 and r["log_rmse"] == pytest.approx(0, abs=1e-12)
            assert r["delta1"] == r["delta2"] == r["delta3"] == r["tau103"] == 1.0
            assert r["bad_pred"] == 0 and r["n_valid"] == valid[r["image"]].sum()


def test_double_prediction_native_vs_aligned():
    gt, valid = _gt()
    rows = _by_mode(scene_rows(torch.from_numpy(2 * gt), torch.from_numpy(gt), torch.from_numpy(valid)))
    for r in rows["native"]:
        assert r["abs_rel"] == pytest.approx(1.0)
        assert r["delta1"] == r["delta3"] == 0.0  # ratio 2 > 1.25^3 = 1.953
        assert r["log_rmse"] == pytest.approx(math.log(2))
        g = gt[r["image"]][valid[r["image"]]]
        assert r["rmse"] == pytest.approx(math.sqrt(np.mean(g**2)))
    for mode in ("scene_aligned", "image_aligned"):
        for r in rows[mode]:
            assert r["scale"] == pytest.approx(0.5)
            assert r["abs_rel"] == pytest.approx(0.0, abs=1e-12) and r["delta1"] == 1.0


def test_one_view_rescaled_image_aligned_perfect_scene_aligned_not():
    gt, valid = _gt()
    pred = gt.copy()
    pred[1] *= 1.1
    rows = scene_rows(pred, gt, valid, dataset="d", scene="s")
    modes = _by_mode(rows)
    assert all(r["abs_rel"] < 1e-12 for r in modes["image_aligned"])
    assert max(r["abs_rel"] for r in modes["scene_aligned"]) > 0.01
    summary = {s["mode"]: s for s in scene_summaries(rows)}
    assert summary["image_aligned"]["log_scale_std"] > 0.01  # the views disagree on scale
    assert summary["native"]["log_scale_std"] == 0.0


def test_averaging_order_image_then_scene_then_dataset():
    rows = []
    # scene A: one image, abs_rel 1. scene B: three images with abs_rel 0.1, 0.2, 0.3 and very
    # different pixel counts (so a pixel-weighted mean would differ).
    gt_a = np.ones((1, 4, 4))
    rows += scene_rows(2 * gt_a, gt_a, dataset="d", scene="A", modes=["native"])
    # view 3 of scene B has no valid pixel: skipped within the scene, not counted as 0 or NaN.
    gt_b = np.ones((4, 4, 4))
    valid_b = np.zeros((4, 4, 4), dtype=bool)
    valid_b[0, :1, :1] = True  # 1 pixel
    valid_b[1, :2, :2] = True  # 4 pixels
    valid_b[2] = True  # 16 pixels
    pred_b = gt_b * np.array([1.1, 1.2, 1.3, 9.0])[:, None, None]
    rows += scene_rows(pred_b, gt_b, valid_b, dataset="d", scene="B", modes=["native"])
    # an image with no valid pixel is skipped, not counted as 0 or NaN
    rows += scene_rows(np.ones((1, 4, 4)), np.zeros((1, 4, 4)), dataset="d", scene="B2", modes=["native"])
    result = aggregate(rows)["d"]["native"]
    assert result["abs_rel"] == pytest.approx((1.0 + (0.1 + 0.2 + 0.3) / 3) / 2)
    assert result["n_scenes"] == 2 and result["n_empty_scenes"] == 1
    assert result["n_images"] == 4 and result["n_valid"] == 16 + 1 + 4 + 16
    per_scene = {s["scene"]: s for s in scene_summaries(rows)}
    assert per_scene["B"]["abs_rel"] == pytest.approx(0.2) and per_scene["B"]["n_images"] == 3
    assert per_scene["B"]["n_empty_images"] == 1
    assert math.isnan(per_scene["B2"]["abs_rel"]) and per_scene["B2"]["n_empty_images"] == 1
    # independent of row order (e.g. rows gathered from several processes)
    shuffled = rows[:]
    random.Random(0).shuffle(shuffled)
    assert aggregate(shuffled) == aggregate(rows)


def test_scene_scale_pools_all_views():
    gt = np.ones((3, 2, 2))
    pred = gt * np.array([1.0, 2.0, 4.0])[:, None, None]
    rows = _by_mode(scene_rows(pred, gt))
    # pooled median of pred = 2 -> one scale 0.5 for every view; per image: 1, 1/2, 1/4
    assert [r["scale"] for r in rows["scene_aligned"]] == [0.5, 0.5, 0.5]
    assert [r["abs_rel"] for r in rows["scene_aligned"]] == pytest.approx([0.5, 0.0, 1.0])
    assert [r["scale"] for r in rows["image_aligned"]] == [1.0, 0.5, 0.25]


def test_duplicate_rows():
    gt, valid = _gt(s=2)
    rows = scene_rows(gt, gt, valid, dataset="d", scene="s")
    with pytest.raises(ValueError, match="duplicate"):
        aggregate(rows + rows[:1])
    assert aggregate(rows + rows[:1], on_duplicate="drop") == aggregate(rows)


def test_datasets_are_separate():
    gt, valid = _gt(s=2)
    rows = scene_rows(gt, gt, valid, dataset="a", scene="s") + scene_rows(2 * gt, gt, valid, dataset="b", scene="s")
    result = aggregate(rows)
    assert result["a"]["native"]["abs_rel"] == 0 and result["b"]["native"]["abs_rel"] == pytest.approx(1.0)


def test_baselines_by_hand():
    gt = np.array([[[1.0, 2.0], [4.0, 8.0]]])
    rows = _by_mode(baseline_rows(gt, global_constant_value=2.0, dataset="d", scene="s"))
    # global constant 2: |2-1|/1, 0, |2-4|/4, |2-8|/8
    assert rows["global_constant"][0]["abs_rel"] == pytest.approx((1 + 0 + 0.5 + 0.75) / 4)
    assert rows["global_constant"][0]["scale"] == 2.0
    # scene constant = median(1, 2, 4, 8) = 3
    assert rows["scene_constant"][0]["abs_rel"] == pytest.approx((2 + 0.5 + 0.25 + 5 / 8) / 4)
    assert rows["scene_constant"][0]["delta1"] == pytest.approx(0.0)
    # scene-constant on a constant-GT scene is perfect; without a global value only scene rows
    const = np.full((2, 3, 3), 4.0)
    only = baseline_rows(const)
    assert {r["mode"] for r in only} == {"scene_constant"}
    assert all(r["abs_rel"] == 0 and r["delta1"] == 1 for r in only)


def test_nonpositive_and_nonfinite_predictions_are_finite_outliers():
    gt = np.full((4, 4), 2.0)
    pred = np.zeros((4, 4))
    pred[0, 0] = np.nan
    pred[0, 1] = -1.0
    m = image_metrics(pred, gt)
    assert all(np.isfinite(m[k]) for k in METRIC_KEYS)
    assert m["bad_pred"] == 1.0 and m["delta3"] == 0.0
    assert m["abs_rel"] == pytest.approx((14 * 1.0 + (2 - 1e-6) / 2 + 1.5) / 16)


def test_image_metrics_masks_and_shapes():
    gt = np.array([[1.0, 0.0], [np.inf, 2.0]])
    pred = np.array([[1.5, 7.0], [7.0, 2.0]])
    m = image_metrics(pred, gt)
    assert m["n_valid"] == 2 and m["abs_rel"] == pytest.approx(0.25)
    m2 = image_metrics(pred, gt, np.array([[False, True], [True, True]]))
    assert m2["n_valid"] == 1 and m2["abs_rel"] == 0
    empty = image_metrics(pred, np.zeros((2, 2)))
    assert empty["n_valid"] == 0 and math.isnan(empty["abs_rel"])
    with pytest.raises(ValueError, match="shape"):
        image_metrics(pred, gt[:, :1])


def test_streaming_median_close_to_exact_and_mergeable():
    rng = np.random.default_rng(1)
    chunks = [rng.lognormal(mean=0.5, sigma=1.0, size=(3, 20, 30)) for _ in range(4)]
    valids = [rng.uniform(size=c.shape) > 0.3 for c in chunks]
    whole = StreamingMedian()
    parts = [StreamingMedian(), StreamingMedian()]
    for i, (c, v) in enumerate(zip(chunks, valids)):
        whole.update(c, v)
        parts[i % 2].update(torch.from_numpy(c), torch.from_numpy(v))
    exact = np.median(np.concatenate([c[v] for c, v in zip(chunks, valids)]))
    assert whole.median() == pytest.approx(exact, rel=3e-4)
    parts[0].merge(parts[1])
    assert parts[0].median() == whole.median() and parts[0].count == whole.count
    assert math.isnan(StreamingMedian().median())
    with pytest.raises(ValueError):
        whole.merge(StreamingMedian(num_bins=10))


def test_streaming_median_counts_values_outside_its_range_in_the_end_bins():
    # 10 bins over [1, 100] in log space (each a factor 100 ** 0.1); 3 values below the range fall in the
    # first bin, 1 above it in the last: the middle rank (2 of 4) is 2/3 of the way through the first bin.
    m = StreamingMedian(lo=1.0, hi=100.0, num_bins=10)
    m.update(np.array([0.5, 0.5, 0.5, 200.0]))
    assert m.count == 4 and m.counts[0] == 3 and m.counts[-1] == 1
    assert m.median() == pytest.approx(100 ** (0.1 * 2 / 3))
    for lo, hi in ((0.0, 1.0), (2.0, 1.0), (1.0, 1.0)):
        with pytest.raises(ValueError, match="0 < lo < hi"):
            StreamingMedian(lo=lo, hi=hi)


def test_an_image_needs_the_larger_of_the_fraction_and_the_floor_of_valid_pixels():
    assert min_valid_pixels(100, 0.01) == MIN_VALID_PIXELS  # 1 pixel by the fraction: the floor wins
    assert min_valid_pixels(100 * 100, 0.01) == 100
    assert min_valid_pixels(1000, 0.1) == 100  # 0.1 * 1000 is 100.00000000000001 in floats: not 101
    assert min_valid_pixels(1001, 0.1) == 101


def test_scored_mask_empties_only_images_below_the_minimum_and_counts_only_positive_finite_depth():
    need = 20
    gt = np.zeros((3, 5, 8))
    gt[0].flat[:need] = 2.0  # exactly enough
    gt[1].flat[:need - 1] = 2.0  # one short
    gt[1].flat[need - 1] = np.nan  # ... which a non-finite depth does not make up
    gt[2].flat[:need + 5] = 2.0  # enough depth, but 6 of it is masked out by valid
    valid = np.ones_like(gt, dtype=bool)
    valid[2].flat[:6] = False
    m = scored_mask(gt, valid, min_pixels=need)
    assert m.shape == gt.shape and m.dtype == bool
    assert m[0].sum() == need and (m[0] == (gt[0] > 0)).all()
    assert not m[1].any() and not m[2].any()
    # torch inputs give the same mask
    np.testing.assert_array_equal(scored_mask(torch.from_numpy(gt), torch.from_numpy(valid), min_pixels=need), m)
