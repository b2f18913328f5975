"""The shipped official RMVD sample lists (depthpe/rmvd/lists/, converted from the reference's
pickles): the official sample counts and views per sample, their native formats and provenance,
and ``official:NAME`` in ``--samples``."""

import json

import numpy as np
import pytest

from depthpe.config import ConfigError
from depthpe.rmvd.official import LISTS_DIR, OFFICIAL_LISTS, official_list_paths
from depthpe.rmvd.samples import load_sample_lists

KEYVIEW = {"kitti": 10, "scannet": 3, "eth3d": 0, "dtu": 0, "tanks_and_temples": 0}


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    root = tmp_path_factory.mktemp("roots")
    return {sl.dataset: sl for sl in load_sample_lists(["official:all"], [f"{d}={root}" for d in OFFICIAL_LISTS])}


def test_the_official_counts_and_views_per_sample(official):
    counts = {name: (len(sl.samples), {len(s.views) for s in sl.samples}) for name, sl in official.items()}
    assert counts == {"kitti": (93, {21}), "scannet": (200, {8}), "eth3d": (104, {11}), "dtu": (110, {11}),
                      "tanks_and_temples": (69, {11})}
    assert {n: (c, {v}) for n, (c, v) in OFFICIAL_LISTS.items()} == counts


def test_keyviews_formats_and_per_dataset_keys(official):
    for name, sl in official.items():
        assert sl.format == name and {s.keyview for s in sl.samples} == {KEYVIEW[name]}
        assert all(np.array_equal(s.views[s.keyview].pose, np.eye(4)) for s in sl.samples)
        assert all(s.depth_range == ((0.425, 0.935) if name == "dtu" else None) for s in sl.samples)
        sizes = {v.image_size for s in sl.samples for v in s.views}
        assert sizes == ({(480, 640)} if name == "scannet" else {None})
    kitti = official["kitti"].samples[0]
    assert kitti.name == "2011_09_30_drive_0016/key11"
    assert kitti.depth.as_posix().endswith("depth_completion_prediction/val/2011_09_30_drive_0016_sync/proj_depth/"
                                          "groundtruth/image_02/0000000011.png")
    assert kitti.views[kitti.keyview].image.as_posix().endswith("raw_data/2011_09_30/2011_09_30_drive_0016_sync/"
                                                               "image_02/data/0000000011.png")


def test_kitti_source_views_after_the_keyview_lie_ahead_of_it(official):
    """A car driving forward: the views after the keyview have their centres ahead (z > 0 in keyview
    coordinates, centre = -R^T t of view_to_key), the ones before it behind, in almost every sample."""
    right = total = 0
    for s in official["kitti"].samples:
        for i in s.source_indices:
            R, t = s.views[i].pose[:3, :3], s.views[i].pose[:3, 3]
            right += ((-R.T @ t)[2] > 0) == (i > s.keyview)
            total += 1
    assert total == 93 * 20 and right >= total - 10


def test_each_list_names_its_source_and_needs_a_data_root(tmp_path):
    for name in OFFICIAL_LISTS:
        doc = json.loads((LISTS_DIR / f"{name}.json").read_text())
        assert doc["root"] is None and doc["format"] == name
        assert doc["source"]["repository"] == "https://github.com/lmb-freiburg/robustmvd"
        assert doc["source"]["license"] == "Apache-2.0" and len(doc["source"]["commit"]) == 40
        assert doc["source"]["path"] == f"rmvd/data/sample_lists/{name}.robustmvd.mvd.pickle"
    with pytest.raises(ConfigError, match="give it with --data-root dtu=DIR"):
        load_sample_lists(["official:dtu"])
    with pytest.raises(ConfigError, match=f"{len(OFFICIAL_LISTS)} datasets have no folder") as caught:
        load_sample_lists(["official:all"])
    assert all(f"--data-root {name}=DIR" in str(caught.value) for name in OFFICIAL_LISTS)
    with pytest.raises(ConfigError, match="official:all or official:NAME"):
        official_list_paths("official:nyu")
    assert official_list_paths("official:all") == [LISTS_DIR / f"{n}.json" for n in OFFICIAL_LISTS]


def test_scannets_repeated_keyframes_get_a_suffix(official):
    names = [s.name for s in official["scannet"].samples]
    assert len(set(names)) == 200
    assert [n for n in names if n.endswith("_2")] == ["scene0664_00_frame-001326_2", "scene0705_00_frame-000261_2"]
