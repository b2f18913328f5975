"""WildRGB-D converter: column-major K, camera-to-world poses, millimetre depth with holes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from depthpe.scenes.format.check import check_root
from depthpe.scenes.convert import convert
from depthpe.scenes.convert.common import ConvertOptions
from depthpe.scenes.convert.wildrgbd import parse_cam_poses, parse_metadata
from depthpe.scenes.format.scene_file import read_index
from depthpe.testing import fake_datasets as fake


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wildrgbd")
    scenes = fake.make_scenes(3, views=5, height=48, width=64, seed=20)
    truth = fake.write_fake_wildrgbd(tmp / "raw", scenes, no_pose={0: [1]}, sparse_depth={1: [3]})
    # a broken scene (unreadable metadata) and the known-bad box/scene_257 must not stop the run
    broken = tmp / "raw" / "cup" / "scenes" / "scene_900"
    broken.mkdir(parents=True)
    (broken / "cam_poses.txt").write_text("0 1 0 0 0 0 1 0 0 0 0 1 0 0 0 0 1\n")
    (broken / "metadata").write_text("{not json")
    bad = tmp / "raw" / "box" / "scenes" / "scene_257"
    bad.mkdir(parents=True)
    (bad / "cam_poses.txt").write_text("")
    summary = convert("wildrgbd", tmp / "raw", tmp / "out", ConvertOptions(progress=False))
    return tmp, truth, summary


def test_roundtrip_matches_ground_truth(converted):
    tmp, truth, summary = converted
    for scene_id, fs in truth.items():
        m = fake.compare_to_ground_truth(tmp / "out" / "wildrgbd" / "train" / f"{scene_id}.h5", fs)
        assert m["frames"] == m["expected_frames"], scene_id
        assert m["K_err"] < 1e-4, "K is stored column-major in metadata"
        assert m["w2c_err"] < 1e-9, "cam_poses.txt holds camera-to-world matrices"
        assert m["depth_rel_err"] < 2e-3, "depth PNGs are millimetres"
        assert m["false_valid"] == 0 and m["valid_recall"] > 0.999
        assert m["image_mae"] < 4, "colours must stay registered to depth (RGB, not BGR)"
        assert m["surface_rel"] < 1e-3


def test_drops_and_bad_scenes_reported(converted):
    tmp, truth, summary = converted
    assert summary["frames_dropped"] == {"no pose": 1, "too little valid depth": 1}
    assert summary["scenes_written"] == 3 and summary["scenes_skipped"] == 2
    reasons = {s["scene_id"]: s["reason"] for s in summary["skipped"]}
    assert reasons["box__scene_257"] == "known bad scene"
    assert reasons["cup__scene_900"].startswith("error: JSONDecodeError")
    saved = json.loads((tmp / "out" / "wildrgbd" / "convert_summary.json").read_text())
    assert saved["skip_reasons"] == {"known bad scene": 1, "error: JSONDecodeError": 1}


def test_train_only_metric_and_check(converted):
    tmp, truth, summary = converted
    assert set(summary["splits"]) == {"train"}
    assert not (tmp / "out" / "wildrgbd" / "val").exists()
    entries = read_index(tmp / "out" / "wildrgbd" / "train")
    assert len(entries) == 3 and all(e["metric"] is True and e["depth_units"] == "m" for e in entries)
    reports, problems = check_root(tmp / "out", progress=False, max_pairs=6)
    assert not problems and all(r.ok for r in reports), [r.problems for r in reports]
    assert all(abs(r.median_scale - 1) < 0.01 for r in reports)


def test_parse_metadata_column_major_and_poses_inverted(tmp_path):
    K = np.array([[500.0, 0, 190], [0, 510, 250], [0, 0, 1]])
    (tmp_path / "metadata").write_text(json.dumps({"K": K.T.reshape(-1).tolist(), "w": 384, "h": 512}))
    K_read, w, h = parse_metadata(tmp_path / "metadata")
    np.testing.assert_array_equal(K_read, K)
    assert (w, h) == (384, 512)
    c2w = np.eye(4)
    c2w[:3, 3] = [1.0, 2.0, 3.0]  # camera centre
    (tmp_path / "cam_poses.txt").write_text("0 " + " ".join(map(str, c2w.reshape(-1))) + "\n")
    w2c = parse_cam_poses(tmp_path / "cam_poses.txt")[0]
    np.testing.assert_allclose(w2c[:, 3], [-1.0, -2.0, -3.0])
