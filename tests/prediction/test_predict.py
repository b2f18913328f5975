"""`depthpe predict` and `depthpe.predict` on a synthetic scene written out as images + COLMAP text +
cameras JSON (issue 16 item 1): files load back to the predictions, the PLY holds the expected
points, and with ground-truth depth substituted for the model the fused cloud lands on the scene's
surfaces (resize/crop of K, scale-back and unprojection exact)."""

import json
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
import torch

import depthpe
from depthpe.cli import main
from depthpe.config import ConfigError
from depthpe.scenes.synth import camera_rays, cast_rays
from depthpe.scenes.cameras import FrameCamera
from depthpe.prediction.files import read_depth_png, read_ply
from depthpe.prediction.result import fuse_points
from depthpe.model import DepthModel
from depthpe.model.training_inputs import TrainingInputs, write_training_inputs
from depthpe.prediction.api import input_size, nominal_K, plan_views
from depthpe.loader.sampling import target_size
from tests.fixtures.prediction import H, OUT_HW, VIEWS, W
from tests.helpers.training import micro_model











def test_cli_colmap_and_json(model_dir, inputs, tmp_path, capsys):
    argv = ["predict", "--model", str(model_dir), "--images", str(inputs / "images"), "--dtype", "fp32",
            "--max-views", "4"]
    assert main([*argv, "--cameras", str(inputs / "colmap"), "--out", str(tmp_path / "a")]) == 0
    said = capsys.readouterr().out
    assert "predicted 4 image(s) at 42x28" in said and "all 4 images in one prediction" in said
    assert main([*argv, "--cameras", str(inputs / "cams.json"), "--out", str(tmp_path / "b"),
                 "--conf-threshold", "1.5"]) == 0
    result = depthpe.predict(model_dir, inputs / "images", inputs / "cams.json", max_views=4)
    assert result.size == OUT_HW and result.unit == "cameras" and result.views_per_prediction == 4
    summary = json.loads((tmp_path / "a" / "prediction.json").read_text())
    assert summary["size"] == list(OUT_HW) and summary["views_per_prediction"] == 4
    for i, frame in enumerate(result.frames):
        stem = tmp_path / "b" / f"v{i}"
        np.testing.assert_array_equal(np.load(f"{stem}_depth.npy"), frame.depth)  # npy: exact
        np.testing.assert_array_equal(np.load(f"{stem}_conf.npy"), frame.conf)
        scale = json.loads((tmp_path / "b" / f"v{i}_depth.json").read_text())["scale"]
        assert np.abs(read_depth_png(f"{stem}_depth.png") - frame.depth).max() <= scale / 2 + 1e-12
        color = cv2.imread(f"{stem}_depth_color.png")
        assert color.shape[0] == OUT_HW[0] and color.shape[1] > OUT_HW[1]  # colour bar appended
        # COLMAP (text, +0.5 pixel shift and quaternions) gives the same cameras, hence the same depth
        np.testing.assert_allclose(np.load(tmp_path / "a" / f"v{i}_depth.npy"), frame.depth, rtol=1e-4)
    points, colors = read_ply(tmp_path / "a" / "points.ply")
    assert len(points) == sum(int((f.depth > 0).sum()) for f in result.frames) == VIEWS * OUT_HW[0] * OUT_HW[1]
    kept = sum(int(((f.depth > 0) & (f.conf >= 1.5)).sum()) for f in result.frames)
    assert len(read_ply(tmp_path / "b" / "points.ply")[0]) == kept
    assert json.loads((tmp_path / "b" / "prediction.json").read_text())["points"] == kept
    np.testing.assert_array_equal(colors[: OUT_HW[0] * OUT_HW[1]], result.frames[0].image.reshape(-1, 3))


def ground_truth_forward(scene, frames):
    """A stand-in for DepthModel.forward returning the scene's true depth in the normalized unit of
    each prediction: views are recognised by their input image; the reference is view 0 and the
    scale is the mean distance of the other camera centres to it (docs/conventions.md)."""
    from depthpe.scenes.synth import render_views

    lookup = {f.image.tobytes(): i for i, f in enumerate(frames)}

    def forward(images, K, w2c_n):
        x = (images[0].permute(0, 2, 3, 1) * 255).round().to(torch.uint8).numpy()
        idx = [lookup[im.tobytes()] for im in x]
        centers = np.stack([-scene["w2c"][i][:, :3].T @ scene["w2c"][i][:, 3] for i in idx])
        s = np.linalg.norm(centers[1:] - centers[0], axis=1).mean()
        if len(idx) > 1:  # predict normalized the cameras with this reference and scale
            assert w2c_n[0, 1:, :3, 3].norm(dim=-1).mean().item() == pytest.approx(1.0, rel=1e-5)
        _, depth = render_views(scene["scene"], K[0].double().numpy(), scene["w2c"][idx], *images.shape[-2:])
        depth = torch.from_numpy(depth / s).float()[None]
        return {"depth": depth, "conf": torch.full_like(depth, 2.0)}

    return forward


@pytest.mark.parametrize("max_views, unit", [(4, 1.0), (2, 1000.0)])
def test_ground_truth_depth_lands_on_the_surfaces(model_dir, inputs, scene, max_views, unit):
    """Cameras given in scene units x ``unit`` (e.g. millimetres): the fused cloud is the scene's true
    surface points x ``unit`` to 1e-4 relative, for one prediction of all views and for one
    prediction per image with its nearest camera."""
    cams = {f"v{i}.png": FrameCamera(f"v{i}.png", scene["K"][i],
                                     np.c_[scene["w2c"][i][:, :3], scene["w2c"][i][:, 3] * unit], W, H)
            for i in range(VIEWS)}
    model = DepthModel.from_pretrained(model_dir)
    model.training_inputs = TrainingInputs(42, (0.5, 1.0), (2, 3))
    first = depthpe.predict(model, inputs / "images", cams, max_views=max_views)
    model.forward = ground_truth_forward(scene, first.frames)
    result = depthpe.predict(model, inputs / "images", cams, max_views=max_views)
    assert result.mode == ("all" if max_views == 4 else "nearest") and result.views_per_prediction == max_views
    points, _, index = fuse_points(result)
    for i, frame in enumerate(result.frames):
        O, D = camera_rays(frame.K[None], scene["w2c"][i][None], *OUT_HW)
        t, surface = cast_rays(scene["scene"], O[0, :1, 0], D[0].reshape(-1, 3))
        hit = surface >= 0
        gt = (O[0].reshape(-1, 3) + t[:, None] * D[0].reshape(-1, 3))[hit] * unit
        np.testing.assert_array_equal((frame.depth > 0).ravel(), hit)
        np.testing.assert_allclose(frame.depth.ravel()[hit], t[hit] * unit, rtol=1e-5)
        err = np.linalg.norm(points[index == i] - gt, axis=1) / np.linalg.norm(gt - O[0, 0, 0] * unit, axis=1)
        assert err.max() < 1e-4, err.max()


def test_without_cameras(inputs, tmp_path):
    result = depthpe.predict(micro_model("rope"), inputs / "images", max_views=3)
    assert result.unit == "normalized" and result.mode == "nearest" and len(result.frames) == VIEWS
    assert result.frames[0].views == ["v0.png", "v1.png", "v2.png"]
    assert result.frames[3].views == ["v3.png", "v2.png", "v1.png"]
    assert result.size == (322, 518)  # no training_inputs: width 518, the image aspect 0.625 (H a multiple of 14)
    with pytest.raises(ConfigError, match="needs cameras"):
        depthpe.predict(micro_model("prope"), inputs / "images")


def test_cli_errors_are_one_line(inputs, tmp_path, capsys):
    model = micro_model("prope")
    model.save_pretrained(tmp_path / "m")
    write_training_inputs(tmp_path / "m", TrainingInputs(42, (0.5, 1.0), (2, 3)))
    base = ["predict", "--model", str(tmp_path / "m"), "--out", str(tmp_path / "o")]
    for extra, match in [([], "needs cameras"),
                         (["--cameras", str(tmp_path / "none.json")], "does not exist"),
                         (["--cameras", str(inputs / "cams.json"), "--max-views", "0"], "--max-views must be >= 1")]:
        assert main([*base, "--images", str(inputs / "images"), *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error:") and match in err and "\n" not in err
    first = json.loads((inputs / "cams.json").read_text())["frames"][0]
    (tmp_path / "one.json").write_text(json.dumps({"frames": [first]}))
    assert main([*base, "--images", str(inputs / "images"), "--cameras", str(tmp_path / "one.json")]) == 2
    assert "no camera for image 'v1.png'" in capsys.readouterr().err
    assert main([*base, "--images", str(tmp_path / "*.jpg"), "--cameras", str(inputs / "cams.json")]) == 2
    assert "no images found" in capsys.readouterr().err


def test_camera_at_another_resolution_is_rescaled(inputs, scene):
    """A camera calibrated at twice the resolution (same aspect) gives the same K after rescaling."""
    model = micro_model("rope")
    model.training_inputs = TrainingInputs(42, (0.5, 1.0), (2, 4))
    from depthpe.geometry import resize_intrinsics

    K2 = resize_intrinsics(torch.from_numpy(scene["K"]), 2, 2).numpy()
    big = {f"v{i}.png": FrameCamera(f"v{i}.png", K2[i], scene["w2c"][i], 2 * W, 2 * H) for i in range(VIEWS)}
    same = {f"v{i}.png": FrameCamera(f"v{i}.png", scene["K"][i], scene["w2c"][i], W, H) for i in range(VIEWS)}
    a = depthpe.predict(model, inputs / "images", big)
    b = depthpe.predict(model, inputs / "images", same)
    np.testing.assert_allclose(a.frames[2].K, b.frames[2].K, atol=1e-9)
    assert any("rescaled" in n for n in a.notes)


def test_plan_views():
    w2c = np.stack([np.c_[np.eye(3), [-x, 0, 0]] for x in (0.0, 1.0, 5.0, 1.5)])
    assert plan_views(4, 4, w2c) == ("all", [[0, 1, 2, 3]])
    mode, plans = plan_views(4, 2, w2c)
    assert mode == "nearest" and plans == [[0, 1], [1, 3], [2, 3], [3, 1]]
    # without cameras: the neighbours in file order, the lower index first on a tie
    assert plan_views(5, 3, None) == ("nearest", [[0, 1, 2], [1, 0, 2], [2, 1, 3], [3, 2, 4], [4, 3, 2]])


def test_the_input_aspect_is_clamped_to_the_trained_range():
    trained = SimpleNamespace(image_width=56, aspect=(0.5, 0.75))
    assert input_size((300, 200), trained) == target_size(0.75, 56)  # a portrait image: the tallest trained
    assert input_size((100, 500), trained) == target_size(0.5, 56)  # a panorama: the widest trained
    assert input_size((120, 200), trained) == target_size(0.6, 56)  # inside the range: its own aspect
    assert input_size((300, 200), None, image_width=56) == target_size(1.5, 56)  # no sidecar: no clamp


def test_images_without_cameras_get_a_centred_nominal_camera():
    K = nominal_K(4, 6)
    # focal length = width; principal point at the centre of the pixel grid (pixel centres at integers)
    np.testing.assert_array_equal(K, [[6.0, 0.0, 2.5], [0.0, 6.0, 1.5], [0.0, 0.0, 1.0]])


def test_bf16_and_scene_file_cameras(model_dir, inputs, scene, tmp_path):
    """bf16 autocast runs and stays close to fp32; a scene file serves as the camera source."""
    from depthpe.scenes.format.scene_file import write_scene

    write_scene(tmp_path / "s.h5", images=scene["images"], depth=scene["depth"], K=scene["K"], w2c=scene["w2c"],
                dataset="t", scene_id="s", split="val", metric=False, depth_units="scene", source="test",
                frame_names=[f"v{i}.png" for i in range(VIEWS)])
    fp32 = depthpe.predict(model_dir, inputs / "images", tmp_path / "s.h5", max_views=4)
    bf16 = depthpe.predict(model_dir, inputs / "images", tmp_path / "s.h5", max_views=4, dtype="bf16")
    rel = np.abs(bf16.frames[1].depth - fp32.frames[1].depth) / fp32.frames[1].depth
    assert bf16.frames[1].depth.dtype == np.float32 and np.median(rel) < 0.05
    np.testing.assert_allclose(fp32.frames[1].w2c, scene["w2c"][1])


def test_colorbar_shape():
    from depthpe.report.viz import colorize_depth, with_colorbar

    rgb = colorize_depth(np.linspace(1, 5, 120 * 160, dtype=np.float32).reshape(120, 160))
    out = with_colorbar(rgb, 1.0, 5.0, label="m")
    assert out.dtype == np.uint8 and out.shape[0] == 120 and out.shape[1] > 160
    np.testing.assert_array_equal(out[:, :160], rgb)
