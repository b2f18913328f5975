"""The small rules of the own-capture reader (depthpe/scenes/convert/folder.py, readers.py): the
units of the written scenes, the root's scene id, which files are frames and which folders are
scenes, and how deep scene folders are looked for."""

from __future__ import annotations

import os

from depthpe.scenes.convert.common import ConvertOptions
from depthpe.scenes.convert.folder import folder_scene_id, image_files, scene_refs, units
from depthpe.scenes.convert.readers import find_dirs_with


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
