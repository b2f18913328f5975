"""RMVD sample lists (depthpe.rmvd.samples): the pose convention, checked by reprojection, and one
line for each kind of bad entry."""

import json

import numpy as np
import pytest
import torch

from depthpe import geometry
from depthpe.config import ConfigError
from depthpe.rmvd.samples import load_sample_list, load_sample_lists
from depthpe.testing.rmvd_samples import FIXTURE_K, fixture_pose, write_sample_list

# a camera turned 180 degrees about y, 4 m in front of the keyview, looking back at it:
# p_view = diag(-1, 1, -1) p_key + (0, 0, 4)
FACING = [[-1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, -1.0, 4.0], [0.0, 0.0, 0.0, 1.0]]


def _doc(**sample_changes):
    views = [{"image": "a.png", "K": FIXTURE_K, "pose": fixture_pose(0)},
             {"image": "b.png", "K": FIXTURE_K, "pose": fixture_pose(1)}]
    sample = {"name": "s0", "keyview": 0, "depth": "s0.npy", "views": views, **sample_changes}
    return {"dataset": "toy", "samples": [sample]}


def _one_view(**view_changes):
    """A sample list whose sample has one view (the keyview) with ``view_changes`` applied."""
    return _doc(views=[{"image": "a.png", "K": FIXTURE_K, "pose": fixture_pose(0), **view_changes}])


def _write(tmp_path, doc):
    path = tmp_path / "list.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def _reproject(K, pose, uv, depth):
    """Keyview pixel uv with depth (m) -> pixel in the view of ``pose`` (p_view = pose @ p_key)."""
    p_key = depth * np.linalg.inv(K) @ np.array([uv[0], uv[1], 1.0])
    p_view = (pose @ np.append(p_key, 1.0))[:3]
    return (K @ p_view)[:2] / p_view[2]


def test_pose_maps_keyview_points_into_the_view(tmp_path):
    path = write_sample_list(tmp_path, num_samples=1, num_views=2)
    doc = json.loads(path.read_text())
    doc["samples"][0]["views"].append({"image": "c.png", "K": FIXTURE_K, "pose": FACING})
    sample = load_sample_list(_write(tmp_path, doc)).samples[0]
    K = sample.views[0].K
    # view 1 sits 0.5 m to the right: the point at the keyview's principal point, 2 m away, appears
    # 10 px * 0.5 / 2 = 2.5 px left of the principal point (6, 4)
    assert np.allclose(_reproject(K, sample.views[1].pose, (6.0, 4.0), 2.0), [3.5, 4.0])
    # the facing camera sees keyview pixel (8.5, 4) at 2 m (x = +0.5 m) mirrored: x = -0.5 m, z = 2 m
    assert np.allclose(_reproject(K, sample.views[2].pose, (8.5, 4.0), 2.0), [3.5, 4.0])
    # the same with depthpe's own geometry, the pose used as w2c (keyview = world)
    depth = torch.zeros(8, 12, dtype=torch.float64)
    depth[4, 6] = 2.0
    points = geometry.unproject_depth(depth, torch.from_numpy(K))[4, 6].reshape(1, 3)
    uv, z = geometry.project_points(points, torch.from_numpy(K), torch.from_numpy(sample.views[1].pose))
    assert torch.allclose(uv, torch.tensor([[3.5, 4.0]], dtype=torch.float64)) and float(z) == 2.0


def test_paths_are_relative_to_the_list_and_fixture_loads(tmp_path):
    sl = load_sample_list(write_sample_list(tmp_path, num_samples=2, num_views=3))
    assert sl.dataset == "toy" and len(sl.samples) == 2 and sl.samples[0].source_indices == [1, 2]
    assert sl.samples[0].depth == tmp_path / "toy_gt" / "toy_000.npy" and sl.samples[0].depth.exists()


@pytest.mark.parametrize("doc, message", [
    ("{not json", "is not valid JSON"),
    ({"samples": []}, "has no 'dataset'"),
    ({"dataset": "toy", "samples": []}, "has no samples"),
    (_doc(name=""), "'name' is empty"),
    (_doc(keyview=5), "keyview 5 is not an index of its 2 views"),
    (_doc(keyview="0"), "'keyview' must be int"),
    (_doc(keyview=1), "the keyview's pose must be the identity"),
    (_doc(views=[]), "'views' is empty"),
    (_one_view(K=[[1, 0], [0, 1]]), "must be 3x3"),
    (_one_view(K=[[0, 0, 1], [0, 1, 1], [0, 0, 1]]), "fx, fy > 0"),
    (_one_view(K=[[1, 0, 1], [0, 0, 1], [0, 0, 1]]), "fx, fy > 0"),
    (_one_view(K=[[10, 0, 6], [0, 10, 4], [0, 0, 2]]), "fx, fy > 0"),
    (_one_view(K=[[10, 0, 6], [0, 10, 4], [0.5, 0, 1]]), "fx, fy > 0"),
    (_one_view(K=[[10, 0, 6], [0, 10, 4], [0, 0.5, 1]]), "fx, fy > 0"),
    (_doc(keyview=True), "'keyview' must be int, got True"),
    (_one_view(pose=[[2, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]), "rigid transform"),
    (_one_view(pose=[[float("nan")] * 4] * 4), "NaN or infinite"),
    (_doc(views=[{"K": FIXTURE_K, "pose": fixture_pose(0)}]), "has no 'image'"),
    (_doc(depth=3), "'depth' must be str"),
    (_one_view(K=[[10, 0, 6], [0.5, 10, 4], [0, 0, 1]]),
     "views[0].K must be [[fx,0,cx],[0,fy,cy],[0,0,1]] with fx, fy > 0 (pixels)"),
    (_one_view(image_size=[0, 12]), "'image_size' must be [height, width] in pixels"),
    (_one_view(image_size=[True, 12]), "'image_size' must be [height, width] in pixels"),
    (_doc(depth_range=[2.0, 1.0]), "'depth_range' must be [min, max] metres with 0 < min < max, got [2.0, 1.0]"),
    (_doc(depth_range=[0, 1.0]), "'depth_range' must be [min, max] metres"),
    (_doc(depth_range=[0.5, "far"]), "'depth_range' must be [min, max] metres"),
    (_doc(depth_range=[0.5, 1.0, 2.0]), "'depth_range' must be [min, max] metres"),
])
def test_bad_sample_lists_give_one_line(tmp_path, doc, message):
    with pytest.raises(ConfigError) as err:
        load_sample_list(_write(tmp_path, doc))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_duplicate_names_and_datasets_are_refused(tmp_path):
    doc = _doc()
    doc["samples"].append(doc["samples"][0])
    with pytest.raises(ConfigError, match="appears twice"):
        load_sample_list(_write(tmp_path, doc))
    write_sample_list(tmp_path / "a", dataset="toy")
    write_sample_list(tmp_path / "b", dataset="toy")
    with pytest.raises(ConfigError, match="comes from two sample lists"):
        load_sample_lists([tmp_path / "a", tmp_path / "b"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no sample list"):
        load_sample_lists([tmp_path / "empty"])
    with pytest.raises(ConfigError, match="cannot read sample list .*missing.json"):
        load_sample_lists([tmp_path / "missing.json"])
