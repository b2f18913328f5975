"""The printed summary of a conversion (``format_summary``) and the small rules of the own-capture
reader that it reports: dropped frames by reason, at most 20 skipped scenes named, the EXIF note,
the units of the written scenes, and how scene folders are found."""

from __future__ import annotations

import os

import pytest

from depthpe.scenes.convert.common import ConvertOptions
from depthpe.scenes.convert.folder import folder_scene_id, units
from depthpe.scenes.convert.readers import find_dirs_with
from depthpe.scenes.convert.summary import SUMMARY_FILE, format_summary


def _summary(skipped: int, dropped: dict, **extra) -> dict:
    return {"dataset": "folder", "scenes_found": skipped + 1, "scenes_processed": skipped + 1, "scenes_written": 1,
            "scenes_existing": 0, "scenes_skipped": skipped, "frames_written": 8, "frames_dropped": dropped,
            "splits": {"train": {"scenes": 1, "frames": 8}}, "out": "out/folder",
            "skipped": [{"scene_id": f"s{i:02d}", "reason": "no images"} for i in range(skipped)],
            "wall_s": 2.0, "frames_per_s": 4.0, "frames_per_s_per_worker": 4.0,
            "split_file": {"file": "out/folder/split.json"}, **extra}


def test_the_summary_names_drops_by_reason_or_none():
    lines = format_summary(_summary(0, {})).splitlines()
    assert lines[1] == "frames written: 8; dropped: none"
    assert not any(line.startswith("note:") for line in lines)
    lines = format_summary(_summary(0, {"blank image": 2, "bad image format": 1})).splitlines()
    assert lines[1] == "frames written: 8; dropped: bad image format 1, blank image 2"
    assert lines[2] == "  train: 1 scenes, 8 frames in index -> out/folder/train"


@pytest.mark.parametrize("skipped, more", [(20, None), (21, "  ... 1 more skipped scenes in "), (25, "  ... 5 more skipped scenes in ")])
def test_at_most_twenty_skipped_scenes_are_named(skipped, more):
    lines = format_summary(_summary(skipped, {})).splitlines()
    named = [line for line in lines if line.startswith("  skipped ")]
    assert named[0] == "  skipped s00: no images" and len(named) == 20
    assert [line for line in lines if line.startswith("  ...")] == ([more + SUMMARY_FILE] if more else [])
    assert lines[-1] == "time 2.0 s, 4.0 frames/s (4.0 frames/s per worker); split: out/folder/split.json"


def test_images_whose_exif_orientation_was_ignored_get_one_note():
    lines = format_summary(_summary(0, {}, exif_orientation_ignored=3)).splitlines()
    assert [line for line in lines if line.startswith("note: ")] == [
        "note: EXIF orientation ignored for 3 image(s): images are read in their stored pixel grid, the one the "
        "cameras describe (depth and K are in it too; docs/data.md)"]


def test_own_captures_are_metric_only_with_the_option_and_the_root_is_scene():
    assert units(ConvertOptions(progress=False, metric=True)) == (True, "m")
    metric, unit = units(ConvertOptions(progress=False))
    assert metric is False and unit != "m"
    assert folder_scene_id("") == "scene" and folder_scene_id("kitchen") == "kitchen"


def test_scene_folders_are_found_down_to_the_depth_limit_through_links(tmp_path):
    for sub in ("a", "b/c", "d/e/f", "g/h/i/j"):
        (tmp_path / sub).mkdir(parents=True)
        (tmp_path / sub / "cameras.txt").write_text("")
    (tmp_path / "a" / "inner").mkdir()
    (tmp_path / "a" / "inner" / "cameras.txt").write_text("")  # inside a found folder: not searched
    os.symlink(tmp_path / "b", tmp_path / "linked")
    found = find_dirs_with(tmp_path, "cameras.txt", max_depth=3)
    assert found == [tmp_path / p for p in ("a", "b/c", "d/e/f", "linked/c")]
    assert find_dirs_with(tmp_path, "cameras.txt", max_depth=2) == [tmp_path / p for p in ("a", "b/c", "linked/c")]
    assert find_dirs_with(tmp_path / "a", "cameras.txt", max_depth=0) == [tmp_path / "a"]


def test_only_image_files_under_images_are_frames_and_only_scene_folders_are_scenes(tmp_path):
    from depthpe.scenes.convert.folder import image_files, scene_refs

    images = tmp_path / "cap" / "images"
    (images / "left").mkdir(parents=True)
    (images / "folder.png").mkdir()  # a folder with an image suffix
    for name in ("b.JPG", "left/a.png", "notes.txt", ".DS_Store", "c.jpeg"):
        (images / name).write_bytes(b"")
    assert [name for name, _ in image_files(images)] == ["b.JPG", "c.jpeg", "left/a.png"]
    (tmp_path / "stray.png").write_bytes(b"")  # a file beside the scene folders: never a scene
    (tmp_path / "notes").mkdir()  # nor a folder without images/
    refs = scene_refs(tmp_path, lambda d: (d / "images").is_dir())
    assert [(r.scene_id, r.path) for r in refs] == [("cap", str(tmp_path / "cap"))]
