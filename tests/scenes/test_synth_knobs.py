"""`depthpe synth` with the scene knobs (docs/data.md): the default scenes and those of a style are
byte-identical whether or not the knobs' default values are passed; knob scenes are named, labelled
and resumed by their parameters; a scene float16 cannot hold (a camera facing a wall head-on) is
stored as float32 instead of aborting the run; the summary gives the parallax of the written scenes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from depthpe.cli import main
from depthpe.scenes.format.limits import depth_storage_problem
from depthpe.scenes.synth import (Scene, SynthParams, Texture, intrinsics_from_fov, look_at_w2c, render_views,
                                style_params)
from depthpe.scenes.synth import writer as synth_writer
from depthpe.scenes.synth.params import params_json

SMALL = ["--train-scenes", "2", "--val-scenes", "1", "--views", "3", "--height", "16", "--width", "16",
         "--workers", "1", "--quiet"]


def synth(out: Path, *extra: str) -> int:
    return main(["synth", "--out", str(out), *SMALL, *extra])


def file_hashes(root: Path) -> dict[str, str]:
    """The scene files' and indexes' hashes (the output folder's lock and owner manifest, which name
    the process and the time, are left out)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.name.startswith(".")}


@pytest.mark.parametrize("style, defaults", [
    ("default", ["--texture", "mixed"]),
    ("geometry", ["--rig", "curve", "--depth-ratio", "2", "12", "--texture", "mixed"]),
])
def test_passing_the_default_knobs_changes_no_byte(tmp_path, style, defaults):
    assert synth(tmp_path / "plain", "--style", style) == 0
    assert synth(tmp_path / "explicit", "--style", style, *defaults) == 0
    plain, explicit = file_hashes(tmp_path / "plain"), file_hashes(tmp_path / "explicit")
    assert plain == explicit and len(plain) == 5  # 3 scene files and 2 index.json


def test_recorded_parameters_leave_out_the_new_fields_at_their_defaults():
    """A style's ``synth_params`` attribute lists the fields files had before the knobs existed, so
    existing geometry and shifted files keep their bytes and are resumed."""
    before = ["scale", "room_scale", "object_count", "object_size", "object_kinds", "paths", "orbit_object_p",
              "orbit_radius", "orbit_arc_deg", "orbit_wobble", "walk_length", "hfov_deg", "depth_ratio", "flat_shading"]
    assert list(json.loads(params_json(style_params("geometry")))) == before
    knob = json.loads(params_json(SynthParams(texture="stripes", rotation_jitter_deg=1.0)))
    assert knob["texture"] == "stripes" and knob["rotation_jitter_deg"] == 1.0 and "texture_period" not in knob


def test_knob_scenes_are_named_labelled_and_resumed_by_their_parameters(tmp_path, capsys):
    from depthpe.scenes.format.check import check_scene
    from depthpe.scenes.format.scene_file import SceneReader, read_index

    knobs = ["--style", "geometry", "--rig", "stereo", "--texture", "stripes", "--depth-ratio", "3", "5"]
    assert synth(tmp_path, *knobs) == 0
    out = capsys.readouterr().out
    assert "parallax between views, in patches of 14 px: p10 " in out
    assert '"rig": "stereo", "depth_ratio": [3.0, 5.0], "texture": "stripes"' in out
    entries = read_index(tmp_path / "synth" / "train")
    assert [e["path"] for e in entries] == [f"train_geometry_rig-stereo_tex-stripes_00000{i}.h5" for i in (0, 1)]
    assert all((e["style"], e["rig"], e["texture"]) == ("geometry", "stereo", "stripes") for e in entries)
    path = tmp_path / "synth" / "train" / entries[0]["path"]
    with SceneReader(path) as reader:
        recorded = json.loads(reader.attrs["synth_params"])
    assert recorded["paths"] == ["stereo"] and recorded["depth_ratio"] == [3.0, 5.0]
    assert check_scene(path, max_rel_error=0.005).ok
    assert synth(tmp_path, *knobs) == 0
    assert "(0 written, 2 skipped)" in capsys.readouterr().out
    assert synth(tmp_path, *knobs[:-3], "--depth-ratio", "6", "8") == 0  # same names, other parameters
    assert "(2 written, 0 skipped)" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--depth-ratio", "2", "8"], "add --rig"),
    (["--rig", "stereo", "--rotation-jitter", "3"], "rectified"),
    (["--rig", "line", "--shift", "fov"], "cannot be combined with --shift"),
    (["--rig", "line", "--depth-ratio", "0", "4"], "0 < LO <= HI"),
    (["--texture-period", "2", "3"], "add one of them"),
])
def test_bad_knobs_are_one_line(tmp_path, args, message):
    with pytest.raises(SystemExit, match=message):
        synth(tmp_path, *args)


def head_on_wall(seed, views: int, height: int, width: int, params=None) -> dict:
    """``generate_scene``'s dict of two cameras facing a wall 3 units away, turned 0.2 degrees from
    head-on: their depths are so alike that float16 would merge them (the run that once aborted)."""
    plain = Texture("checker", np.zeros(3), np.ones(3), 0.5, 0.0, 0, 0.1)
    scene = Scene(room_min=np.array([-6.0, -6.0, 0.0]), room_max=np.array([6.0, 6.0, 6.0]),
                  face_textures=[plain] * 6, holes=[], scale=10.0)
    turn = np.deg2rad(0.2)
    centers = np.array([[3.0, 0.1, 3.0], [3.0, -0.1, 3.0]])[:views]
    w2c = np.stack([look_at_w2c(c, c + [np.cos(turn), np.sin(turn), 0.0]) for c in centers])
    K = np.stack([intrinsics_from_fov(np.deg2rad(60), height, width)] * len(centers))
    images, depth = render_views(scene, K, w2c, height, width)
    return {"images": images, "depth": depth, "K": K, "w2c": w2c, "scene": scene}


def test_a_wall_faced_head_on_is_stored_as_float32_and_the_run_goes_on(tmp_path, monkeypatch, capsys):
    from depthpe.scenes.format.check import check_scene
    from depthpe.scenes.format.scene_file import SceneReader

    assert "float16 merges its" in depth_storage_problem(head_on_wall(0, 2, 28, 28)["depth"], "float16")
    real = synth_writer.generate_scene
    monkeypatch.setattr(synth_writer, "generate_scene",  # the first training scene faces the wall
                        lambda seed, *a: (head_on_wall if seed.spawn_key == (0, 0) else real)(seed, *a))
    args = ["synth", "--out", str(tmp_path), "--train-scenes", "2", "--val-scenes", "1", "--views", "2",
            "--height", "28", "--width", "28", "--workers", "1", "--quiet"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "train: 2 scenes (2 written, 0 skipped)" in out and "val: 1 scenes (1 written" in out
    assert "1 scene(s) store depth as float32, not float16" in out
    split = tmp_path / "synth" / "train"
    for name, dtype in (("train_000000.h5", np.float32), ("train_000001.h5", np.float16)):
        with h5py.File(split / name, "r") as f:
            assert f["depth"].dtype == dtype, name
    with SceneReader(split / "train_000000.h5") as wall:
        np.testing.assert_array_equal(wall.read_frame(0)["depth"], head_on_wall(0, 2, 28, 28)["depth"][0])
    assert check_scene(split / "train_000000.h5", max_rel_error=0.005).ok
    assert main(args) == 0  # resumed like any other scene
    assert "(0 written, 2 skipped)" in capsys.readouterr().out
