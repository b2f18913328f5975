"""No name from a source writes outside the output folder or shares a file with another name
(reliability IV item 1), for the data tools: ``depthpe convert`` (scene folders, CO3D sequence names,
a split file's split names, frame and camera names), ``depthpe synth``, ``depthpe index`` and
``depthpe check --json``. Each test hashes everything beside the output folder before and after the
command (``tests.helpers.trees``)."""

from __future__ import annotations

import json
import os
import shutil

import h5py
import pytest

from depthpe.cli import main
from depthpe.scenes.format.scene_file import SceneReader, read_index
from depthpe.files import safe_component
from depthpe.testing.captures import export_capture, export_colmap_workspace
from depthpe.testing.fake_datasets import make_scenes, write_fake_co3d, write_fake_megasynth, write_fake_wildrgbd
from tests.helpers.trees import assert_only_inside, tree_hashes

# Folder names a file system allows: spaces, names equal after cleaning ("a b", "a_b"; ".x", "x"),
# dots only, non-ASCII, control characters, bytes that are not UTF-8, a name of 250 characters.
HOSTILE_FOLDERS = ["a b", "a_b", ".x", "x", "...", "caf\u00e9", "tab\tname", os.fsdecode(b"raw\xff"), "z" * 250]
# Names inside a source's own files may hold anything but NUL.
HOSTILE_NAMES = ["../../../victim", "a/../../b", "..", ".", ".hidden", "/abs/victim", "a/b", "a_b", "a\\b",
                 "q" * 300, "odd \x01\x7f \u00e9"]


def _scene_files(split_dir):
    """The scene files of a split folder, with each one's scene id."""
    files = sorted(split_dir.glob("*.h5"))
    ids = []
    for path in files:
        with SceneReader(path) as reader:
            ids.append(reader.attrs["scene_id"])
    return files, ids


def _plain(path) -> bool:
    """Whether a scene file is named ``<one plain component>.h5``."""
    return path.suffix == ".h5" and safe_component(path.stem) == path.stem


@pytest.mark.parametrize("layout, export", [("folder", export_capture), ("colmap", export_colmap_workspace)])
def test_convert_gives_every_hostile_scene_folder_its_own_file(synth_root, tmp_path, layout, export):
    src, out = tmp_path / "src", tmp_path / "nested" / "out"
    for name in HOSTILE_FOLDERS:
        export(synth_root / "synth" / "train" / "train_000000.h5", src / name)
    before = tree_hashes(tmp_path, out)
    assert main(["convert", layout, "--src", str(src), "--out", str(out), "--workers", "1", "--no-check"]) == 0
    assert_only_inside(tmp_path, out, before)
    files, ids = _scene_files(out / layout / "train")
    assert len(files) == len(set(ids)) == len(HOSTILE_FOLDERS) and all(map(_plain, files))
    assert {e["scene_id"] for e in read_index(out / layout / "train")} == set(ids)
    assert "a_b" in ids and "x" in ids  # plain names are kept as they are


def test_convert_folder_frame_and_camera_names_reach_no_path(synth_root, tmp_path):
    src, out = tmp_path / "src" / "capture", tmp_path / "out"
    export_capture(synth_root / "synth" / "train" / "train_000000.h5", src)
    odd = "..odd \u00e9\x01.png"
    (src / "images" / "frame_00001.png").rename(src / "images" / odd)
    (src / "depth" / "frame_00001.npy").rename(src / "depth" / odd.replace(".png", ".npy"))
    cams = json.loads((src / "cameras.json").read_text())
    cams["frames"][1]["file"] = odd
    cams["frames"].append({**cams["frames"][0], "file": "../../../victim.png"})
    (src / "cameras.json").write_text(json.dumps(cams))
    before = tree_hashes(tmp_path, out)
    assert main(["convert", "folder", "--src", str(src), "--out", str(out), "--workers", "1", "--no-check"]) == 0
    assert_only_inside(tmp_path, out, before)
    files, _ = _scene_files(out / "folder" / "train")
    with SceneReader(files[0]) as reader:
        assert odd in reader.frame_names() and reader.num_frames == 4


def test_convert_co3d_hostile_sequence_names_stay_inside_out_and_apart(tmp_path):
    src, out = tmp_path / "src", tmp_path / "nested" / "out"
    truth = write_fake_co3d(src, make_scenes(len(HOSTILE_NAMES), views=3, height=24, width=32, seed=5),
                            sequence_names=HOSTILE_NAMES)
    before = tree_hashes(tmp_path, out)
    assert main(["convert", "co3d", "--src", str(src), "--out", str(out), "--workers", "1"]) == 0
    assert_only_inside(tmp_path, out, before)
    files, ids = [], []
    for split in ("train", "val"):
        split_files, split_ids = _scene_files(out / "co3d" / split)
        files, ids = files + split_files, ids + split_ids
    assert sorted(ids) == sorted(truth) and len(set(files)) == len(truth) and all(map(_plain, files))


def test_convert_refuses_a_split_file_whose_split_climbs_out(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "a" / "b" / "out"
    truth = write_fake_megasynth(src, make_scenes(2, views=3, height=24, width=32, seed=6))
    split_file = out / "megasynth" / "split.json"
    split_file.parent.mkdir(parents=True)
    split_file.write_text(json.dumps({"splits": {"../../../victim": sorted(truth)}}))
    before = tree_hashes(tmp_path, out)
    # --overwrite: past the output folder's owner (split.json is no recorded output), to the split check
    assert main(["convert", "megasynth", "--src", str(src), "--out", str(out), "--workers", "1", "--overwrite"]) == 2
    assert_only_inside(tmp_path, out, before)
    message = capsys.readouterr().out.strip().splitlines()[-1]
    assert message == (f"depthpe convert: error: {split_file}: split name '../../../victim' is not a plain folder "
                       "name (letters, digits and ._+=@,-, not starting with '.'); rename it, or delete the file "
                       "to draw a new split")
    assert not list(out.rglob("*.h5"))


def test_convert_wildrgbd_hostile_category_folders_stay_apart(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    categories = [".hidden", "a b", "a_b", "z" * 200]
    for i, category in enumerate(categories):
        write_fake_wildrgbd(src, make_scenes(1, views=3, height=24, width=32, seed=7 + i), category=category)
    before = tree_hashes(tmp_path, out)
    assert main(["convert", "wildrgbd", "--src", str(src), "--out", str(out), "--workers", "1"]) == 0
    assert_only_inside(tmp_path, out, before)
    files, ids = _scene_files(out / "wildrgbd" / "train")
    assert sorted(ids) == sorted(f"{c}__scene_000" for c in categories) and all(map(_plain, files))


def test_synth_writes_only_inside_out_and_refuses_hostile_labels(tmp_path):
    out = tmp_path / "nested" / "out"
    before = tree_hashes(tmp_path, out)
    for override in ("shift=[../../../victim]", "style=../../../victim"):
        with pytest.raises(SystemExit, match="must be one of"):
            main(["synth", "--out", str(out), "--train-scenes", "1", "--val-scenes", "0", override])
    assert not out.exists()
    assert main(["synth", "--out", str(out), "--train-scenes", "1", "--val-scenes", "1", "--views", "2",
                 "--height", "14", "--width", "14", "--workers", "1", "--quiet"]) == 0
    assert_only_inside(tmp_path, out, before)
    assert sorted(p.name for p in out.rglob("*.h5")) == ["train_000000.h5", "val_000000.h5"]


def _hostile_data(synth_root, root):
    """A copy of ``synth_root`` whose scene files say hostile scene ids, dataset and split names."""
    shutil.copytree(synth_root, root)
    for number, path in enumerate(sorted(root.rglob("*.h5"))):
        with h5py.File(path, "r+") as f:
            f.attrs["scene_id"] = HOSTILE_NAMES[number % len(HOSTILE_NAMES)] + f"_{number}"
            f.attrs["dataset"], f.attrs["split"] = "../../../victim", "/abs/victim"
    return root


def test_index_writes_only_index_files_for_hostile_attributes(synth_root, tmp_path):
    root = _hostile_data(synth_root, tmp_path / "work" / "data")
    for index in root.rglob("index.json"):
        index.unlink()
    before = tree_hashes(tmp_path, root)
    assert main(["index", str(root), "--workers", "1", "--quiet"]) == 0
    assert_only_inside(tmp_path, root, before)
    for split, count in (("train", 3), ("val", 2)):
        entries = read_index(root / "synth" / split)
        assert len(entries) == count and all(e["scene_id"].startswith(tuple(HOSTILE_NAMES)) for e in entries)
    assert sorted(p.name for p in root.rglob("index.json*")) == ["index.json", "index.json"]


def test_check_report_is_the_one_file_written_for_hostile_names(synth_root, tmp_path):
    root = _hostile_data(synth_root, tmp_path / "work" / "data")
    for index in root.rglob("index.json"):
        doc = json.loads(index.read_text())
        for number, entry in enumerate(doc["scenes"]):
            entry["scene_id"] = HOSTILE_NAMES[number]
        index.write_text(json.dumps(doc))
    report = tmp_path / "reports" / "check.json"
    before = tree_hashes(tmp_path, report.parent)
    assert main(["check", str(root), "--json", str(report), "--workers", "1", "--quiet"]) == 0
    assert_only_inside(tmp_path, report.parent, before)
    assert [p.name for p in report.parent.iterdir()] == ["check.json"]
    assert len(json.loads(report.read_text())["reports"]) == 5
