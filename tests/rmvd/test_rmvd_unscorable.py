"""A prediction that cannot be right is not scored (issue 42 item 4): a depth map of another aspect
than the keyview is refused in one line (S1), negative depths are refused and an alignment with
median(pred) <= 0 is undefined, never a score (S2); per_sample.csv records each map's own size."""

import csv
import json

import numpy as np

from depthpe import cli
from depthpe.rmvd.metrics import score_keyview
from depthpe.testing.rmvd_samples import fixture_depth, write_prediction, write_sample_list


def _run(capsys, *argv):
    status = cli.main(["rmvd", *map(str, argv)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _lists(tmp_path):
    return write_sample_list(tmp_path / "lists", num_samples=2)


def test_a_transposed_prediction_is_refused_in_one_line(tmp_path, capsys):
    lists = _lists(tmp_path)
    gt = fixture_depth(0)  # 8 x 12
    write_prediction(tmp_path / "pred", "toy", "toy_000", np.ascontiguousarray(gt.T))
    write_prediction(tmp_path / "pred", "toy", "toy_001", fixture_depth(1))
    status, _, err = _run(capsys, "--samples", lists, "--predictions", tmp_path / "pred", "--out", tmp_path / "out")
    assert status == 2 and err.count("\n") == 1 and not (tmp_path / "out" / "summary.json").exists()
    assert "is 12x8 (HxW) but the keyview's GT is 8x12: aspects differ by 55.6 % (at most 1 %)" in err


def test_a_prediction_at_another_size_of_the_same_aspect_is_scored_and_its_size_recorded(tmp_path, capsys):
    lists = _lists(tmp_path)
    for n in range(2):
        write_prediction(tmp_path / "pred", "toy", f"toy_{n:03d}", np.kron(fixture_depth(n), np.ones((2, 2))))
    status, _, err = _run(capsys, "--samples", lists, "--predictions", tmp_path / "pred", "--out", tmp_path / "out")
    rows = list(csv.DictReader((tmp_path / "out" / "per_sample.csv").open()))
    assert status == 0 and [r["pred_hw"] for r in rows] == ["16x24", "16x24"] and float(rows[0]["abs_rel"]) == 0


def test_negative_depths_are_refused(tmp_path, capsys):
    lists = _lists(tmp_path)
    for n in range(2):
        write_prediction(tmp_path / "pred", "toy", f"toy_{n:03d}", -fixture_depth(n))
    status, _, err = _run(capsys, "--samples", lists, "--predictions", tmp_path / "pred", "--out", tmp_path / "out",
                          "--setting", "single_view")
    assert status == 2 and "toy_000.npy has 95 negative depth value(s); depth must be >= 0 metres" in err


def test_an_alignment_with_a_median_of_zero_is_undefined_not_a_score(tmp_path, capsys):
    lists = _lists(tmp_path)
    write_prediction(tmp_path / "pred", "toy", "toy_000", np.zeros((8, 12), np.float32))
    write_prediction(tmp_path / "pred", "toy", "toy_001", fixture_depth(1) * 1.02)
    status, out, _ = _run(capsys, "--samples", lists, "--predictions", tmp_path / "pred", "--out", tmp_path / "out",
                          "--setting", "single_view")
    rows = list(csv.DictReader((tmp_path / "out" / "per_sample.csv").open()))
    assert status == 0 and rows[0]["abs_rel"] == "nan" and rows[0]["inliers"] == "nan" and rows[0]["scale"] == "nan"
    assert "warning: 1 prediction(s) were not scored (first: single_view toy/toy_000)" in out
    mean = json.loads((tmp_path / "out" / "summary.json").read_text())["settings"]["single_view"]["mean"]
    assert mean["abs_rel"] < 1e-4 and mean["inliers"] == 100.0  # the mean of the one scored sample (float32 GT)


def test_score_keyview_never_scores_a_negative_median():
    gt = fixture_depth(0).astype(np.float64)
    for setting in ("single_view", "intrinsics_only"):
        assert all(np.isnan(v) for v in score_keyview(-gt, gt, setting).values())
    assert score_keyview(-gt, gt, "known_poses")["inliers"] == 0.0  # no alignment: clipped to 0.1 m, all outliers
