"""The one lens check (depthpe.scenes.lens) behind every camera reader: each field of each format that
changes the projection is read, refused with the undistort hint, or ignored (docs/data.md, "Lens
fields"; issue 42 item 2, S5)."""

import json

import numpy as np
import pytest

from depthpe.config import ConfigError
from depthpe.scenes.cameras import read_cameras
from depthpe.scenes.lens import UNDISTORT_HINT, lens_problem
from depthpe.rmvd.samples import load_sample_list


def _transforms(tmp_path, top=None, frame=None):
    doc = {"fl_x": 40.0, "fl_y": 40.0, "cx": 20.0, "cy": 15.0, "w": 40, "h": 30, **(top or {}),
           "frames": [{"file_path": "images/a.png", "transform_matrix": np.eye(4).tolist(), **(frame or {})}]}
    path = tmp_path / "transforms.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("top,frame,message", [
    ({"is_fisheye": True}, {}, "is_fisheye: True marks a fisheye lens"),
    ({}, {"is_fisheye": True}, "is_fisheye: True marks a fisheye lens"),
    ({"ftheta_p0": 0.0, "ftheta_p1": 500.0}, {}, "ftheta_p1 = 500 describes an f-theta (fisheye) lens"),
    ({"latlong": True}, {}, "latlong: True marks a latitude-longitude projection"),
    ({"equirectangular": True}, {}, "equirectangular: True marks an equirectangular projection"),
    ({"distortion_params": [0.05, 0, 0, 0, 0, 0]}, {}, "lens distortion (k1=0.05)"),
    ({}, {"distortion_params": [0, 0, 0, 0, 0, 0.002]}, "lens distortion (p2=0.002)"),
    ({"camera_model": "EQUIRECTANGULAR"}, {}, "camera_model EQUIRECTANGULAR is not a pinhole camera"),
])
def test_instant_ngp_and_nerfstudio_lens_fields_are_refused_in_one_line(tmp_path, top, frame, message):
    with pytest.raises(ConfigError) as err:
        read_cameras(_transforms(tmp_path, top, frame))
    line = str(err.value)
    assert message in line and UNDISTORT_HINT in line and "\n" not in line and "frames[0] (images/a.png)" in line


def test_informational_and_zero_lens_fields_are_read_as_a_pinhole(tmp_path):
    top = {"is_fisheye": False, "latlong": False, "distortion_params": [0, 0, 0, 0, 0, 0], "camera_model": "OPENCV",
           "k1": 0.0, "aabb_scale": 16, "sharpness": 830.0}
    cam = read_cameras(_transforms(tmp_path, top))["images/a.png"]
    np.testing.assert_allclose(cam.K, [[40.0, 0, 19.5], [0, 40.0, 14.5], [0, 0, 1]])
    with pytest.raises(ConfigError, match="distortion_params must be a list of at most 6 numbers"):
        read_cameras(_transforms(tmp_path, {"distortion_params": "none"}))


def test_a_skewed_K_is_refused_by_the_cameras_json_and_the_rmvd_lists(tmp_path):
    K = [[40.0, 0.5, 20.0], [0.0, 40.0, 15.0], [0.0, 0.0, 1.0]]
    (tmp_path / "c.json").write_text(json.dumps({"frames": [{"file": "a.png", "K": K, "w2c": np.eye(4).tolist()}]}))
    with pytest.raises(ConfigError, match=r"camera 'a.png': K has skew \(K\[0\]\[1\] = 0.5\)"):
        read_cameras(tmp_path / "c.json")
    doc = {"dataset": "toy", "samples": [{"name": "s", "keyview": 0, "depth": "gt.npy",
                                          "views": [{"image": "a.png", "K": K, "pose": np.eye(4).tolist()}]}]}
    (tmp_path / "toy.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as err:
        load_sample_list(tmp_path / "toy.json", {})
    assert "K has skew (K[0][1] = 0.5)" in str(err.value) and UNDISTORT_HINT in str(err.value)


def test_lens_problem_reads_a_pinhole_and_names_the_first_off_pinhole_field():
    assert lens_problem(model="PINHOLE", coefficients={"k1": 0.0, "p1": None}, flags={"is_fisheye": False},
                        K=np.array([[10.0, 0, 5], [0, 10, 5], [0, 0, 1]])) is None
    assert lens_problem(model="SIMPLE_RADIAL", coefficients={"k1": -0.2}).startswith("the camera has lens distortion")
    assert lens_problem(model="OPENCV_FISHEYE").startswith("camera_model OPENCV_FISHEYE is not a pinhole")


@pytest.mark.parametrize("K,message", [
    ([[500.0, 0, 320], [0.2, 500, 240], [0, 0, 1]], "K must be [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]"),
    ([[500.0, 0, 320], [0, 500, 240], [0, 0, 2]], "K must be [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]"),
    ([[500.0, 0, 320], [0, 500, 240], [1e-3, 0, 1]], "K must be [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]"),
    ([[500.0, 0.2, 320], [0, 500, 240], [0, 0, 1]], "K has skew (K[0][1] = 0.2)"),
])
def test_each_off_pinhole_entry_of_K_is_refused_on_its_own(K, message):
    assert message in lens_problem(K=np.array(K))


def test_float_noise_in_K_below_the_focal_relative_tolerance_is_a_pinhole():
    """Skew and K[1][0] are compared with 1e-6 x the focal length: 1e-4 at f = 500 (2e-7 f) is float noise
    of a converted K, 1e-3 (2e-6 f) is skew."""
    noise = np.array([[500.0, 1e-4, 320], [1e-4, 500, 240], [0, 0, 1]])
    assert lens_problem(K=noise) is None
    assert "K has skew" in lens_problem(K=noise + [[0, 9e-4, 0], [0, 0, 0], [0, 0, 0]])
    assert "K must be" in lens_problem(K=noise + [[0, 0, 0], [9e-4, 0, 0], [0, 0, 0]])


def test_distortion_params_holding_a_bool_are_refused_not_read_as_a_number(tmp_path):
    with pytest.raises(ConfigError, match=r"distortion_params must be a list of at most 6 numbers .* got \[True\]"):
        read_cameras(_transforms(tmp_path, {"distortion_params": [True]}))
