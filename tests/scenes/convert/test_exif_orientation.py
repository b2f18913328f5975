"""Phone photos taken in portrait (issue 23 item 3): a JPEG stores the sensor's landscape pixel grid
plus an EXIF tag "rotate by 90" (orientation 6), while the cameras (and the depth maps) describe the
stored grid. `depthpe convert folder` and `depthpe predict` read every image in its stored grid,
say once for how many images a tag was ignored, and refuse a camera of another aspect ratio."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from depthpe.cli import main
from depthpe.config import ConfigError
from depthpe.scenes.format.image_bytes import decode_rgb, exif_orientation
from depthpe.scenes.synth import generate_scene
from depthpe.scenes.cameras import FrameCamera, fit_camera, write_json_cameras
from depthpe.model.training_inputs import TrainingInputs, write_training_inputs
from depthpe.testing.captures import read_scene_frames
from tests.helpers.exif import PORTRAIT, jpeg_with_orientation
from tests.helpers.training import micro_model

H, W, VIEWS = 42, 56, 4  # the sensor grid (landscape); displayed upright it is 56 high, 42 wide




@pytest.fixture(scope="module")
def scene():
    return generate_scene(5, views=VIEWS, height=H, width=W)


@pytest.fixture(scope="module")
def capture(tmp_path_factory, scene):
    """An own capture of portrait photos: images/*.jpg (orientation 6), depth/*.npy and cameras.json,
    all in the sensor grid (W x H)."""
    root = tmp_path_factory.mktemp("phone") / "portrait"
    (root / "images").mkdir(parents=True)
    (root / "depth").mkdir()
    cams = []
    for i in range(VIEWS):
        (root / "images" / f"IMG_{i}.jpg").write_bytes(jpeg_with_orientation(scene["images"][i], PORTRAIT))
        np.save(root / "depth" / f"IMG_{i}.npy", scene["depth"][i])
        cams.append(FrameCamera(f"IMG_{i}.jpg", scene["K"][i], scene["w2c"][i], W, H))
    write_json_cameras(root / "cameras.json", cams)
    return root


def test_the_fixture_is_a_portrait_photo(capture):
    """OpenCV's default decode applies the tag (the trap); depthpe's reader keeps the stored grid."""
    data = (capture / "images" / "IMG_0.jpg").read_bytes()
    assert cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR).shape[:2] == (W, H)
    rgb, tag = decode_rgb(data)
    assert rgb.shape == (H, W, 3) and tag == PORTRAIT and exif_orientation(data) == PORTRAIT


def test_convert_keeps_images_depth_and_K_in_the_cameras_grid(capture, scene, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["convert", "folder", "--src", str(capture), "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "1 scenes checked, 0 failed" in printed  # depthpe check: depth and K agree across views
    got = read_scene_frames(out / "folder" / "train" / "portrait.h5")
    assert got["images"].shape == (VIEWS, H, W, 3) and got["depth"].shape == (VIEWS, H, W)
    sensor = np.stack([decode_rgb((capture / "images" / f"IMG_{i}.jpg").read_bytes())[0] for i in range(VIEWS)])
    assert np.abs(got["images"].astype(int) - sensor).mean() < 2.0  # the raw grid, up to JPEG re-encoding
    np.testing.assert_allclose(got["K"], scene["K"], atol=1e-4)  # float32 storage
    valid = scene["depth"] > 0
    assert ((got["depth"] > 0) == valid).all()
    np.testing.assert_allclose(got["depth"][valid], scene["depth"][valid], rtol=1e-3)  # float16 storage
    assert printed.count("EXIF orientation ignored for 4 image(s)") == 1
    summary = json.loads((out / "folder" / "convert_summary.json").read_text())
    assert summary["exif_orientation_ignored"] == VIEWS and summary["frames_dropped"] == {}


def test_predict_gives_depth_in_the_cameras_grid(capture, tmp_path, capsys):
    from depthpe.prediction.api import input_size

    inputs = TrainingInputs(42, (0.5, 2.0), (2, 4))  # aspects up to 2: a rotated grid would be kept
    model = micro_model("prope")
    model.save_pretrained(tmp_path / "m")
    write_training_inputs(tmp_path / "m", inputs)
    assert main(["predict", "--model", str(tmp_path / "m"), "--images", str(capture / "images"),
                 "--cameras", str(capture / "cameras.json"), "--out", str(tmp_path / "o")]) == 0
    expected, rotated = input_size((H, W), inputs), input_size((W, H), inputs)
    assert expected != rotated and expected[0] < expected[1]
    for i in range(VIEWS):
        assert np.load(tmp_path / "o" / f"IMG_{i}_depth.npy").shape == expected
    assert capsys.readouterr().out.count("EXIF orientation ignored for 4 image(s)") == 1


def test_camera_of_another_aspect_is_an_error_in_convert(capture, tmp_path, capsys):
    """Cameras written for the displayed (rotated) grid: the scene is skipped with a one-line reason
    naming the image and both sizes; K is never rescaled anisotropically."""
    doc = json.loads((capture / "cameras.json").read_text())
    for frame in doc["frames"]:
        frame["width"], frame["height"] = H, W
    rotated = tmp_path / "rotated.json"
    rotated.write_text(json.dumps(doc))
    assert main(["convert", "folder", "--src", str(capture), "--cameras", str(rotated),
                 "--out", str(tmp_path / "out"), "--quiet"]) == 1
    printed = capsys.readouterr().out
    line, = [ln for ln in printed.splitlines() if "skipped portrait" in ln]
    assert f"image 'IMG_0.jpg' is {W}x{H} (WxH) but its camera is for {H}x{W}" in line
    assert "width and height swapped" in line and "give the camera of the image as stored" in line


def test_fit_camera_rescales_only_at_the_same_aspect():
    K = np.array([[50.0, 0, 27.5], [0, 50.0, 20.5], [0, 0, 1]])
    cam = FrameCamera("a.jpg", K, np.eye(4), W, H)
    same, note = fit_camera(cam, "a.jpg", H, W)
    assert same is cam and note is None
    half, note = fit_camera(cam, "a.jpg", H // 2, W // 2)
    assert (half.width, half.height) == (W // 2, H // 2) and half.K[0, 0] == half.K[1, 1] == 25.0
    assert note == f"a.jpg: K rescaled from {W}x{H} to the image's {W // 2}x{H // 2}"
    with pytest.raises(ConfigError, match=f"is 100x{H} \\(WxH\\) but its camera is for {W}x{H}, another aspect"):
        fit_camera(cam, "a.jpg", H, 100)


def test_depth_map_of_another_aspect_is_dropped_not_stretched(capture, tmp_path):
    """A depth map written in the displayed (rotated) grid no longer matches the image: the frame is
    dropped with its reason instead of being resampled to the image's shape."""
    from depthpe.scenes.convert import convert
    from depthpe.scenes.convert.common import ConvertOptions

    src = tmp_path / "cap"
    (src / "depth").mkdir(parents=True)
    (src / "images").symlink_to(capture / "images")
    (src / "cameras.json").write_text((capture / "cameras.json").read_text())
    for i in range(VIEWS):
        depth = np.load(capture / "depth" / f"IMG_{i}.npy")
        np.save(src / "depth" / f"IMG_{i}.npy", np.rot90(depth, -1) if i == 0 else depth)
    summary = convert("folder", src, tmp_path / "out", ConvertOptions(progress=False))
    assert summary["frames_dropped"] == {"depth map aspect differs from the image": 1}
    assert summary["frames_written"] == VIEWS - 1
