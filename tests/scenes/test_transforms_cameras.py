"""transforms.json cameras (nerfstudio / instant-ngp) for `depthpe predict --cameras` and
`depthpe convert folder`: camera-to-world in OpenGL axes becomes OpenCV world-to-camera, proven by
reprojecting a synthetic scene's depth across views; a fixture with the other axes does not
reproject; distortion, fisheye models and non-rigid matrices are refused with one line."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from depthpe.config import ConfigError
from depthpe.scenes.cameras import read_cameras
from depthpe.scenes.format.check import pair_disagreement
from depthpe.scenes.format.limits import MAX_FRAME_SIDE
from depthpe.scenes.transforms_json import is_wai_doc, read_transforms
from depthpe.testing.transforms_captures import export_transforms_capture, scene_frames


@pytest.fixture(scope="module")
def scene_path(synth_root):
    return synth_root / "synth" / "train" / "train_000000.h5"


def _reprojection(scene_path, cameras) -> tuple[float, float]:
    """(median relative disagreement, co-visible fraction) of view 0's true depth reprojected into
    view 1 with ``cameras`` (read from the fixture)."""
    sc = scene_frames(scene_path)
    c0, c1 = (cameras[f"images/{name}"] for name in sc["names"][:2])
    stats = pair_disagreement(sc["depth"][0], c0.K, c0.w2c, sc["depth"][1], c1.K, c1.w2c)
    return (float(np.median(stats.rel)) if stats.rel.size else math.inf), stats.overlap


def test_cameras_read_back_exactly_and_depth_reprojects(scene_path, tmp_path):
    out = export_transforms_capture(scene_path, tmp_path / "cap")
    cameras = read_cameras(out / "transforms.json")
    sc = scene_frames(scene_path)
    assert sorted(cameras) == [f"images/{n}" for n in sc["names"]]
    for name, K, w2c in zip(sc["names"], sc["K"], sc["w2c"]):
        cam = cameras[f"images/{name}"]
        np.testing.assert_allclose(cam.K, K, atol=1e-9)
        np.testing.assert_allclose(cam.w2c, w2c, atol=1e-9)
        assert (cam.width, cam.height) == (56, 56)
    rel, overlap = _reprojection(scene_path, cameras)
    assert rel < 2e-3 and overlap > 0.3


def test_a_flipped_convention_does_not_reproject(scene_path, tmp_path):
    wrong = export_transforms_capture(scene_path, tmp_path / "wrong", convention="opencv")  # OpenCV axes, no label
    rel, overlap = _reprojection(scene_path, read_cameras(wrong / "transforms.json"))
    assert rel > 0.05 or overlap < 0.05
    labelled = export_transforms_capture(scene_path, tmp_path / "labelled", convention="opencv", label="opencv")
    rel, overlap = _reprojection(scene_path, read_cameras(labelled / "transforms.json"))
    assert rel < 2e-3 and overlap > 0.3  # camera_convention (WAI's field) is honoured


def _doc(tmp_path, frame_extra=None, **top):
    doc = {"fl_x": 30.0, "fl_y": 30.0, "cx": 20.0, "cy": 15.0, "w": 40, "h": 30, **top,
           "frames": [{"file_path": "./images/a.png", "transform_matrix": np.eye(4).tolist(), **(frame_extra or {})}]}
    path = tmp_path / "transforms.json"
    path.write_text(json.dumps(doc))
    return path


def test_instant_ngp_field_of_view_and_default_centre(tmp_path):
    path = _doc(tmp_path, fl_x=None, fl_y=None, cx=None, cy=None, camera_angle_x=2 * math.atan(0.5))  # null = absent
    cam = read_cameras(path)["images/a.png"]  # './' dropped from the name
    np.testing.assert_allclose(cam.K, [[40.0, 0, 19.5], [0, 40.0, 14.5], [0, 0, 1]])
    np.testing.assert_allclose(cam.w2c, np.diag([1.0, -1.0, -1.0, 1.0])[:3])  # OpenGL identity c2w


def test_a_frames_own_intrinsics_override_the_shared_ones(tmp_path):
    path = _doc(tmp_path, {"fl_x": 60.0})
    doc = json.loads(path.read_text())
    doc["frames"].append({"file_path": "images/b.png", "transform_matrix": np.eye(4).tolist()})
    path.write_text(json.dumps(doc))
    cameras = read_cameras(path)
    assert cameras["images/a.png"].K[0, 0] == 60.0 and cameras["images/a.png"].K[1, 1] == 30.0
    assert cameras["images/b.png"].K[0, 0] == 30.0


def test_fields_of_view_give_fx_from_the_width_and_fy_from_the_height(tmp_path):
    angle_x, angle_y = 2 * math.atan(0.5), 2 * math.atan(0.75)  # w = 40, h = 30: fx = 40, fy = 20
    path = _doc(tmp_path, fl_x=None, fl_y=None, camera_angle_x=angle_x, camera_angle_y=angle_y)
    K = read_cameras(path)["images/a.png"].K
    assert math.isclose(K[0, 0], 20 / math.tan(angle_x / 2)) and math.isclose(K[0, 0], 40.0)
    assert math.isclose(K[1, 1], 15 / math.tan(angle_y / 2)) and math.isclose(K[1, 1], 20.0)


@pytest.mark.parametrize("extra,top,message", [
    ({"k1": 0.1}, {}, "lens distortion (k1=0.1)"),
    ({}, {"camera_model": "OPENCV_FISHEYE", "k1": 0.0}, "camera_model OPENCV_FISHEYE is not a pinhole camera"),
    ({}, {"p2": -0.01}, "lens distortion (p2=-0.01)"),
])
def test_distortion_and_fisheye_are_refused_with_the_undistortion_step(tmp_path, extra, top, message):
    with pytest.raises(ConfigError) as err:
        read_cameras(_doc(tmp_path, extra, **top))
    line = str(err.value)
    assert message in line and "colmap image_undistorter" in line and "ns-process-data" in line
    assert "\n" not in line


def test_non_rigid_matrices_and_missing_fields_are_one_line(tmp_path):
    scaled = np.eye(4)
    scaled[:3, :3] *= 2
    cases = [
        ({"transform_matrix": scaled.tolist()}, {}, "is not a rigid transform"),
        ({"transform_matrix": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1]]}, {}, "last row is"),
        ({"transform_matrix": [[1, 0, 0], [0, 1, 0]]}, {}, "must be a finite 4x4"),
        ({"file_path": ""}, {}, 'needs "file_path"'),
        ({}, {"camera_convention": "blender"}, "camera_convention 'blender' is not one of opencv, opengl"),
        ({}, {"fl_x": None, "camera_angle_x": None, "w": None}, "no complete intrinsics"),
        ({}, {"fl_x": "30"}, "fl_x must be a number, got '30'"),
        ({}, {"w": True}, "w must be a number, got True"),
        ({}, {"integer_depth_scale": math.inf}, "integer_depth_scale must be a positive number, got inf"),
        ({}, {"depth_unit_scale_factor": 0}, "depth_unit_scale_factor must be a positive number, got 0"),
    ]
    for extra, top, message in cases:
        with pytest.raises(ConfigError, match="transforms.json: .*" + re.escape(message)):
            read_cameras(_doc(tmp_path, extra, **top))
    matrix_of_text = {"transform_matrix": [["a", 0, 0, 0]] * 4}
    with pytest.raises(ConfigError, match=re.escape("frames[0] (images/a.png): transform_matrix must be a finite 4x4")):
        read_cameras(_doc(tmp_path, matrix_of_text))


def test_dot_segments_and_doubled_slashes_name_one_file_and_a_frame_must_be_an_object(tmp_path):
    """``./images/./a.png``, ``images//a.png`` and ``images/a.png`` are one image: listed twice is an error."""
    path = _doc(tmp_path, {"file_path": "./images/././a.png"})
    assert list(read_cameras(path)) == ["images/a.png"]
    doc = json.loads(path.read_text())
    doc["frames"].append({**doc["frames"][0], "file_path": "images//a.png"})
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="images/a.png"):
        read_cameras(path)
    doc["frames"][1] = "images/b.png"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=re.escape("frames[1] is not an object")):
        read_cameras(path)


def test_a_file_that_is_not_json_is_one_line(tmp_path):
    (tmp_path / "transforms.json").write_text('{"frames": [')
    with pytest.raises(ConfigError, match=re.escape(f"{tmp_path / 'transforms.json'}: cannot read it as JSON")) as err:
        read_transforms(tmp_path / "transforms.json")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("doc", [{"frames": []}, {"frames": {}}, {"camera_model": "PINHOLE"}, [{"file_path": "a.png"}]])
def test_a_document_without_a_list_of_frames_is_one_line(tmp_path, doc):
    (tmp_path / "transforms.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=r'transforms.json: expected \{"frames": \[\{"file_path", "transform_matrix"'):
        read_transforms(tmp_path / "transforms.json")


def test_a_frame_without_w_and_h_has_an_unknown_size_and_an_empty_depth_path_is_none(tmp_path):
    path = _doc(tmp_path, {"depth_file_path": ""}, w=None, h=None, aabb_scale=16)
    scene = read_transforms(path)
    frame = scene.frames[0]
    assert scene.meta["aabb_scale"] == 16 and "frames" not in scene.meta
    assert (frame.width, frame.height) == (0, 0) and scene.depth_path(frame) is None
    np.testing.assert_allclose(frame.K, [[30.0, 0, 19.5], [0, 30.0, 14.5], [0, 0, 1]])


@pytest.mark.parametrize("keys,wai", [({"frame_modalities": {}}, True), ({"scene_modalities": {}}, True),
                                      ({"frame_modalities": {}, "scene_modalities": {}}, True), ({}, False)])
def test_either_wai_modality_key_marks_a_wai_file_whose_principal_point_is_not_shifted(tmp_path, keys, wai):
    assert is_wai_doc({"frames": [], **keys}) is wai
    cam = read_cameras(_doc(tmp_path, **keys, camera_convention="opencv"))["images/a.png"]
    assert tuple(cam.K[:2, 2]) == ((20.0, 15.0) if wai else (19.5, 14.5))


@pytest.mark.parametrize("side,ok", [(1, True), (MAX_FRAME_SIDE, True), (0, False), (MAX_FRAME_SIDE + 1, False),
                                     (2.5, False)])
def test_image_sides_are_whole_pixels_from_1_to_the_limit(tmp_path, side, ok):
    path = _doc(tmp_path, w=side)
    if ok:
        assert read_transforms(path).frames[0].width == side
    else:
        with pytest.raises(ConfigError, match=rf"w must be a whole number of pixels from 1 to {MAX_FRAME_SIDE}, got"):
            read_transforms(path)


def test_a_3x4_transform_matrix_reads_as_its_4x4(tmp_path):
    c2w = np.eye(4)
    c2w[:3, 3] = [1.0, 2.0, 3.0]
    full = read_cameras(_doc(tmp_path, {"transform_matrix": c2w.tolist()}))["images/a.png"]
    short = read_cameras(_doc(tmp_path, {"transform_matrix": c2w[:3].tolist()}))["images/a.png"]
    np.testing.assert_array_equal(short.w2c, full.w2c)
    np.testing.assert_allclose(full.w2c[:, 3], [-1.0, 2.0, 3.0])  # OpenGL axes: y and z flip, then -R^T t
