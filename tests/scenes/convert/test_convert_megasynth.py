"""MegaSynth converter: opencv_cameras.json, RGBA renderings, OpenEXR depth with a background sentinel."""

from __future__ import annotations

import numpy as np
import pytest

from depthpe.scenes.format.check import check_root
from depthpe.scenes.convert import convert
from depthpe.scenes.convert.common import ConvertOptions
from depthpe.scenes.convert.megasynth import read_exr_depth, read_rgba
from depthpe.scenes.format.scene_file import read_index
from depthpe.testing import fake_datasets as fake


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("megasynth")
    scenes = fake.make_scenes(4, views=5, height=48, width=64, seed=40)
    assert any((s["depth"] == 0).any() for s in scenes), "fixture needs background pixels"
    truth = fake.write_fake_megasynth(tmp / "raw", scenes[:2], prefix="split_0")
    # second zip layout; its background is opaque, so only the 1e10 depth sentinel marks it
    truth.update(fake.write_fake_megasynth(tmp / "raw" / "data", scenes[2:], prefix="split_7",
                                           opaque_background=True))
    assert any((s["depth"] == 0).any() for s in scenes[2:])
    summary = convert("megasynth", tmp / "raw", tmp / "out", ConvertOptions(val_scenes=1, progress=False))
    return tmp, truth, summary


def _scene_path(root, scene_id):
    hits = list(root.glob(f"megasynth/*/{scene_id}.h5"))
    assert len(hits) == 1, scene_id
    return hits[0]


def test_roundtrip_matches_ground_truth(converted):
    tmp, truth, summary = converted
    assert summary["scenes_found"] == 4 and summary["scenes_written"] == 4  # both zip prefixes
    for scene_id, fs in truth.items():
        m = fake.compare_to_ground_truth(_scene_path(tmp / "out", scene_id), fs)
        assert m["frames"] == m["expected_frames"]
        assert m["K_err"] < 1e-4, "cx, cy are stored in the pixel-corner convention"
        assert m["w2c_err"] < 1e-9
        assert m["depth_rel_err"] < 1e-3
        # background sentinel and alpha < 255 edges are invalid (false_valid counts both)
        assert m["false_valid"] == 0 and m["valid_recall"] > 0.999
        assert m["image_mae"] < 4, "RGBA renderings must become registered RGB"
        assert m["surface_rel"] < 1e-3


def test_split_units_and_check(converted):
    tmp, truth, summary = converted
    assert summary["splits"]["val"]["scenes"] == 1 and summary["splits"]["train"]["scenes"] == 3
    entries = read_index(tmp / "out" / "megasynth" / "train")
    assert all(e["metric"] is False and e["depth_units"] == "scene" for e in entries)
    reports, problems = check_root(tmp / "out", progress=False, max_pairs=6)
    assert not problems and all(r.ok for r in reports), [r.problems for r in reports]
    assert max(r.median_rel_error for r in reports) < 0.01


def test_exr_depth_and_rgba_readers(tmp_path):
    depth = np.array([[1.5, 1e10], [0.25, 3.0]], np.float32)
    fake.write_exr(tmp_path / "d.exr", depth)
    np.testing.assert_array_equal(read_exr_depth(tmp_path / "d.exr"), depth)  # sentinel as stored
    import cv2

    bgra = np.zeros((2, 2, 4), np.uint8)
    bgra[..., 0], bgra[..., 2], bgra[..., 3] = 10, 200, 255  # blue 10, red 200
    bgra[0, 1, 3] = 0
    cv2.imwrite(str(tmp_path / "c.png"), bgra)
    image, alpha = read_rgba(tmp_path / "c.png")
    assert image.shape == (2, 2, 3) and tuple(image[0, 0]) == (200, 0, 10)
    assert alpha[0, 1] == 0 and alpha[1, 1] == 255
