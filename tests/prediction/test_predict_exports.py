"""`depthpe predict --export colmap nerfstudio` (issue 44 items 1-3): the COLMAP model loads in pycolmap
and round-trips through depthpe's COLMAP reader (K, w2c, points); the nerfstudio folder round-trips
through depthpe's transforms.json reader (cameras, depth within the PNG step); fusion options and the
filtered depth maps; exports without a common camera frame are refused with one line."""

import json

import cv2
import numpy as np
import pytest

from depthpe.cli import main
from depthpe.config import ConfigError
from depthpe.scenes.cameras import read_cameras, read_colmap
from depthpe.scenes.colmap_points import read_colmap_points
from depthpe.scenes.transforms_json import read_transforms
from depthpe.prediction.files import read_ply
from depthpe.prediction.nerfstudio_export import depth_unit
from tests.fixtures.prediction import OUT_HW, VIEWS
from tests.helpers.optional import import_pycolmap

pycolmap = import_pycolmap()


@pytest.fixture(scope="module")
def exported(tmp_path_factory, saved_model, inputs):
    out = tmp_path_factory.mktemp("exported")
    assert main(["predict", "--model", str(saved_model), "--images", str(inputs / "images"), "--cameras",
                 str(inputs / "cams.json"), "--image-width", "42", "--out", str(out), "--export", "colmap",
                 "nerfstudio", "--fusion-views", "1", "--fusion-rel", "0.3", "--filtered-depth"]) == 0
    return out


def _frames(out):
    return json.loads((out / "prediction.json").read_text())["frames"]


def _image(path):
    return cv2.cvtColor(cv2.imread(str(path)), cv2.COLOR_BGR2RGB)


def _check_cameras(cams, frames, prefix=""):
    assert sorted(cams) == sorted(f"{prefix}{f['stem']}.png" for f in frames)
    for f in frames:
        cam = cams[f"{prefix}{f['stem']}.png"]
        np.testing.assert_allclose(cam.K, f["K"], atol=1e-9)
        np.testing.assert_allclose(cam.w2c, f["w2c"], atol=1e-9)
        assert (cam.height, cam.width) == OUT_HW


@pytest.mark.parametrize("fmt", ["bin", "txt"])
def test_colmap_export_round_trips(exported, saved_model, inputs, tmp_path, fmt):
    out = exported
    if fmt == "txt":
        out = tmp_path / "txt"
        assert main(["predict", "--model", str(saved_model), "--images", str(inputs / "images"), "--cameras",
                     str(inputs / "cams.json"), "--image-width", "42", "--out", str(out), "--export", "colmap",
                     "--colmap-format", "txt", "--fusion-views", "1", "--fusion-rel", "0.3"]) == 0
    model = out / "export" / "colmap" / "sparse" / "0"
    assert (model / f"points3D.{fmt}").is_file()
    frames = _frames(out)
    _check_cameras(read_cameras(out / "export" / "colmap"), frames)  # depthpe's reader (pycolmap inside)
    if fmt == "txt":
        _check_cameras(read_colmap(model, use_pycolmap=False), frames)  # and the built-in text parser
    rec = pycolmap.Reconstruction(str(model))
    points, colors = read_ply(out / "points.ply")
    for how in ([None, False] if fmt == "txt" else [None]):  # depthpe's reader of the points, both ways
        ids, xyz, rgb = read_colmap_points(out / "export" / "colmap", use_pycolmap=how)
        np.testing.assert_array_equal(ids, np.arange(1, len(points) + 1))
        np.testing.assert_allclose(xyz, points, rtol=1e-6, atol=1e-6)  # the PLY stores float32
        np.testing.assert_array_equal(rgb, colors)
    assert len(rec.images) == VIEWS and len(rec.points3D) == len(points) > 0
    ids = sorted(rec.points3D)
    xyz = np.array([rec.points3D[i].xyz for i in ids])
    np.testing.assert_allclose(xyz, points, rtol=1e-6, atol=1e-6)  # the PLY stores float32
    np.testing.assert_array_equal(np.array([rec.points3D[i].color for i in ids]), colors)
    for i in ids[:: max(1, len(ids) // 50)]:
        track = rec.points3D[i].track.elements
        assert len(track) >= 2  # its own image and at least one view that agreed (--fusion-views 1)
        for el in track:
            assert rec.images[el.image_id].points2D[el.point2D_idx].point3D_id == i
    for f in frames:
        np.testing.assert_array_equal(_image(out / "export" / "colmap" / "images" / f"{f['stem']}.png"),
                                      _image(out / f"{f['stem']}_image.png"))
    cam = rec.cameras[1]
    assert cam.model.name == "PINHOLE" and (cam.height, cam.width) == OUT_HW
    K = np.array(frames[0]["K"])
    np.testing.assert_allclose(cam.params, [K[0, 0], K[1, 1], K[0, 2] + 0.5, K[1, 2] + 0.5])


def test_nerfstudio_export_round_trips(exported):
    frames = _frames(exported)
    path = exported / "export" / "nerfstudio" / "transforms.json"
    scene = read_transforms(path)
    _check_cameras({f.name: f for f in scene.frames}, frames, prefix="images/")
    doc = json.loads(path.read_text())
    step = doc["depth_unit_scale_factor"]
    assert step == doc["integer_depth_scale"] == scene.integer_depth_scale == 0.001  # the random model's depth fits
    assert doc["ply_file_path"] == "points.ply" and (exported / "export" / "nerfstudio" / "points.ply").is_file()
    for frame, f in zip(scene.frames, frames):
        png = cv2.imread(str(scene.depth_path(frame)), cv2.IMREAD_UNCHANGED)
        assert png.dtype == np.uint16
        filtered = np.load(exported / f"{f['stem']}_depth_filtered.npy")
        assert np.abs(png * scene.integer_depth_scale - filtered).max() <= step / 2 + 1e-9
        assert ((png == 0) == (filtered == 0)).all()


def test_fusion_filters_points_and_depth(exported, saved_model, inputs, tmp_path):
    assert main(["predict", "--model", str(saved_model), "--images", str(inputs / "images"), "--cameras",
                 str(inputs / "cams.json"), "--image-width", "42", "--out", str(tmp_path / "all")]) == 0
    every = json.loads((tmp_path / "all" / "prediction.json").read_text())
    fused = json.loads((exported / "prediction.json").read_text())
    assert fused["fusion"] == {"min_views": 1, "rel_threshold": 0.3, "pixel_threshold": None}
    kept = sum(int((np.load(exported / f"{f['stem']}_depth_filtered.npy") > 0).sum()) for f in fused["frames"])
    assert kept == fused["points"] < every["points"] == VIEWS * OUT_HW[0] * OUT_HW[1]


def test_depth_unit():
    assert depth_unit(65.0) == 0.001
    assert depth_unit(655.35) == pytest.approx(0.01)
    assert depth_unit(1.0, 0.0001) == 0.0001
    # millimetres while the largest depth fits in 65535 of them, then the step that just fits it
    assert depth_unit(65.535) == 0.001 and depth_unit(65.6) == pytest.approx(65.6 / 65535)
    # an asked step is taken while the largest depth rounds to at most 65535 steps
    assert depth_unit(65535.4 * 0.01, 0.01) == 0.01
    with pytest.raises(ConfigError, match=r"needs more than 65535 steps of the 16-bit PNG; pass at least 0\.0100001$"):
        depth_unit(65535.6 * 0.01, 0.01)
    assert depth_unit(655.356, 655.356 / 65535) == pytest.approx(0.0100001, rel=1e-6)  # the suggestion fits


@pytest.mark.parametrize("extra, match", [
    (["--export", "colmap"], "--export colmap needs --cameras"),
    (["--cameras", "CAMS", "--export", "nerfstudio", "--nerfstudio-depth-unit", "1e-9"],
     "--nerfstudio-depth-unit 1e-09: the largest depth"),
    (["--fusion-views", "-1"], "--fusion-views must be >= 0"),
])
def test_export_errors_are_one_line(saved_model, inputs, tmp_path, capsys, extra, match):
    extra = [str(inputs / "cams.json") if e == "CAMS" else e for e in extra]
    assert main(["predict", "--model", str(saved_model), "--images", str(inputs / "images"), "--image-width", "42",
                 "--out", str(tmp_path / "o"), *extra]) == 2
    err = capsys.readouterr().err.strip().rsplit("\r", 1)[-1].splitlines()[-1]  # after the progress bar, if any
    assert err.startswith("error:") and match in err
    assert not (tmp_path / "o" / "prediction.json").exists()
