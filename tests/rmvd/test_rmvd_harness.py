"""``depthpe rmvd``: scoring a folder of predicted depth maps on RMVD sample lists (in process)."""

import csv
import json

import numpy as np
import pytest

from depthpe import cli
from depthpe.testing.rmvd_samples import fixture_depth, write_prediction, write_predictions, write_sample_list


def _run(capsys, *argv):
    status = cli.main(["rmvd", *map(str, argv)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("factor, abs_rel, inliers", [(1.02, "2.00", "100.0"), (1.04, "4.00", "0.0")])
def test_scaled_ground_truth_gives_the_known_table(tmp_path, capsys, factor, abs_rel, inliers):
    lists = tmp_path / "lists"
    for name in ("kitti", "dtu"):
        write_predictions(tmp_path / "pred", write_sample_list(lists, dataset=name), factor)
    status, out, _ = _run(capsys, "--samples", lists, "--predictions", tmp_path / "pred", "--out", tmp_path / "out")
    assert status == 0
    assert f"| kitti | 2 | {abs_rel} | {inliers} |" in out and f"| mean | | {abs_rel} | {inliers} |" in out
    assert (tmp_path / "out" / "summary.md").read_text() == out
    table = json.loads((tmp_path / "out" / "summary.json").read_text())["settings"]["known_poses"]
    assert table["ordering"] == "index_distance" and not table["oracle"]
    assert list(table["datasets"]) == ["dtu", "kitti"] and table["datasets"]["dtu"]["samples"] == 2
    rows = list(csv.DictReader((tmp_path / "out" / "per_sample.csv").open()))
    assert [r["sample"] for r in rows] == ["dtu_000", "dtu_001", "kitti_000", "kitti_001"]
    assert rows[0]["views"] == "0 1 2" and rows[0]["ordering"] == "index_distance"


def test_median_alignment_removes_the_scale_in_intrinsics_only(tmp_path, capsys):
    path = write_sample_list(tmp_path / "lists")
    write_predictions(tmp_path / "pred", path, 3.0)
    status, out, _ = _run(capsys, "--samples", path, "--predictions", tmp_path / "pred", "--out", tmp_path / "out",
                          "--setting", "intrinsics_only")
    assert status == 0 and "| toy | 2 | 0.00 | 100.0 |" in out
    rows = list(csv.DictReader((tmp_path / "out" / "per_sample.csv").open()))
    assert abs(float(rows[0]["scale"]) - 1 / 3) < 1e-6


def test_several_settings_make_one_table_each_from_its_own_folder(tmp_path, capsys):
    path = write_sample_list(tmp_path / "lists")
    write_predictions(tmp_path / "pred" / "known_poses", path, 1.04)
    write_predictions(tmp_path / "pred" / "single_view", path, 5.0)  # median alignment removes the 5
    status, out, _ = _run(capsys, "--samples", path, "--predictions", tmp_path / "pred", "--out", tmp_path / "out",
                          "--setting", "known_poses", "single_view")
    assert status == 0
    assert "known_poses: ordering index_distance; single_view: ordering keyview_only" in out
    assert "| toy | 2 | 4.00 | 0.0 | 0.00 | 100.0 |" in out and "| mean | | 4.00 | 0.0 | 0.00 | 100.0 |" in out
    rows = list(csv.DictReader((tmp_path / "out" / "per_sample.csv").open()))
    assert [(r["sample"], r["setting"], r["views"]) for r in rows[:2]] == [("toy_000", "known_poses", "0 1 2"),
                                                                          ("toy_000", "single_view", "0")]


def test_oracle_ordering_reads_one_map_per_view_set_and_is_labelled(tmp_path, capsys):
    path = write_sample_list(tmp_path / "lists", num_samples=1, num_views=3)
    gt = fixture_depth(0)
    # nearest order from keyview 0: 1, 2 -> sets (0, 1) and (0, 1, 2); the larger set is better here
    write_prediction(tmp_path / "pred", "toy", "toy_000", gt * 1.10, views=(0, 1))
    write_prediction(tmp_path / "pred", "toy", "toy_000", gt * 1.01, views=(0, 1, 2))
    status, out, _ = _run(capsys, "--samples", path, "--predictions", tmp_path / "pred", "--out", tmp_path / "out",
                          "--ordering", "nearest")
    assert status == 0 and "ordering nearest (oracle" in out and "| toy | 1 | 1.00 | 100.0 |" in out
    row = next(csv.DictReader((tmp_path / "out" / "per_sample.csv").open()))
    assert row["views"] == "0 1 2" and row["ordering"] == "nearest"
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["settings"]["known_poses"]["oracle"] is True


def test_hostile_sample_name_stays_inside_predictions(tmp_path, capsys):
    path = write_sample_list(tmp_path / "lists", num_samples=1)
    doc = json.loads(path.read_text())
    doc["samples"][0]["name"] = "../../escape"
    path.write_text(json.dumps(doc))
    (tmp_path / "escape.npy").write_bytes(b"")  # where an unsafe join would look
    status, _, err = _run(capsys, "--samples", path, "--predictions", tmp_path / "a" / "pred",
                          "--out", tmp_path / "out")
    assert status == 2 and str(tmp_path / "a" / "pred" / "toy") in err and "escape-" in err


@pytest.mark.parametrize("setup, message", [
    ("missing", "does not exist"),
    ("nan", "has NaN or infinite values"),
    ("shape", "must be a numeric (H, W) depth map"),
])
def test_bad_predictions_give_one_line(tmp_path, capsys, setup, message):
    path = write_sample_list(tmp_path / "lists", num_samples=1)
    if setup != "missing":
        bad = np.full((8, 12), np.nan) if setup == "nan" else np.ones((2, 3, 4))
        write_prediction(tmp_path / "pred", "toy", "toy_000", bad)
    status, _, err = _run(capsys, "--samples", path, "--predictions", tmp_path / "pred", "--out", tmp_path / "out")
    assert status == 2 and message in err and err.count("\n") == 1 and not (tmp_path / "out" / "summary.md").exists()


def test_samples_are_required_and_settings_checked(tmp_path, capsys):
    status, _, err = _run(capsys, "--predictions", tmp_path, "--out", tmp_path / "out")
    assert status == 2 and "--samples is required" in err
    status, _, err = _run(capsys, "--samples", tmp_path, "--predictions", tmp_path, "--out", tmp_path / "out",
                          "--setting", "known_poses", "known_poses")
    assert status == 2 and "--setting must be one or more different values" in err


def test_a_sample_without_gt_is_nan_in_the_csv_and_skipped_in_the_means(tmp_path, capsys):
    path = write_sample_list(tmp_path / "lists", num_samples=2)
    np.save(tmp_path / "lists" / "toy_gt" / "toy_001.npy", np.zeros((8, 12), np.float32))
    write_predictions(tmp_path / "pred", path, 1.02)
    status, out, _ = _run(capsys, "--samples", path, "--predictions", tmp_path / "pred", "--out", tmp_path / "out")
    assert status == 0 and "| toy | 2 | 2.00 | 100.0 |" in out
    rows = list(csv.DictReader((tmp_path / "out" / "per_sample.csv").open()))
    assert rows[1]["abs_rel"] == "nan"
    np.save(tmp_path / "lists" / "toy_gt" / "toy_000.npy", np.zeros((8, 12), np.float32))
    status, out, _ = _run(capsys, "--samples", path, "--predictions", tmp_path / "pred", "--out", tmp_path / "out",
                          "--restart")  # other GT data: outputs of other inputs are replaced only on request
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())  # strict JSON: no NaN
    assert status == 0 and summary["settings"]["known_poses"]["mean"] == {"abs_rel": None, "inliers": None}


def test_quasi_optimal_from_the_command_line(tmp_path, capsys):
    path = write_sample_list(tmp_path / "lists", num_samples=1, num_views=3)
    gt = fixture_depth(0)
    # pairs: (0, 1) 10 %, (0, 2) 2 % -> order 2, 1 -> sets (0, 2) 2 % and (0, 1, 2) 3 %: the pair wins
    for views, factor in (((0, 1), 1.10), ((0, 2), 1.02), ((0, 1, 2), 1.03)):
        write_prediction(tmp_path / "pred", "toy", "toy_000", gt * factor, views=views)
    status, out, _ = _run(capsys, "--samples", path, "--predictions", tmp_path / "pred", "--out", tmp_path / "out",
                          "--ordering", "quasi-optimal", "--setting", "known_poses")
    assert status == 0 and "ordering quasi-optimal (oracle" in out and "| toy | 1 | 2.00 | 100.0 |" in out
    row = next(csv.DictReader((tmp_path / "out" / "per_sample.csv").open()))
    assert row["views"] == "0 2" and row["ordering"] == "quasi-optimal"
