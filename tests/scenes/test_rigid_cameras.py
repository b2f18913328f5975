"""Every reader of users' cameras refuses a camera matrix that is not a rigid transform (issue:
reliability IV item 15): a 4x4 whose last row is not [0, 0, 0, 1], a rotation that is not orthonormal
with det +1, non-finite entries — with one line, never by silently dropping the last row."""

import json

import numpy as np
import pytest

from depthpe.config import ConfigError
from depthpe.scenes.cameras import FrameCamera, read_cameras
from depthpe.scenes.format.limits import w2c_problems
from depthpe.scenes.format.scene_file import write_scene
from depthpe.prediction.api import _match_cameras
from tests.helpers.scenes import plane_scene

K = [[30.0, 0, 19.5], [0, 30.0, 14.5], [0, 0, 1]]


def _w2c44(last_row=(0, 0, 0, 1), scale=1.0):
    w2c = np.eye(4)
    w2c[:3, :3] *= scale
    w2c[:3, 3] = [0.1, -0.2, 0.3]
    w2c[3] = last_row
    return w2c


def test_the_rule_names_each_defect():
    assert w2c_problems(_w2c44()[None]) == []
    assert "last row is not [0, 0, 0, 1]" in w2c_problems(_w2c44((0, 0, 1, 1))[None])[0]
    assert "non-orthonormal rotation" in w2c_problems(_w2c44(scale=2.0)[None])[0]
    mirrored = _w2c44()
    mirrored[0, 0] = -1.0
    assert "det=-1" in w2c_problems(mirrored[None])[0]
    bad = _w2c44()
    bad[0, 3] = np.nan
    assert w2c_problems(bad[None]) == ["non-finite w2c values in 1 frame(s), first frame 0"]


def test_a_4x4_camera_with_another_last_row_is_refused_not_cut():
    assert FrameCamera("a", K, _w2c44()).w2c.shape == (3, 4)
    with pytest.raises(ValueError, match=r"camera 'a': w2c's last row is not \[0, 0, 0, 1\] \(\[0.0, 0.0, 1.0, 1.0\]"):
        FrameCamera("a", K, _w2c44((0, 0, 1, 1)))


@pytest.mark.parametrize("w2c, message", [
    (_w2c44((0.5, 0, 0, 1)), "last row is not"),
    (_w2c44(scale=1.1), "not orthonormal with det"),
])
def test_the_cameras_json_reader_refuses_with_one_line(tmp_path, w2c, message):
    path = tmp_path / "cams.json"
    path.write_text(json.dumps({"frames": [{"file": "a.png", "K": K, "w2c": w2c.tolist()}]}))
    with pytest.raises(ConfigError, match=message) as err:
        read_cameras(path)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_predict_checks_cameras_given_as_a_dict():
    cams = {"a.png": FrameCamera("a.png", K, _w2c44(scale=1.2)[:3])}
    with pytest.raises(ConfigError, match="a.png.*not orthonormal with det"):
        _match_cameras(["a.png"], [(30, 40)], cams)


@pytest.mark.parametrize("edit, message", [
    (lambda w: w.__setitem__((1, 3), [0, 0, 2, 1]), "last row is not"),
    (lambda w: w.__setitem__((2, slice(0, 3), slice(0, 3)), 1.5 * w[2, :3, :3]), "non-orthonormal rotation"),
])
def test_write_scene_refuses_a_non_rigid_w2c(tmp_path, edit, message):
    sc = plane_scene(4, 30, 40, seed=1)
    w2c = np.concatenate([sc["w2c"], np.tile([[[0, 0, 0, 1.0]]], (4, 1, 1))], axis=1)
    edit(w2c)
    with pytest.raises(ValueError, match=f"w2c is not a rigid world-to-camera transform: .*{message}"):
        write_scene(tmp_path / "s.h5", images=sc["images"], depth=sc["depth"], K=sc["K"], w2c=w2c, dataset="t",
                    scene_id="s", split="train", metric=False, depth_units="scene")
    assert not (tmp_path / "s.h5").exists()
