"""`depthpe convert folder` and `depthpe convert colmap`: a synth scene written out as a user's capture
(images + depth + cameras, or a COLMAP dense workspace) converts back to the original scene within
storage precision; bad frames are dropped with reasons; reruns resume; `depthpe check` runs after."""

from __future__ import annotations

import json

import numpy as np
import pytest

from depthpe.cli import main
from depthpe.scenes.convert import convert
from depthpe.scenes.convert.colmap import read_colmap_depth, write_colmap_depth
from depthpe.scenes.convert.common import ConvertOptions, FrameDropped
from depthpe.scenes.format.scene_file import SceneReader, read_index
from depthpe.scenes.synth import write_synth_dataset
from depthpe.testing.captures import export_capture, export_colmap_workspace, read_scene_frames


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    root = tmp_path_factory.mktemp("synth")
    write_synth_dataset(root, train_scenes=1, val_scenes=0, views=4, height=42, width=56, seed=3, progress=False)
    return root / "synth" / "train" / "train_000000.h5"


def _opts(**kw):
    return ConvertOptions(progress=False, workers=1, **kw)


def assert_same_scene(converted, original, depth_rtol=1e-3):
    """The converted file holds the original's frames: K and w2c (float32 K storage), depth (float16
    storage; ``depth_rtol`` for 16-bit PNG quantization), validity, and images up to JPEG re-encoding."""
    a, b = read_scene_frames(converted), read_scene_frames(original)
    with SceneReader(converted) as reader:
        assert reader.frame_names() == b["names"]
    np.testing.assert_allclose(a["K"], b["K"], atol=1e-4)
    np.testing.assert_allclose(a["w2c"], b["w2c"], atol=1e-9)
    assert ((a["depth"] > 0) == (b["depth"] > 0)).all()
    both = b["depth"] > 0
    np.testing.assert_allclose(a["depth"][both], b["depth"][both], rtol=depth_rtol)
    assert np.abs(a["images"].astype(int) - b["images"]).mean() < 2.0


@pytest.mark.parametrize("depth_format,cameras", [("npy", "json"), ("exr", "colmap"), ("png", "json")])
def test_folder_round_trip(original, tmp_path, depth_format, cameras):
    src = export_capture(original, tmp_path / "capture", depth_format=depth_format, cameras=cameras,
                         depth_scale=10000.0)
    summary = convert("folder", src, tmp_path / "out", _opts(depth_scale=10000.0 if depth_format == "png" else None))
    assert summary["scenes_written"] == 1 and summary["frames_dropped"] == {}
    assert_same_scene(tmp_path / "out" / "folder" / "train" / "capture.h5", original,
                      depth_rtol=2e-3 if depth_format == "png" else 1e-3)


def test_colmap_round_trip_and_check(original, tmp_path, capsys):
    src = export_colmap_workspace(original, tmp_path / "ws")
    assert main(["convert", "colmap", "--src", str(src), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "depthpe check" in out and "1 scenes checked, 0 failed" in out
    entry, = read_index(tmp_path / "out" / "colmap" / "train")
    assert (entry["metric"], entry["depth_units"]) == (False, "colmap")
    assert_same_scene(tmp_path / "out" / "colmap" / "train" / "ws.h5", original)


def test_colmap_depth_format(tmp_path):
    depth = np.arange(12, dtype=np.float32).reshape(3, 4)  # H=3, W=4: x fastest in the file
    path = write_colmap_depth(tmp_path / "d.bin", depth)
    assert path.read_bytes()[:6] == b"4&3&1&"
    assert np.frombuffer(path.read_bytes()[6:], "<f4")[:5].tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(read_colmap_depth(path), depth)
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(FrameDropped, match="truncated"):
        read_colmap_depth(path)
    path.write_bytes(b"99999&3&1&" + b"\0" * 16)
    with pytest.raises(FrameDropped, match="unreadable"):
        read_colmap_depth(path)


def test_bad_frames_are_dropped_with_reasons_and_reruns_resume(original, tmp_path):
    src = export_capture(original, tmp_path / "cap")
    (src / "depth" / "frame_00001.npy").unlink()
    doc = json.loads((src / "cameras.json").read_text())
    doc["frames"] = [f for f in doc["frames"] if f["file"] != "frame_00002.png"]
    (src / "cameras.json").write_text(json.dumps(doc))
    (src / "depth" / "frame_00003.npy").write_bytes(b"\x93NUMPY garbage")
    summary = convert("folder", src, tmp_path / "out", _opts())
    assert summary["frames_dropped"] == {"no depth map": 1, "no camera": 1, "unreadable depth": 1}
    assert summary["frames_written"] == 0 and summary["scenes_skipped"] == 1  # one frame left < min_frames
    assert "only 1 usable frame" in summary["skipped"][0]["reason"]

    good = export_capture(original, tmp_path / "many" / "good")
    export_capture(original, tmp_path / "many" / "bad")
    (tmp_path / "many" / "bad" / "cameras.json").write_text("{}")
    first = convert("folder", tmp_path / "many", tmp_path / "out2", _opts())
    assert first["scenes_written"] == 1 and first["skipped"][0]["scene_id"] == "bad"
    assert "cameras" in first["skipped"][0]["reason"]
    again = convert("folder", tmp_path / "many", tmp_path / "out2", _opts())
    assert again["scenes_existing"] == 1 and again["scenes_written"] == 0
    assert good.name == "good"


def test_frames_dropped_for_the_same_reason_are_counted_together(original, tmp_path):
    src = export_capture(original, tmp_path / "cap")
    for name in ("frame_00001.npy", "frame_00003.npy"):
        (src / "depth" / name).write_bytes(b"\x93NUMPY garbage")
    summary = convert("folder", src, tmp_path / "out", _opts())
    assert summary["frames_dropped"] == {"unreadable depth": 2} and summary["frames_written"] == 2


def test_colmap_without_depth_maps_is_skipped(original, tmp_path, capsys):
    src = export_colmap_workspace(original, tmp_path / "ws")
    for p in (src / "stereo" / "depth_maps").iterdir():
        p.unlink()
    (src / "stereo" / "depth_maps").rmdir()
    assert main(["convert", "colmap", "--src", str(src), "--out", str(tmp_path / "out"), "--quiet"]) == 1
    assert "patch_match_stereo" in capsys.readouterr().out
