"""Two images with one file name (issue 23 item 7): `a/img_0.png` and `b/img_0.png` with a camera
source that names `img_0.png` once must not both get that camera. Images match cameras by their
path relative to the images folder first; otherwise by file name, the closest path winning, and
only when that is unique; an ambiguous match is a one-line error in `depthpe convert folder` and `depthpe predict`."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

import depthpe
from depthpe.cli import main
from depthpe.config import ConfigError
from depthpe.scenes.synth import generate_scene
from depthpe.scenes.cameras import FrameCamera, find_camera, match_cameras, write_json_cameras
from tests.helpers.training import micro_model

H, W = 32, 40


@pytest.fixture(scope="module")
def scene():
    return generate_scene(7, views=4, height=H, width=W)


def _cam(name: str) -> FrameCamera:
    return FrameCamera(name, np.eye(3), np.eye(4))


def _capture(root, scene, camera_names):
    """images/{a,b}/img_{0,1}.png with depth/{a,b}/img_{0,1}.npy (frames 0-3 of ``scene``) and a
    cameras.json naming the frames ``camera_names`` (None: leave the frame out)."""
    cams = []
    for i, rel in enumerate(["a/img_0.png", "a/img_1.png", "b/img_0.png", "b/img_1.png"]):
        (root / "images" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "depth" / rel).parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(root / "images" / rel), cv2.cvtColor(scene["images"][i], cv2.COLOR_RGB2BGR))
        np.save((root / "depth" / rel).with_suffix(".npy"), scene["depth"][i])
        if camera_names[i] is not None:
            cams.append(FrameCamera(camera_names[i], scene["K"][i], scene["w2c"][i], W, H))
    write_json_cameras(root / "cameras.json", cams)
    return root


def test_match_cameras_by_relative_path_then_closest_unique_file_name():
    cams = {k: _cam(k) for k in ["a/img_0.png", "b/img_0.png", "images/c/x.png", "images/d/x.png", "solo.png",
                                 "undistorted/raw.png", "y.png"]}
    got = match_cameras(cams, ["a/img_0.png", "b/img_0.png", "c/x.png", "d/x.png", "deep/er/solo.png",
                               "frames/raw.png", "z.png"])
    assert {k: v and v.name for k, v in got.items()} == {
        "a/img_0.png": "a/img_0.png", "b/img_0.png": "b/img_0.png", "c/x.png": "images/c/x.png",
        "d/x.png": "images/d/x.png", "deep/er/solo.png": "solo.png", "frames/raw.png": "undistorted/raw.png",
        "z.png": None}
    # the shared tail is counted from the file name up, however deep the image path
    got = match_cameras({k: _cam(k) for k in ["a1/c/y.png", "a2/d/y.png"]}, ["root/a1/c/y.png"])
    assert got["root/a1/c/y.png"].name == "a1/c/y.png"
    # an exact match takes its camera out of the suffix search: b/img_0.png gets the bare name
    got = match_cameras({k: _cam(k) for k in ["a/img_0.png", "img_0.png"]}, ["a/img_0.png", "b/img_0.png"])
    assert (got["a/img_0.png"].name, got["b/img_0.png"].name) == ("a/img_0.png", "img_0.png")


def test_cameras_named_without_extension_match_images_by_path_without_extension():
    # a scene file without frame_names names its frames frame_00000, ...; exported images frame_00000.png
    cams = {k: _cam(k) for k in ["frame_00000", "frame_00001", "sub/frame_00002", "x.png", "noext"]}
    got = match_cameras(cams, ["frame_00000.png", "frame_00001.jpg", "sub/frame_00002.png", "frame_00002.png",
                               "x.png", "noext"])
    assert {k: v and v.name for k, v in got.items()} == {
        "frame_00000.png": "frame_00000", "frame_00001.jpg": "frame_00001", "sub/frame_00002.png": "sub/frame_00002",
        "frame_00002.png": None, "x.png": "x.png", "noext": "noext"}
    # an exact name wins over the stem match, and one camera never serves two images
    got = match_cameras({k: _cam(k) for k in ["a", "a.png"]}, ["a.png", "a.jpg"])
    assert got["a.png"].name == "a.png" and got["a.jpg"].name == "a"
    # a camera matched exactly does not also serve an image by its stem; a name with a dot is no stem
    got = match_cameras({k: _cam(k) for k in ["a", "b.png"]}, ["a", "a.png", "b.png.jpg"])
    assert got == {"a": got["a"], "a.png": None, "b.png.jpg": None} and got["a"].name == "a"


def test_predict_with_a_scene_file_without_frame_names(scene, tmp_path):
    from depthpe.scenes.format.scene_file import write_scene

    write_scene(tmp_path / "s.h5", images=scene["images"], depth=scene["depth"], K=scene["K"], w2c=scene["w2c"],
                dataset="t", scene_id="s", split="val", metric=False, depth_units="scene", source="test")
    (tmp_path / "images").mkdir()
    for i in range(2):
        cv2.imwrite(str(tmp_path / "images" / f"frame_{i:05d}.png"), cv2.cvtColor(scene["images"][i], cv2.COLOR_RGB2BGR))
    model = tmp_path / "model"
    micro_model().save_pretrained(model)
    result = depthpe.predict(model, tmp_path / "images", tmp_path / "s.h5")
    assert len(result.frames) == 2
    np.testing.assert_allclose(result.frames[1].w2c, scene["w2c"][1][:3], atol=1e-6)


def test_ambiguous_matches_are_one_line_errors():
    with pytest.raises(ConfigError, match=r"^images 'a/img_0.png' and 'b/img_0.png' both match the camera "
                                          r"'img_0.png' .*path relative to the images folder"):
        match_cameras({"img_0.png": _cam("img_0.png")}, ["a/img_0.png", "b/img_0.png"])
    with pytest.raises(ConfigError, match=r"^image 'c.png' matches the cameras 'x/c.png' and 'y/c.png' .* equally"):
        match_cameras({k: _cam(k) for k in ["x/c.png", "y/c.png"]}, ["c.png"])
    got = match_cameras({"x/a/img.png": _cam("x/a/img.png")}, ["a/img.png", "b/img.png"])  # a is closer: no tie
    assert got["a/img.png"].name == "x/a/img.png" and got["b/img.png"] is None
    assert find_camera({k: _cam(k) for k in ["x/c.png", "y/c.png"]}, "c.png") is None  # one image: no camera


def test_convert_refuses_one_camera_name_for_two_images(scene, tmp_path, capsys):
    src = _capture(tmp_path / "cap", scene, ["img_0.png", "img_1.png", None, None])
    assert main(["convert", "folder", "--src", str(src), "--out", str(tmp_path / "out"), "--quiet"]) == 1
    line, = [ln for ln in capsys.readouterr().out.splitlines() if "skipped cap" in ln]
    assert "images 'a/img_0.png' and 'b/img_0.png' both match the camera 'img_0.png'" in line
    assert "path relative to the images folder" in line


def test_convert_with_relative_paths_gives_each_image_its_camera(scene, tmp_path):
    from depthpe.scenes.convert import convert
    from depthpe.scenes.convert.common import ConvertOptions
    from depthpe.testing.captures import read_scene_frames

    names = ["a/img_0.png", "a/img_1.png", "b/img_0.png", "b/img_1.png"]
    src = _capture(tmp_path / "cap", scene, names)
    summary = convert("folder", src, tmp_path / "out", ConvertOptions(progress=False))
    assert summary["frames_written"] == 4
    got = read_scene_frames(tmp_path / "out" / "folder" / "train" / "cap.h5")
    np.testing.assert_allclose(got["w2c"], scene["w2c"], atol=1e-9)  # frames in name order = a/0, a/1, b/0, b/1


def test_predict_refuses_one_camera_name_for_two_images(scene, tmp_path):
    src = _capture(tmp_path / "cap", scene, ["img_0.png", "img_1.png", None, None])
    with pytest.raises(ConfigError, match="images 'a/img_0.png' and 'b/img_0.png' both match the camera"):
        depthpe.predict(micro_model("prope"), src / "images", src / "cameras.json")
    doc = json.loads((src / "cameras.json").read_text())
    for frame, rel in zip(doc["frames"], ["a/img_0.png", "a/img_1.png"]):
        frame["file"] = rel
    doc["frames"] += [dict(doc["frames"][0], file="b/img_0.png"), dict(doc["frames"][1], file="b/img_1.png")]
    (src / "cameras.json").write_text(json.dumps(doc))
    result = depthpe.predict(micro_model("prope"), src / "images", src / "cameras.json")
    assert [f.name for f in result.frames] == ["a/img_0.png", "a/img_1.png", "b/img_0.png", "b/img_1.png"]
