"""The split file of a converted dataset (depthpe/scenes/convert/splits.py): drawn once, then
reused; scenes of a larger download are added by their official split or to train, counted, and
the file is rewritten only when something was added."""

from __future__ import annotations

import json

import pytest

from depthpe.scenes.convert.common import ConvertOptions
from depthpe.scenes.convert.contract import SceneRef
from depthpe.scenes.convert.splits import SPLIT_FILE, load_or_create_split

OPTIONS = ConvertOptions(progress=False, val_scenes=1, split_seed=0)


def _refs(*names, split=None):
    return [SceneRef(name, f"/raw/{name}", split) for name in names]


@pytest.mark.parametrize("rule", ["random", "train"])
def test_new_scenes_of_a_larger_download_go_to_train_and_are_counted(tmp_path, rule):
    first, info = load_or_create_split(tmp_path, _refs("a", "b", "c", "d"), rule, OPTIONS)
    assert info == {"file": str(tmp_path / SPLIT_FILE), "created": True, "added": 0}
    written = (tmp_path / SPLIT_FILE).stat().st_mtime_ns
    again, info = load_or_create_split(tmp_path, _refs("d", "c", "b", "a"), rule, OPTIONS)
    assert again == first and info["added"] == 0 and not info["created"]
    assert (tmp_path / SPLIT_FILE).stat().st_mtime_ns == written  # nothing added: not rewritten
    more, info = load_or_create_split(tmp_path, _refs("a", "b", "c", "d", "e", "f"), rule, OPTIONS)
    assert more == {**first, "e": "train", "f": "train"} and info["added"] == 2
    doc = json.loads((tmp_path / SPLIT_FILE).read_text())
    assert sorted(doc["splits"]["train"]) == sorted(s for s, split in more.items() if split == "train")


def test_under_the_official_rule_new_scenes_take_their_own_split_and_others_stay_out(tmp_path):
    refs = _refs("a", "b", split="train") + _refs("c", split="val")
    first, info = load_or_create_split(tmp_path, refs + _refs("x"), "official", OPTIONS)
    assert first == {"a": "train", "b": "train", "c": "val"} and info["added"] == 0  # x has no official split
    more, info = load_or_create_split(tmp_path, refs + _refs("d", split="val") + _refs("y"), "official", OPTIONS)
    assert more == {**first, "d": "val"} and info["added"] == 1
