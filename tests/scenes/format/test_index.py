"""`depthpe index ROOT`: rebuild index.json from the scene files (other tools' folders, hand-written indexes)."""

from __future__ import annotations

import json

import h5py
import pytest

from depthpe.cli import main
from depthpe.scenes.format.reindex import index_folder
from depthpe.scenes.format.scene_file import SceneFileError, read_index, write_scene
from tests.helpers.scenes import plane_scene


def write(folder, name, scene_id=None, dataset="toy", split="train", **overrides):
    sc = plane_scene(3, 20, 24, seed=1)
    kw = dict(images=sc["images"], depth=sc["depth"], K=sc["K"], w2c=sc["w2c"], dataset=dataset,
              scene_id=scene_id or name, split=split, metric=False, depth_units="scene")
    kw.update(overrides)
    return write_scene(folder / f"{name}.h5", **kw)


def test_bare_list_index_is_refused_then_rebuilt(tmp_path, capsys):
    split = tmp_path / "mine" / "val"
    expected = [write(split, "a"), write(split, "b", split="val")]
    (split / "index.json").write_text(json.dumps(["a.h5", "b.h5"]))  # another tool's shape
    with pytest.raises(SceneFileError, match="malformed index"):
        read_index(split)
    assert main(["index", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "listed 2 scene(s)" in out and "index.json.bak" in out
    assert read_index(split) == expected
    doc = json.loads((split / "index.json").read_text())
    assert (doc["dataset"], doc["split"]) == ("toy", "val")  # files disagree on split: the folder's name
    assert json.loads((split / "index.json.bak").read_text()) == ["a.h5", "b.h5"]
    assert main(["check", str(tmp_path), "--quiet"]) == 0


def test_unusable_files_are_skipped_with_reasons(tmp_path, capsys):
    split = tmp_path / "d" / "train"
    write(split, "good")
    write(split, "twin", scene_id="good")  # same scene id twice
    (split / "junk.h5").write_bytes(b"not hdf5" * 10)
    write(split, "badcam")
    with h5py.File(split / "badcam.h5", "r+") as f:
        f["K"][0, 0, 0] = 0.0  # zero focal length
    write(split, "noattr")
    with h5py.File(split / "noattr.h5", "r+") as f:
        del f.attrs["dataset"]
    (split / ".good.h5.123.tmp").write_bytes(b"x")  # an interrupted write is ignored
    assert main(["index", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "listed 1 scene(s)" in out and "4 skipped" in out
    reasons = dict(index_folder(split, dry_run=True).skipped)
    assert set(reasons) == {"twin.h5", "junk.h5", "badcam.h5", "noattr.h5"}
    assert "scene_id" in reasons["twin.h5"] and "focal" in reasons["badcam.h5"]
    assert "HDF5" in reasons["junk.h5"] and "missing attributes" in reasons["noattr.h5"]
    assert [e["path"] for e in read_index(split)] == ["good.h5"]


def test_dry_run_writes_nothing_and_errors(tmp_path, capsys):
    write(tmp_path / "x", "s")
    assert main(["index", str(tmp_path), "--dry-run"]) == 0
    assert "would list 1 scene(s)" in capsys.readouterr().out
    assert not (tmp_path / "x" / "index.json").exists()
    assert main(["index", str(tmp_path / "missing")]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["index", str(tmp_path / "empty")]) == 2
    assert "no *.h5" in capsys.readouterr().out


def test_unchanged_index_is_rewritten_without_backup(tmp_path):
    split = tmp_path / "toy" / "train"
    write(split, "a")
    assert index_folder(split).written
    again = index_folder(split)
    assert again.written and not again.backed_up and not (split / "index.json.bak").exists()


def test_workers_give_the_same_indexes(tmp_path, monkeypatch, capsys):
    """Two folders with corrupt files and a repeated scene id: 2 processes list and skip exactly what 1
    does, in the same order, and the command shows a progress bar unless --quiet."""
    from depthpe.scenes.format import reindex

    monkeypatch.setattr(reindex, "FILES_PER_WORKER", 1)  # a worker even for this little work
    for split in ("train", "val"):
        folder = tmp_path / "toy" / split
        for i in range(3):
            write(folder, f"{split}{i}", split=split)
        write(folder, "twin", scene_id=f"{split}0", split=split)
        (folder / "junk.h5").write_bytes(b"not hdf5" * 10)
    one = reindex.rebuild_indexes(tmp_path, dry_run=True, workers=1)
    two = reindex.rebuild_indexes(tmp_path, dry_run=True, workers=2)
    assert two == one and [len(r.entries) for r in two] == [3, 3]
    assert [name for name, _ in two[0].skipped] == ["junk.h5", "twin.h5"]
    assert main(["index", str(tmp_path), "--workers", "2"]) == 1
    captured = capsys.readouterr()
    assert "6 scene(s) listed, 4 file(s) skipped" in captured.out and "file/s" in captured.err
    assert main(["index", str(tmp_path), "--workers", "2", "--quiet"]) == 1
    assert "file/s" not in capsys.readouterr().err
