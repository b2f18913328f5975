"""The RMVD harness reads each test set in its native layout (depthpe.rmvd.datasets) through a
sample list with ``"format"`` and ``--data-root``: the known depth in each encoding, the pose
convention by reprojection, scoring GT x 1.02, and one line for each bad native file."""

import json
import re

import numpy as np
import pytest

from depthpe import cli
from depthpe.config import ConfigError
from depthpe.rmvd.datasets import DEPTH_FORMATS, dtu, eth3d, kitti, tanks_and_temples
from depthpe.rmvd.datasets.images import read_view_image
from depthpe.rmvd.datasets.readers import READERS
from depthpe.rmvd.harness import read_ground_truth
from depthpe.rmvd.samples import load_sample_list
from depthpe.testing.rmvd_native import (FIXTURE_HW, NATIVE_DATASETS, frame_w2c, plane_depth, plane_z,
                                         write_native_fixture, write_native_predictions)

# the largest error of each encoding: half a step of 1/256 m, 1 mm; float32 elsewhere
TOLERANCE = {"kitti": 0.5 / 256 + 1e-9, "scannet": 0.0005 + 1e-9, "eth3d": 1e-5, "dtu": 1e-5, "tanks_and_temples": 1e-5}


def _load(fixture):
    return load_sample_list(fixture.list_path, {fixture.dataset: fixture.data_root})


def test_every_native_format_has_a_reader():
    assert set(READERS) == set(DEPTH_FORMATS) - {"npy"} == set(NATIVE_DATASETS)


@pytest.mark.parametrize("dataset", NATIVE_DATASETS)
def test_native_gt_is_the_known_depth_in_metres_with_the_invalid_pixel_0(tmp_path, dataset):
    fixture = write_native_fixture(tmp_path, dataset)
    sample_list = _load(fixture)
    assert sample_list.format == dataset and len(sample_list.samples) == 2
    for n, sample in enumerate(sample_list.samples):
        gt = read_ground_truth(sample)
        expected = plane_depth(fixture.frames[n][sample.keyview], plane_z(n))
        assert gt.shape == FIXTURE_HW and gt[0, 0] == 0.0
        assert np.abs(gt - expected)[1:].max() <= TOLERANCE[dataset]  # row 0 holds the invalid pixel
        assert gt[1:].min() > 2.5


@pytest.mark.parametrize("dataset", NATIVE_DATASETS)
def test_pose_and_k_of_a_native_list_reproject_like_the_world_cameras(tmp_path, dataset):
    fixture = write_native_fixture(tmp_path, dataset)
    sample = _load(fixture).samples[1]
    frames = fixture.frames[1]
    key = sample.views[sample.keyview]
    gt = read_ground_truth(sample)
    for v, u in [(1, 1), (4, 6), (7, 11)]:
        p_key = gt[v, u] * np.linalg.inv(key.K) @ np.array([u, v, 1.0])
        world = np.linalg.inv(frame_w2c(frames[sample.keyview])) @ np.append(p_key, 1.0)
        assert abs(world[2] - plane_z(1)) <= 2 * TOLERANCE[dataset]  # the GT lies on the known plane
        for i, view in enumerate(sample.views):
            p_view = view.pose @ np.append(p_key, 1.0)  # p_view = pose @ p_key
            by_list = (view.K @ p_view[:3])[:2] / p_view[2]
            p_cam = frame_w2c(frames[i]) @ world
            by_world = (view.K @ p_cam[:3])[:2] / p_cam[2]
            np.testing.assert_allclose(by_list, by_world, atol=1e-9)
            if i != sample.keyview:
                assert np.abs(by_list - [u, v]).max() > 0.5  # the views really differ


@pytest.mark.parametrize("dataset", NATIVE_DATASETS)
def test_scaled_native_gt_scores_2_percent_and_all_inliers(tmp_path, capsys, dataset):
    fixture = write_native_fixture(tmp_path / "data", dataset)
    write_native_predictions(tmp_path / "pred", fixture, 1.02)
    status = cli.main(["rmvd", "--samples", str(fixture.list_path), "--data-root", fixture.data_root_option,
                       "--predictions", str(tmp_path / "pred"), "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert status == 0 and f"| {dataset} | 2 | 2.00 | 100.0 |" in out


def test_a_native_list_without_its_data_root_is_one_line(tmp_path, capsys):
    fixture = write_native_fixture(tmp_path, "kitti")
    status = cli.main(["rmvd", "--samples", str(fixture.list_path), "--predictions", str(tmp_path),
                       "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2 and "give it with --data-root kitti=DIR" in err and len(err.strip().splitlines()) == 1


def test_every_missing_dataset_folder_is_named_in_one_line(tmp_path, capsys):
    kitti, eth3d = write_native_fixture(tmp_path / "k", "kitti"), write_native_fixture(tmp_path / "e", "eth3d")
    lists = tmp_path / "lists"
    lists.mkdir()
    for fixture in (kitti, eth3d):
        (lists / fixture.list_path.name).write_bytes(fixture.list_path.read_bytes())
    argv = ["rmvd", "--samples", str(lists), "--predictions", str(tmp_path), "--out", str(tmp_path / "out")]
    status = cli.main([*argv, "--data-root", "kitti=/no/such/folder"])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1, err
    assert "2 datasets have no folder" in err and "--data-root kitti=/no/such/folder: no such folder" in err
    assert "eth3d (sample list" in err and "--data-root eth3d=DIR --data-root kitti=DIR" in err


@pytest.mark.parametrize("roots, message", [(["kitti"], "write DATASET=DIR"),
                                            (["kitti=/no/such/folder"], "no such folder"),
                                            (["KITTI_ROOT", "dtu=."], "no sample list is of dataset 'dtu'")])
def test_bad_data_roots_are_one_line(tmp_path, capsys, roots, message):
    fixture = write_native_fixture(tmp_path, "kitti")
    argv = ["rmvd", "--samples", str(fixture.list_path), "--predictions", str(tmp_path), "--out", str(tmp_path / "o")]
    for root in roots:
        argv += ["--data-root", fixture.data_root_option if root == "KITTI_ROOT" else root]
    status = cli.main(argv)
    err = capsys.readouterr().err
    assert status == 2 and message in err


def test_scannet_images_are_read_at_the_size_their_k_is_for(tmp_path):
    sample = _load(write_native_fixture(tmp_path, "scannet")).samples[0]
    view = sample.views[0]
    assert view.image_size == FIXTURE_HW
    rgb, K = read_view_image(view)
    assert rgb.shape == (*FIXTURE_HW, 3) and rgb.dtype == np.uint8 and K is view.K
    kitti_view = _load(write_native_fixture(tmp_path, "kitti")).samples[0].views[0]
    assert kitti_view.image_size is None and read_view_image(kitti_view)[0].shape == (*FIXTURE_HW, 3)


def test_bad_native_files_are_one_line(tmp_path):
    fixture = write_native_fixture(tmp_path, "eth3d")
    sample = _load(fixture).samples[0]
    key_image = sample.views[sample.keyview].image
    sample.depth.write_bytes(sample.depth.read_bytes()[:-4])
    with pytest.raises(ConfigError, match=r"has 380 bytes; its image .* is 8x12 \(HxW\), so it must hold 384"):
        eth3d.read_depth(sample.depth, key_image)
    with pytest.raises(ConfigError, match="does not exist .*--data-root"):
        kitti.read_depth(tmp_path / "missing.png")
    with pytest.raises(ConfigError, match="must be a single-channel 16-bit PNG"):
        kitti.read_depth(_colour_png(tmp_path))
    (tmp_path / "colour.pfm").write_bytes(b"PF\n2 1\n-1.0\n" + bytes(24))
    with pytest.raises(ConfigError, match="must be greyscale"):
        dtu.read_depth(tmp_path / "colour.pfm")
    (tmp_path / "short.pfm").write_bytes(b"Pf\n2 2\n-1.0\n" + bytes(12))
    with pytest.raises(ConfigError, match="is truncated"):
        dtu.read_depth(tmp_path / "short.pfm")
    np.savez(tmp_path / "other.npz", depth=np.ones((2, 2)))
    with pytest.raises(ConfigError, match="has no array 'arr_0'"):
        tanks_and_temples.read_depth(tmp_path / "other.npz")


def _colour_png(tmp_path):
    import cv2

    path = tmp_path / "colour.png"
    path.write_bytes(cv2.imencode(".png", np.zeros((2, 3, 3), np.uint8))[1].tobytes())
    return path


def test_pfm_rows_are_stored_bottom_first_and_big_endian_is_read(tmp_path):
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    (tmp_path / "be.pfm").write_bytes(b"Pf\n3 2\n1.0\n" + values[::-1].astype(">f4").tobytes())
    np.testing.assert_array_equal(dtu.read_pfm(tmp_path / "be.pfm"), values)


@pytest.mark.parametrize("change, message", [
    ({"format": "nyu"}, "'format' must be one of npy, kitti, scannet, eth3d, dtu, tanks_and_temples"),
    ({"root": 5}, "'root' must be str"),
    ({"view": {"image_size": [0, 12]}}, "'image_size' must be [height, width] in pixels"),
    ({"sample": {"depth_range": [2.0, 1.0]}}, "'depth_range' must be [min, max] metres with 0 < min < max"),
])
def test_bad_native_keys_are_one_line(tmp_path, change, message):
    fixture = write_native_fixture(tmp_path, "dtu")
    doc = json.loads(fixture.list_path.read_text())
    roots = None if "root" in change else {"dtu": fixture.data_root}  # --data-root would override "root"
    sample = doc["samples"][0]
    sample.update(change.pop("sample", {}))
    sample["views"][0].update(change.pop("view", {}))
    doc.update(change)
    fixture.list_path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_sample_list(fixture.list_path, roots)


def test_a_list_root_is_relative_to_the_lists_folder(tmp_path):
    fixture = write_native_fixture(tmp_path, "tanks_and_temples")
    doc = json.loads(fixture.list_path.read_text())
    doc["root"] = "../tanks_and_temples"
    fixture.list_path.write_text(json.dumps(doc))
    sample = load_sample_list(fixture.list_path).samples[0]
    assert sample.depth == fixture.list_path.parent / "../tanks_and_temples/Barn/depth/000002.npz"
    assert read_ground_truth(sample)[1:].min() > 2.5


@pytest.mark.parametrize("dataset", NATIVE_DATASETS)
def test_a_trained_model_runs_known_poses_on_every_native_fixture(tmp_path, capsys, dataset, model_dir):
    """``model_dir``: the micro model trained for 2 steps; setting (i) end to end on the native layout."""
    import csv
    import math

    fixture = write_native_fixture(tmp_path / "data", dataset)
    status = cli.main(["rmvd", "--samples", str(fixture.list_path), "--data-root", fixture.data_root_option,
                       "--model", str(model_dir), "--setting", "known_poses", "--out", str(tmp_path / "out"),
                       "--burn-in", "0", "--quiet"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    with open(tmp_path / "out" / "per_sample.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 and all(math.isfinite(float(r["abs_rel"])) for r in rows)
    assert f"| {dataset} | 2 |" in captured.out


def test_vggt_runs_intrinsics_only_on_a_native_fixture(tmp_path, capsys, rmvd_vggt):
    fixture = write_native_fixture(tmp_path / "data", "scannet")
    model, overrides = rmvd_vggt
    status = cli.main(["rmvd", "--samples", str(fixture.list_path), "--data-root", fixture.data_root_option,
                       "--model", f"vggt:{model}", "--vggt-overrides", str(overrides), "--image-width", "28",
                       "--setting", "intrinsics_only",
                       "--out", str(tmp_path / "out"), "--burn-in", "0", "--quiet"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "| scannet | 2 |" in captured.out
