"""`depthpe predict --cameras transforms.json` (nerfstudio / instant-ngp): the same cameras as a
cameras JSON give the same depth; a distorted camera is refused with one line naming the
undistortion step."""

import numpy as np

import depthpe
from depthpe.cli import main
from depthpe.scenes.cameras import FrameCamera
from depthpe.scenes.transforms_json import write_transforms_json
from depthpe.model.training_inputs import TrainingInputs, write_training_inputs
from tests.fixtures.prediction import H, VIEWS, W
from tests.helpers.training import micro_model


def _transforms(path, scene, **fields):
    cams = [FrameCamera(f"images/v{i}.png", scene["K"][i], scene["w2c"][i], W, H) for i in range(VIEWS)]
    return write_transforms_json(path, cams, fields=fields)


def test_transforms_json_gives_the_same_prediction_as_cameras_json(inputs, scene, tmp_path):
    model = micro_model("prope")  # a camera encoding: the cameras change the depth
    model.training_inputs = TrainingInputs(42, (0.5, 1.0), (2, 4))
    a = depthpe.predict(model, inputs / "images", _transforms(tmp_path / "transforms.json", scene))
    b = depthpe.predict(model, inputs / "images", inputs / "cams.json")
    for fa, fb in zip(a.frames, b.frames):
        np.testing.assert_allclose(fa.w2c, fb.w2c, atol=1e-9)
        np.testing.assert_allclose(fa.depth, fb.depth, rtol=1e-5)


def test_a_distorted_transforms_json_is_one_line(inputs, scene, tmp_path, capsys):
    model = micro_model("prope")
    model.save_pretrained(tmp_path / "m")
    write_training_inputs(tmp_path / "m", TrainingInputs(42, (0.5, 1.0), (2, 3)))
    path = _transforms(tmp_path / "transforms.json", scene, camera_model="OPENCV", k1=-0.03, k2=0.0)
    assert main(["predict", "--model", str(tmp_path / "m"), "--images", str(inputs / "images"), "--cameras", str(path),
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "lens distortion (k1=-0.03)" in err and "\n" not in err
    assert "colmap image_undistorter" in err and not (tmp_path / "o").exists()
