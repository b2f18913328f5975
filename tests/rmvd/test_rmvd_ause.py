"""RMVD's AUSE (depthpe.rmvd.sparsification) on a case computed by hand, and through ``depthpe rmvd --ause``."""

import csv
import json

import numpy as np
import pytest

from depthpe import cli
from depthpe.rmvd.harness import confidence_path
from depthpe.rmvd.sparsification import ause, keyview_ause, sparsification_curve
from depthpe.testing.rmvd_samples import fixture_depth, write_prediction, write_sample_list

# Four pixels with relative errors 0.4, 0.3, 0.2, 0.1. Removing k = floor(4 i / 100) pixels samples
# the curves at x = 0, 0.25, 0.5, 0.75. Oracle (largest error first): mean errors 0.25, 0.2, 0.15, 0.1,
# over 0.25 -> 1, 0.8, 0.6, 0.4. A ranking that removes the smallest error first: 0.25, 0.3, 0.35,
# 0.4 -> 1, 1.2, 1.4, 1.6. Difference: 1.6 x up to x = 0.75, then 1.2 (held). AUSE = (sum over
# i = 0..75 of 1.6 i / 100 + 24 * 1.2) / 100 = (1.6 * 28.5 + 28.8) / 100 = 0.744.
ERRORS = np.array([0.4, 0.3, 0.2, 0.1])
HAND_AUSE = 0.744


def test_the_hand_computed_case():
    worst_ranking = np.array([4.0, 3.0, 2.0, 1.0])  # the most confident pixel has the largest error
    assert ause(ERRORS, worst_ranking) == pytest.approx(HAND_AUSE, abs=1e-12)
    assert ause(ERRORS, -worst_ranking) == pytest.approx(0.0, abs=1e-12)  # the oracle's own ranking
    oracle = sparsification_curve(ERRORS, np.array([0, 1, 2, 3]))
    assert oracle[[0, 25, 50, 75, 99]] == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.4])
    assert oracle[10] == pytest.approx(1.0 - 0.2 * 10 / 25)  # linear between the samples


def test_keyview_ause_scores_the_aligned_prediction_on_the_gt_pixels():
    gt = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])  # the last column has no GT
    pred = np.array([[1.4, 1.3, 50.0], [1.2, 1.1, 50.0]])
    conf = np.array([[4.0, 3.0, 0.0], [2.0, 1.0, 0.0]])
    assert keyview_ause(pred, conf, gt, "known_poses") == pytest.approx(HAND_AUSE, abs=1e-9)
    # with median alignment the prediction's scale does not matter; without it, it does
    aligned = keyview_ause(pred, conf, gt, "single_view")
    assert keyview_ause(10 * pred, conf, gt, "single_view") == pytest.approx(aligned, abs=1e-9)
    assert keyview_ause(10 * pred, conf, gt, "known_poses") != pytest.approx(HAND_AUSE, abs=1e-3)


def test_undefined_cases_are_nan():
    assert np.isnan(ause(np.array([0.3]), np.array([1.0])))  # one pixel: no curve
    assert np.isnan(ause(np.zeros(5), np.arange(5.0)))  # a perfect prediction: nothing to rank


def test_depthpe_rmvd_ause_reads_the_confidence_maps(tmp_path, capsys):
    path = write_sample_list(tmp_path / "lists", num_samples=1)
    gt = fixture_depth(0)
    pred = gt * np.where(np.arange(gt.size).reshape(gt.shape) % 2, 1.1, 1.3).astype(np.float32)
    write_prediction(tmp_path / "pred", "toy", "toy_000", pred)
    conf = np.where(np.arange(gt.size).reshape(gt.shape) % 2, 1.0, 2.0)  # the worse pixels look surer
    np.save(confidence_path(tmp_path / "pred", "toy", "toy_000", None), conf)
    argv = ["rmvd", "--samples", str(path), "--predictions", str(tmp_path / "pred"), "--out", str(tmp_path / "out")]
    assert cli.main([*argv, "--ause"]) == 0
    row = next(csv.DictReader((tmp_path / "out" / "per_sample.csv").open()))
    expected = keyview_ause(pred, conf, gt.astype(np.float64), "known_poses")
    assert expected > 0.1 and float(row["ause"]) == pytest.approx(expected)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["settings"]["known_poses"]
    assert summary["mean"]["ause"] == pytest.approx(expected)
    confidence_path(tmp_path / "pred", "toy", "toy_000", None).unlink()
    capsys.readouterr()
    assert cli.main([*argv, "--ause"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: confidence map (for --ause)") and "toy_000~conf.npy does not exist" in err


def test_two_pixels_make_a_curve():
    # n = 2: samples at k = 0 (x = 0) and k = 1 (x = 0.5). Errors 0.2, 0.1 (mean 0.15); removing the
    # smaller first leaves 0.2 / 0.15 = 4/3, the oracle 0.1 / 0.15 = 2/3: a difference rising linearly to
    # 2/3 at x = 0.5, then held. AUSE = 2/3 * (sum of i / 50 for i < 50 + 50) / 100 = 2/3 * 0.745.
    assert ause(np.array([0.2, 0.1]), np.array([2.0, 1.0])) == pytest.approx(2 / 3 * 0.745, abs=1e-12)


def test_with_a_multiple_of_100_pixels_every_point_is_a_sample():
    errors = np.random.default_rng(3).uniform(0.0, 1.0, 300)
    order = np.random.default_rng(4).permutation(300)
    curve = sparsification_curve(errors, order)
    # point i: exactly 3 i pixels removed, the mean of the rest over the mean of all (no interpolation)
    expected = [errors[order[3 * i :]].mean() / errors.mean() for i in range(100)]
    np.testing.assert_allclose(curve, expected, rtol=1e-12)


def test_equal_confidences_remove_the_earlier_pixel_first():
    errors = np.random.default_rng(5).uniform(0.0, 1.0, 200)
    levels = np.random.default_rng(6).integers(0, 3, 200).astype(np.float64)  # three confidence levels
    # within a level the row-major pixel order decides, as if the confidence rose with the pixel index
    unique = levels + np.arange(200) / 1000.0
    assert ause(errors, levels) == pytest.approx(ause(errors, unique), abs=1e-12)


def test_keyview_ause_ranks_relative_errors_not_absolute_ones():
    gt = np.array([[1.0, 10.0, 2.0, 20.0]])
    pred = np.array([[1.5, 11.0, 2.2, 30.0]])  # relative 0.5, 0.1, 0.1, 0.5; absolute 0.5, 1, 0.2, 10
    conf = np.array([[1.0, 4.0, 3.0, 2.0]])
    relative = np.array([0.5, 0.1, 0.1, 0.5])
    assert keyview_ause(pred, conf, gt, "known_poses") == pytest.approx(ause(relative, conf.ravel()), abs=1e-12)
    assert ause(relative, conf.ravel()) != pytest.approx(ause(np.array([0.5, 1.0, 0.2, 10.0]), conf.ravel()), abs=1e-3)
