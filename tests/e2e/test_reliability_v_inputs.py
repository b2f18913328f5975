"""Issue 42 items 5 and 6: medium and low bad inputs give one line instead of a traceback."""

import io
import json
import zipfile

import numpy as np
import pytest

from depthpe.cli import main
from depthpe.config import ConfigError
from depthpe.config.camera_noise import CameraNoise
from depthpe.files import read_json
from depthpe.scenes.cameras import read_cameras
from depthpe.testing.rmvd_samples import write_sample_list


def _huge_npy_header(path, shape=(100000, 100000)):
    """A tiny .npy file whose header claims ``shape`` float32 (37 GB)."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": shape})
    path.write_bytes(buf.getvalue() + b"\0" * 64)
    return path


def test_an_npy_header_claiming_a_huge_array_is_one_line_before_any_allocation(tmp_path, capsys):
    lists = write_sample_list(tmp_path / "lists", num_samples=1)
    _huge_npy_header(tmp_path / "lists" / "toy_gt" / "toy_000.npy")
    status = main(["rmvd", "--samples", str(lists), "--predictions", str(tmp_path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    assert "ground-truth depth" in err and "claims an array of shape (100000, 100000): more than 8192 pixels" in err


def test_an_npz_whose_array_is_larger_than_its_member_is_one_line(tmp_path):
    from depthpe.rmvd.datasets.tanks_and_temples import read_depth

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (4000, 4000)})
    with zipfile.ZipFile(tmp_path / "d.npz", "w") as z:
        z.writestr("arr_0.npy", header.getvalue() + b"\0" * 64)
    with pytest.raises(ConfigError, match=r"d.npz: arr_0 claims 64000\d+ bytes but holds \d+ \(truncated or corrupt\)"):
        read_depth(tmp_path / "d.npz")


def test_an_rmvd_image_size_beyond_the_largest_side_is_one_line(tmp_path):
    from depthpe.rmvd.samples import load_sample_list

    path = write_sample_list(tmp_path, num_samples=1)
    doc = json.loads(path.read_text())
    doc["samples"][0]["views"][0]["image_size"] = [100000, 100000]
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="'image_size' must be .*integers from 1 to 8192, the scene format's largest"):
        load_sample_list(path)


@pytest.mark.parametrize("name", ["toy.json", "transforms.json", "scene_meta.json", "cameras.json"])
def test_json_nesting_bombs_are_one_line(tmp_path, name):
    path = tmp_path / name
    path.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ValueError, match="nested too deeply"):
        read_json(path)
    if name == "toy.json":
        from depthpe.rmvd.samples import load_sample_list

        with pytest.raises(ConfigError, match="is not valid JSON .nested too deeply"):
            load_sample_list(path)
    else:
        with pytest.raises(ConfigError, match="nested too deeply") as err:
            read_cameras(path)
        assert "\n" not in str(err.value)


def test_a_wai_scene_meta_nesting_bomb_skips_the_scene_in_one_line(tmp_path):
    from depthpe.scenes.convert.common import SceneSkipped
    from depthpe.scenes.convert.wai import _read_meta

    (tmp_path / "scene_meta.json").write_text("{\"a\":" * 100000 + "1" + "}" * 100000)
    with pytest.raises(SceneSkipped, match="scene_meta.json: cannot read it as JSON .nested too deeply"):
        _read_meta(tmp_path)


@pytest.mark.parametrize("top,message", [
    ({"camera_angle_x": 0, "fl_x": None}, "camera_angle_x must be a field of view in radians between 0 and pi, got 0"),
    ({"w": float("inf")}, "w must be a whole number of pixels from 1 to 8192, got inf"),
    ({"fl_x": float("inf")}, "fl_x must be a finite number, got inf"),
])
def test_impossible_transforms_json_intrinsics_are_one_line(tmp_path, top, message):
    doc = {"fl_x": 40.0, "cx": 20.0, "cy": 15.0, "w": 40, "h": 30, **top,
           "frames": [{"file_path": "images/a.png", "transform_matrix": np.eye(4).tolist()}]}
    (tmp_path / "transforms.json").write_text(json.dumps(doc))  # Python writes Infinity, as a hostile file may
    with pytest.raises(ConfigError, match=message):
        read_cameras(tmp_path / "transforms.json")


def test_a_frame_written_twice_with_a_doubled_slash_is_a_duplicate(tmp_path):
    frames = [{"file_path": p, "transform_matrix": np.eye(4).tolist()}
              for p in ("images/w.png", "images/x.png", "./images//x.png")]  # the error names the doubled one
    (tmp_path / "transforms.json").write_text(json.dumps({"fl_x": 40.0, "w": 40, "h": 30, "frames": frames}))
    with pytest.raises(ConfigError, match="file_path 'images/x.png' appears twice"):
        read_cameras(tmp_path / "transforms.json")


def test_translation_noise_has_an_upper_bound(capsys):
    with pytest.raises(ValueError, match="camera noise translation must be at most 100"):
        CameraNoise(translation=1e300)
    assert main(["eval", "--model", "m", "--data", "d", "--out", "o", "--translation-noise", "1e300"]) == 2
    assert "--translation-noise must be at most 100" in capsys.readouterr().err
    assert main(["rmvd", "--samples", "s", "--model", "m", "--out", "o", "--translation-noise", "1e300"]) == 2
    assert "--translation-noise must be at most 100" in capsys.readouterr().err


def test_camera_noise_with_the_correspondence_loss_is_refused(synth_root, tmp_path):
    from tests.helpers.training import run_config

    run_config(synth_root, tmp_path / "run", data={"camera_noise": {"rotation_deg": 2.0}})  # alone: accepted
    with pytest.raises((ConfigError, ValueError), match="correspondence targets would come from the noisy cameras"):
        run_config(synth_root, tmp_path / "run", loss={"correspondence_weight": 1.0},
                   data={"camera_noise": {"rotation_deg": 2.0}})


def test_ctrl_c_is_one_line_and_status_130(monkeypatch, capsys):
    import depthpe.commands.check as check

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(check, "run", interrupted)
    assert main(["check", "nowhere"]) == 130
    err = capsys.readouterr().err
    assert err.startswith("interrupted (Ctrl-C)") and err.count("\n") == 1 and "Traceback" not in err


def test_the_coincident_cameras_message_advises_no_missing_option():
    import torch

    from depthpe.geometry import DegenerateSceneError, normalize_scene

    w2c = torch.eye(4).expand(1, 3, 4, 4).clone()
    with pytest.raises(DegenerateSceneError) as err:
        normalize_scene(w2c)
    assert "scale=" not in str(err.value) and "Use views with camera motion" in str(err.value)


def test_model_paths_are_resolved_before_they_are_compared(tmp_path, monkeypatch, rmvd_micro_model):
    from depthpe.rmvd.models import _resolved

    monkeypatch.chdir(rmvd_micro_model.parent)
    assert _resolved(f"./{rmvd_micro_model.name}") == _resolved(str(rmvd_micro_model)) == str(rmvd_micro_model.resolve())
    assert _resolved("vggt-1b") == "vggt-1b" and _resolved(f"vggt:{rmvd_micro_model.name}").startswith("vggt:/")
