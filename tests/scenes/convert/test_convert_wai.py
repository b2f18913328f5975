"""`depthpe convert wai`: WAI scenes (MapAnything's WorldAI format) written from synthetic scenes
convert back to the originals, pass `depthpe check`, train, evaluate and index like any dataset;
OpenGL matrices labelled opencv fail the check; scenes lacking what a run needs are skipped with one
line and counted; nothing is written into the WAI folders."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from depthpe.cli import main
from depthpe.scenes.convert import convert
from depthpe.scenes.convert.common import ConvertOptions
from depthpe.scenes.convert.wai import modality_key
from depthpe.scenes.format.scene_file import read_index
from depthpe.testing.captures import read_scene_frames
from depthpe.testing.transforms_captures import write_wai_scene
from tests.helpers.training import run_config


@pytest.fixture(scope="module")
def scene_files(synth_root):
    return sorted((synth_root / "synth" / "train").glob("*.h5"))


@pytest.fixture(scope="module")
def wai_root(tmp_path_factory, scene_files):
    """A WAI dataset of two scenes: ``a`` (scene units) and ``b`` (``scale_type`` metric)."""
    root = tmp_path_factory.mktemp("wai") / "fixture"
    write_wai_scene(root, scene_files[0], "a")
    write_wai_scene(root, scene_files[1], "b", scale_type="metric")
    return root


@pytest.fixture(scope="module")
def converted(tmp_path_factory, wai_root):
    """``depthpe convert wai`` of ``wai_root`` (one val, one train scene), checked."""
    out = tmp_path_factory.mktemp("converted")
    before = _tree(wai_root)
    assert main(["convert", "wai", "--src", str(wai_root), "--out", str(out), "--quiet"]) == 0
    assert _tree(wai_root) == before  # nothing written into the source folders
    return out


def _tree(root: Path) -> dict:
    """Every file under ``root`` with the hash of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file()}


def _opts(**kw):
    return ConvertOptions(progress=False, workers=1, val_scenes=0, **kw)


def test_wai_scenes_convert_back_to_the_originals_with_their_units(converted, scene_files):
    entries = {e["scene_id"]: (split, e) for split in ("train", "val") for e in read_index(converted / "wai" / split)}
    assert sorted(entries) == ["a", "b"]
    assert (entries["a"][1]["metric"], entries["a"][1]["depth_units"]) == (False, "scene")
    assert (entries["b"][1]["metric"], entries["b"][1]["depth_units"]) == (True, "m")
    assert sorted(split for split, _ in entries.values()) == ["train", "val"]  # the random draw: at most half
    for sid, original in zip("ab", scene_files):
        a = read_scene_frames(converted / "wai" / entries[sid][0] / f"{sid}.h5")
        b = read_scene_frames(original)
        np.testing.assert_allclose(a["K"], b["K"], atol=1e-4)
        np.testing.assert_allclose(a["w2c"], b["w2c"], atol=1e-6)
        assert ((a["depth"] > 0) == (b["depth"] > 0)).all()
        np.testing.assert_allclose(a["depth"], b["depth"], rtol=1e-3)  # float16 EXR of float16 depth


def test_without_camera_convention_the_matrices_are_read_as_opencv(scene_files, tmp_path):
    write_wai_scene(tmp_path / "src", scene_files[0], "unlabelled", convention="opencv", label=None)
    assert "camera_convention" not in json.loads((tmp_path / "src" / "unlabelled" / "scene_meta.json").read_text())
    summary = convert("wai", tmp_path / "src", tmp_path / "out", _opts())
    assert summary["scenes_written"] == 1, summary
    a = read_scene_frames(next((tmp_path / "out").rglob("unlabelled.h5")))
    np.testing.assert_allclose(a["w2c"], read_scene_frames(scene_files[0])["w2c"], atol=1e-6)


def test_a_modality_group_without_frame_key_resolves_to_its_last_entry():
    meta = {"frame_modalities": {"pred_depth": {"mvsanywhere": {"frame_key": "mvs_depth"},
                                                "moge": {"frame_key": "moge_depth"}}}}
    assert modality_key(meta, "pred_depth", {}) == "moge_depth"
    assert modality_key(meta, "pred_depth/mvsanywhere", {}) == "mvs_depth"
    assert modality_key({}, "depth", {"depth": "d.exr"}) == "depth" and modality_key({}, "depth", {}) is None


def test_opengl_matrices_labelled_opencv_fail_check(scene_files, tmp_path, capsys):
    write_wai_scene(tmp_path / "src", scene_files[2], "flipped", convention="opengl", label="opencv")
    assert main(["convert", "wai", "--src", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "1 scenes checked, 1 failed" in out and "the camera axes are OpenGL/Blender" in out
    write_wai_scene(tmp_path / "src2", scene_files[2], "labelled", convention="opengl", label="opengl")
    assert main(["convert", "wai", "--src", str(tmp_path / "src2"), "--out", str(tmp_path / "out2"), "--quiet"]) == 0


def _edit(folder: Path, change) -> None:
    """Apply ``change(meta)`` to a scene's scene_meta.json."""
    path = folder / "scene_meta.json"
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


def _drop_depth(meta: dict) -> None:
    """No depth modality: neither in frame_modalities nor in the frames."""
    del meta["frame_modalities"]["depth"]
    for frame in meta["frames"]:
        del frame["depth"]


def test_scenes_lacking_what_a_run_needs_are_skipped_with_one_line(scene_files, tmp_path):
    root = tmp_path / "src"
    write_wai_scene(root, scene_files[0], "good")
    _edit(write_wai_scene(root, scene_files[0], "no_depth"), _drop_depth)
    distorted = write_wai_scene(root, scene_files[0], "distorted")
    (distorted / "scene_meta.json").rename(distorted / "scene_meta_distorted.json")
    _edit(write_wai_scene(root, scene_files[0], "fisheye"), lambda m: m.update(camera_model="OPENCV_FISHEYE"))
    _edit(write_wai_scene(root, scene_files[0], "k1"), lambda m: m["frames"][1].update(k1=0.05))
    _edit(write_wai_scene(root, scene_files[0], "axes"), lambda m: m.update(camera_convention="blender"))
    summary = convert("wai", root, tmp_path / "out", _opts())
    reasons = {s["scene_id"]: s["reason"] for s in summary["skipped"]}
    assert summary["scenes_written"] == 1 and summary["scenes_skipped"] == 5
    assert "no 'depth' frame modality in scene_meta.json (it has: image)" in reasons["no_depth"]
    assert "--depth-modality" in reasons["no_depth"]
    assert "run the wai_processing undistort stage" in reasons["distorted"]
    assert "camera_model OPENCV_FISHEYE is not a pinhole camera" in reasons["fisheye"]
    assert "frames[1] (images/frame_00001.png): the camera has lens distortion (k1=0.05)" in reasons["k1"]
    assert reasons["axes"].startswith("scene_meta.json: camera_convention 'blender'")
    assert all("\n" not in r for r in reasons.values())


def test_another_depth_modality_and_a_missing_depth_file(scene_files, tmp_path):
    folder = write_wai_scene(tmp_path / "src", scene_files[0], "mvs")

    def to_pred_depth(meta):
        meta["frame_modalities"]["pred_depth"] = {"mvsanywhere": {"frame_key": "mvs_depth", "format": "depth"}}
        del meta["frame_modalities"]["depth"]
        for frame in meta["frames"]:
            frame["mvs_depth"] = frame.pop("depth")

    _edit(folder, to_pred_depth)
    (folder / "depth" / "frame_00002.exr").unlink()
    skipped = convert("wai", tmp_path / "src", tmp_path / "a", _opts())
    assert "(it has: image, pred_depth/mvsanywhere)" in skipped["skipped"][0]["reason"]
    summary = convert("wai", tmp_path / "src", tmp_path / "b", _opts(depth_modality="pred_depth/mvsanywhere"))
    assert summary["scenes_written"] == 1 and summary["frames_dropped"] == {"unreadable depth": 1}


def test_converted_wai_trains_evaluates_and_indexes(converted, tmp_path):
    from depthpe.run.trainer import train

    cfg = run_config(converted, tmp_path / "run", data={"sources": [{"name": "wai", "root": str(converted),
                                                                      "split": "train"}]},
                     train={"steps": 1, "checkpoint_every": 0})
    model = train(cfg)
    assert (model / "model.safetensors").is_file()
    assert main(["eval", "--model", str(model), "--data", str(converted), "--views", "3", "--image-width", "42",
                 "--out", str(tmp_path / "eval"), "--num-workers", "0", "--cpu"]) == 0
    assert "wai" in json.dumps(json.loads((tmp_path / "eval" / "summary.json").read_text()))
    assert main(["index", str(converted / "wai"), "--quiet"]) == 0
    assert [e["scene_id"] for e in read_index(converted / "wai" / "val")] in (["a"], ["b"])


def test_the_principal_point_is_read_as_mapanythings_loader_reads_it(wai_root, scene_files, tmp_path):
    """MapAnything's WAI loader builds K = [[fl_x, 0, cx], [0, fl_y, cy], [0, 0, 1]] from the stored
    values as they are, with pixel centres at whole numbers (mapanything/utils/wai/camera.py, whose
    90-degree rotation maps cx to H - 1 - cy). depthpe's K (OpenCV, the same pixel centres) must be
    exactly that K: no half-pixel shift for WAI, unlike nerfstudio's transforms.json."""
    from depthpe.scenes.cameras import read_cameras

    meta = json.loads((wai_root / "a" / "scene_meta.json").read_text())
    K = read_scene_frames(scene_files[0])["K"]
    for frame, k in zip(meta["frames"], K):
        loader_K = [[frame["fl_x"], 0, frame["cx"]], [0, frame["fl_y"], frame["cy"]], [0, 0, 1]]
        np.testing.assert_allclose(k, loader_K, rtol=1e-6, atol=1e-5)
    cams = read_cameras(wai_root / "a" / "scene_meta.json")  # the same file as a camera source
    first = meta["frames"][0]
    assert cams[first["file_path"]].K[0, 2] == first["cx"] and cams[first["file_path"]].K[1, 2] == first["cy"]
    nerfstudio = {k: v for k, v in meta.items() if k not in ("frame_modalities", "scene_modalities")}
    (tmp_path / "transforms.json").write_text(json.dumps(nerfstudio))  # a nerfstudio file keeps its half pixel
    assert read_cameras(tmp_path / "transforms.json")[first["file_path"]].K[0, 2] == first["cx"] - 0.5
    for frame, k in zip(meta["frames"], K):
        assert (frame["fl_x"], frame["fl_y"]) == pytest.approx((k[0, 0], k[1, 1]), rel=1e-6)
