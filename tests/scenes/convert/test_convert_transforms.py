"""`depthpe convert folder` with a nerfstudio / instant-ngp transforms.json: cameras and depth maps
(``depth_file_path`` / ``depth_path``, 16-bit PNG times ``integer_depth_scale``) convert back to the
synthetic original and pass `depthpe check`; OpenCV matrices without a label (read as OpenGL) fail
it; a distorted camera skips the scene with the undistortion step."""

from __future__ import annotations

import json

import numpy as np
import pytest

from depthpe.cli import main
from depthpe.scenes.convert import convert
from depthpe.scenes.convert.common import ConvertOptions
from depthpe.testing.captures import read_scene_frames
from depthpe.testing.transforms_captures import export_transforms_capture


@pytest.fixture(scope="module")
def original(synth_root):
    return synth_root / "synth" / "train" / "train_000001.h5"


def _opts(**kw):
    return ConvertOptions(progress=False, workers=1, **kw)


@pytest.mark.parametrize("depth_format,depth_key", [("png", "depth_file_path"), ("npy", "depth_path")])
def test_transforms_capture_converts_back_to_the_original(original, tmp_path, depth_format, depth_key):
    src = export_transforms_capture(original, tmp_path / "cap", depth_format=depth_format, depth_key=depth_key)
    frame = json.loads((src / "transforms.json").read_text())["frames"][0]
    assert frame[depth_key] == f"depth/frame_00000.{depth_format}"
    summary = convert("folder", src, tmp_path / "out", _opts())
    assert summary["scenes_written"] == 1 and summary["frames_dropped"] == {}
    a, b = read_scene_frames(tmp_path / "out" / "folder" / "train" / "cap.h5"), read_scene_frames(original)
    np.testing.assert_allclose(a["K"], b["K"], atol=1e-4)
    np.testing.assert_allclose(a["w2c"], b["w2c"], atol=1e-6)
    both = (a["depth"] > 0) & (b["depth"] > 0)
    assert both.mean() > 0.95
    np.testing.assert_allclose(a["depth"][both], b["depth"][both], rtol=2e-3)  # PNG: depth / scale rounded


def test_convert_folder_checks_the_convention(original, tmp_path, capsys):
    good = export_transforms_capture(original, tmp_path / "good")
    assert main(["convert", "folder", "--src", str(good), "--out", str(tmp_path / "a"), "--quiet"]) == 0
    assert "1 scenes checked, 0 failed" in capsys.readouterr().out
    flipped = export_transforms_capture(original, tmp_path / "flipped", convention="opencv")  # read as OpenGL
    assert main(["convert", "folder", "--src", str(flipped), "--out", str(tmp_path / "b"), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "1 failed" in out and "the camera axes are OpenGL/Blender" in out


def test_a_distorted_camera_skips_the_scene_with_the_undistortion_step(original, tmp_path):
    src = export_transforms_capture(original, tmp_path / "cap")
    doc = json.loads((src / "transforms.json").read_text())
    doc["k1"] = 0.02
    (src / "transforms.json").write_text(json.dumps(doc))
    summary = convert("folder", src, tmp_path / "out", _opts())
    reason = summary["skipped"][0]["reason"]
    assert summary["scenes_skipped"] == 1 and "lens distortion (k1=0.02)" in reason
    assert "colmap image_undistorter" in reason and "\n" not in reason


@pytest.mark.parametrize("unit_field,depth_scale,factor", [
    (None, None, 1e-3),   # nerfstudio's default depth_unit_scale_factor: .npy values are millimetres
    (0.01, None, 0.01),   # the file's depth_unit_scale_factor
    (None, 1.0, 1.0),     # --depth-scale, when given, says how many units a metre is
])
def test_npy_depth_of_a_transforms_capture_follows_nerfstudios_unit_rule(original, tmp_path, unit_field, depth_scale,
                                                                         factor):
    """Issue 42 item 3: nerfstudio multiplies every depth file, .npy included, by depth_unit_scale_factor
    (default 1e-3); depthpe reads a transforms.json capture's .npy depth the same way."""
    src = export_transforms_capture(original, tmp_path / "cap", depth_format="npy", depth_unit_scale_factor=unit_field)
    stored = np.load(src / "depth" / "frame_00000.npy")
    convert("folder", src, tmp_path / "out", _opts(depth_scale=depth_scale))
    converted = read_scene_frames(tmp_path / "out" / "folder" / "train" / "cap.h5")["depth"][0]
    valid = (converted > 0) & (stored > 0)
    np.testing.assert_allclose(converted[valid], stored[valid] * factor, rtol=1e-3)
    if depth_scale is None:  # nerfstudio's rule gives the original depth back
        np.testing.assert_allclose(converted[valid], read_scene_frames(original)["depth"][0][valid], rtol=1e-3)


def test_depth_scale_applies_to_npy_depth_of_a_plain_folder_capture(original, tmp_path):
    from depthpe.testing.captures import export_capture

    src = export_capture(original, tmp_path / "cap", depth_format="npy")  # metres, cameras.json
    np.save(src / "depth" / "frame_00000.npy", np.load(src / "depth" / "frame_00000.npy") * 1000.0)  # now mm
    for name in sorted((src / "depth").glob("*.npy"))[1:]:
        np.save(name, np.load(name) * 1000.0)
    convert("folder", src, tmp_path / "out", _opts(depth_scale=1000.0))
    a, b = read_scene_frames(tmp_path / "out" / "folder" / "train" / "cap.h5"), read_scene_frames(original)
    both = (a["depth"] > 0) & (b["depth"] > 0)
    np.testing.assert_allclose(a["depth"][both], b["depth"][both], rtol=1e-3)
