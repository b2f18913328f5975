"""ARKitScenes converter: axis-angle w2c trajectories, timestamp tolerance, pincams, mm depth, folds."""

from __future__ import annotations

import shutil

import cv2
import numpy as np
import pytest

from depthpe.scenes.format.check import check_root
from depthpe.scenes.convert import convert
from depthpe.scenes.convert.arkitscenes import TIME_TOLERANCE_S, match_poses, parse_traj
from depthpe.scenes.convert.common import ConvertOptions
from depthpe.scenes.format.scene_file import read_index
from depthpe.testing import fake_datasets as fake


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arkit")
    scenes = fake.make_scenes(3, views=5, height=48, width=64, seed=30)
    # poses stamped 2 ms after the frames (within 5 ms), frame 3 of scene 0 only 50 ms away,
    # one pincam named 1 ms early
    truth = fake.write_fake_arkitscenes(tmp / "raw", scenes, folds=("Training", "Validation"),
                                        time_offset=0.002, far_pose={0: [3]}, pincam_shift={1: [2]})
    summary = convert("arkitscenes", tmp / "raw", tmp / "out", ConvertOptions(progress=False))
    return tmp, truth, summary


def test_roundtrip_matches_ground_truth(converted):
    tmp, truth, summary = converted
    for scene_id, fs in truth.items():
        m = fake.compare_to_ground_truth(tmp / "out" / "arkitscenes" / fs.split / f"{scene_id}.h5", fs)
        assert m["frames"] == m["expected_frames"], (scene_id, m)
        assert m["K_err"] < 1e-4
        assert m["w2c_err"] < 1e-9, "traj lines are axis-angle world-to-camera"
        assert m["depth_rel_err"] < 2e-3, "depth PNGs are millimetres"
        assert m["false_valid"] == 0 and m["valid_recall"] > 0.999
        assert m["image_mae"] < 4
        assert m["surface_rel"] < 1e-3


def test_pose_tolerance_and_official_folds(converted):
    tmp, truth, summary = converted
    assert summary["frames_dropped"] == {"no pose within tolerance": 1}
    assert summary["frames_written"] == 14
    for scene_id, fs in truth.items():  # folds come from 3dod_train_val_splits.csv
        assert (tmp / "out" / "arkitscenes" / fs.split / f"{scene_id}.h5").exists()
    assert summary["splits"]["train"]["scenes"] == 2 and summary["splits"]["val"]["scenes"] == 1
    entries = read_index(tmp / "out" / "arkitscenes" / "val")
    assert entries[0]["metric"] is True and entries[0]["depth_units"] == "m"
    reports, problems = check_root(tmp / "out", progress=False, max_pairs=6)
    assert not problems and all(r.ok for r in reports), [r.problems for r in reports]


def test_folder_folds_without_csv_and_csv_precedence(tmp_path):
    scenes = fake.make_scenes(2, views=3, height=24, width=32, seed=31)
    fake.write_fake_arkitscenes(tmp_path / "raw", scenes, folds=("Training", "Validation"))
    shutil.rmtree(tmp_path / "raw" / "threedod")  # no CSV: the Training/Validation folders decide
    s = convert("arkitscenes", tmp_path / "raw", tmp_path / "a", ConvertOptions(progress=False))
    assert s["splits"]["train"]["scenes"] == 1 and s["splits"]["val"]["scenes"] == 1
    csv = tmp_path / "folds.csv"  # an explicit CSV wins and videos missing from it are skipped
    csv.write_text("video_id,visit_id,fold\n41000001,1,Training\n")
    s = convert("arkitscenes", tmp_path / "raw", tmp_path / "b",
                ConvertOptions(progress=False, split_csv=str(csv)))
    assert set(s["splits"]) == {"train"} and s["splits"]["train"]["scenes"] == 1
    assert s["skipped"] == [{"scene_id": "41000000", "reason": "not in the official split"}]


def test_match_poses_tolerance():
    traj = np.array([10.0021, 10.1021, 10.25])
    frames = np.array([10.0, 10.1, 10.2, 10.3])
    np.testing.assert_array_equal(match_poses(frames, traj), [0, 1, -1, -1])
    np.testing.assert_array_equal(match_poses(frames, traj, tolerance=0.06), [0, 1, 2, 2])
    assert TIME_TOLERANCE_S == 0.005


def test_parse_traj_axis_angle(tmp_path):
    R = cv2.Rodrigues(np.array([[0.0], [0.0], [np.pi / 2]]))[0]
    (tmp_path / "t.traj").write_text(f"5.1 0 0 {np.pi / 2!r} 1 2 3\n2.0 0 0 0 0 0 0\n")
    ts, w2c = parse_traj(tmp_path / "t.traj")
    np.testing.assert_array_equal(ts, [2.0, 5.1])  # sorted by time
    np.testing.assert_allclose(w2c[1, :, :3], R, atol=1e-12)
    np.testing.assert_allclose(w2c[1, :, 3], [1, 2, 3])
    np.testing.assert_allclose(w2c[1, :, :3] @ [1, 0, 0], [0, 1, 0], atol=1e-12)
