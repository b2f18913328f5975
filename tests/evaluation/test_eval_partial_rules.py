"""The rules of ``depthpe.evaluation.partial`` on the smallest inputs: what makes the settings of a
partial evaluation differ (a scene file touched, an entry an older version had), how the difference is
worded, that a checked folder's records are read back, and when a record line is fsynced."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import numpy as np
import pytest

from depthpe.config import ConfigError
from depthpe.evaluation import partial as partial_module
from depthpe.evaluation.partial import PartialEvaluation, _source_fingerprint, settings_difference
from depthpe.evaluation.record import SceneRecord


def _source(tmp_path, names=("a.h5", "b.h5")):
    """A source as the fingerprint reads it: a split folder with index.json and scene files."""
    split = tmp_path / "synth" / "val"
    split.mkdir(parents=True, exist_ok=True)
    (split / "index.json").write_text(json.dumps([{"path": n} for n in names]))
    for name in names:
        (split / name).write_bytes(b"scene " + name.encode())
    return SimpleNamespace(source=SimpleNamespace(name="synth", split_dir=str(split), max_scenes=None),
                           index=[{"path": n} for n in names])


def test_a_touched_or_missing_scene_file_changes_the_source_fingerprint(tmp_path):
    scenes = _source(tmp_path)
    before = _source_fingerprint(scenes)
    assert _source_fingerprint(scenes) == before
    scene = tmp_path / "synth" / "val" / "b.h5"
    stat = scene.stat()
    os.utime(scene, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # same bytes, rewritten later
    touched = _source_fingerprint(scenes)
    assert touched["scene_files"] != before["scene_files"] and touched["index"] == before["index"]
    scene.unlink()  # a missing scene file is a difference too, not an error
    assert _source_fingerprint(scenes)["scene_files"] not in (before["scene_files"], touched["scene_files"])


def test_a_difference_names_the_option_its_words_or_an_entry_only_the_old_settings_had():
    assert settings_difference({"views": 8}, {"views": 2}) == "--views was 8, now 2"
    assert settings_difference({"weights": [1, 2]}, {"weights": [1, 3]}) == (
        "the weights file of --model (its size or modification time) changed")
    assert settings_difference({"x": 1}, {"x": 2}, described={"x": "the sample lists"}) == "the sample lists changed"
    assert settings_difference({"views": 2, "gone": 5}, {"views": 2}) == "gone was 5, now None"
    assert settings_difference({"views": 2}, {"views": 2}) is None


def test_check_uses_the_callers_words_and_reads_back_the_records_it_checked(tmp_path):
    writer = PartialEvaluation(tmp_path)
    writer.start({"lists": "h1", "seed": 0})
    writer.append(SceneRecord(key="toy/s0", dataset="toy", scene="s0", frames=[0, 1], rows=[]))
    writer.close()
    reader = PartialEvaluation(tmp_path, described={"lists": "the sample lists"})
    with pytest.raises(ConfigError, match="made with other settings: the sample lists changed; rerun"):
        reader.check({"lists": "h2", "seed": 0})
    reader = PartialEvaluation(tmp_path)
    reader.check({"lists": "h1", "seed": 0})
    assert [r.key for r in reader.records()] == ["toy/s0"]
    (tmp_path / "partial" / "settings.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match=r"unreadable partial/settings\.json \(a JSON list, not an object\); "
                                          r"pass --restart"):
        reader.check({"lists": "h1", "seed": 0})


def test_a_record_line_is_fsynced_once_five_seconds_have_passed(tmp_path, monkeypatch):
    clock = {"now": 100.0}
    synced = []
    monkeypatch.setattr(partial_module.time, "monotonic", lambda: clock["now"])
    real_fsync = os.fsync
    monkeypatch.setattr(partial_module.os, "fsync", lambda fd: (synced.append(clock["now"]), real_fsync(fd)))
    partial = PartialEvaluation(tmp_path)
    partial.start({"seed": 0})
    synced.clear()  # settings.json's own atomic write (os.fsync is the one function for every caller)
    for i, now in enumerate((100.0, 104.0, 105.0, 106.0, 109.9, 110.0)):
        clock["now"] = now
        partial.append(SceneRecord(key=f"synth/{i}", dataset="synth", scene=str(i), frames=[0], rows=[]))
    assert synced == [105.0, 110.0]  # the file was opened at 100: at 5 s, then 5 s after that sync
    partial.close()
    assert synced == [105.0, 110.0, 110.0]  # and on close


def test_a_record_holding_something_json_cannot_store_is_refused_by_name(tmp_path):
    partial = PartialEvaluation(tmp_path)
    partial.start({"seed": 0})
    try:
        with pytest.raises(TypeError, match="cannot store complex in a scene record"):
            partial.append(SceneRecord(key="synth/a", dataset="synth", scene="a", frames=[0], rows=[{"x": 1j}]))
        partial.append(SceneRecord(key="synth/b", dataset="synth", scene="b", frames=[0],
                                   rows=[{"n": np.int32(2), "v": np.float16(0.5)}]))
    finally:
        partial.close()
    assert [r.rows for r in partial.records()] == [[{"n": 2, "v": 0.5}]]


def test_the_fingerprint_names_the_model_folder_the_same_from_any_working_folder_and_hashes_the_manifest(
        saved_model, tmp_path, monkeypatch):
    from depthpe.evaluation.partial import eval_fingerprint
    from depthpe.config.inference import EvalConfig

    held_out = SimpleNamespace(size=SimpleNamespace(image_width=56, aspect=[0.5, 1.0], scale_reference="others"),
                               sources=[_source(tmp_path)])
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"scenes": {}}')
    monkeypatch.chdir(saved_model.parent)
    cfg = EvalConfig(model=saved_model.name, data=str(tmp_path), out=str(tmp_path / "out"), manifest=str(manifest))
    relative = eval_fingerprint(cfg, held_out, "cpu")
    monkeypatch.chdir(tmp_path)
    absolute = eval_fingerprint(EvalConfig(model=str(saved_model), data=str(tmp_path), out=str(tmp_path / "out"),
                                           manifest=str(manifest)), held_out, "cpu")
    assert relative == absolute and relative["model"] == str(saved_model.resolve())
    assert set(relative) == {"model", "revision", "weights", "model_config", "sources", "max_scenes", "views", "seed",
                             "manifest", "image_width", "aspect", "scale_reference", "dtype", "min_valid_fraction",
                             "panels", "worst", "device", "depthpe"}  # no camera_noise entry without noise
    manifest.write_text('{"scenes": {"synth/a": [0, 1]}}')
    changed = eval_fingerprint(EvalConfig(model=str(saved_model), data=str(tmp_path), out=str(tmp_path / "out"),
                                          manifest=str(manifest)), held_out, "cpu")
    assert settings_difference(absolute, changed) == "--manifest was '%s', now '%s'" % (
        absolute["manifest"], changed["manifest"])


def test_the_settings_hash_does_not_depend_on_key_order():
    from depthpe.evaluation.partial import settings_hash

    assert settings_hash({"a": 1, "b": [2, 3]}) == settings_hash({"b": [2, 3], "a": 1})
    assert len(settings_hash({"a": 1})) == 16 and settings_hash({"a": 1}) != settings_hash({"a": 2})


def test_blank_lines_and_a_cut_short_last_line_are_not_counted_as_bad(tmp_path):
    partial = PartialEvaluation(tmp_path)
    partial.start({"seed": 0})
    partial.append(SceneRecord(key="synth/a", dataset="synth", scene="a", frames=[0], rows=[]))
    partial.close()
    with open(tmp_path / "partial" / "scenes.0.jsonl", "a") as f:
        f.write('\n{"key": "synth/b", "dat')  # an empty line, then a line a kill cut short
    assert [r.key for r in partial.records()] == ["synth/a"] and partial.bad_records == 0
