"""The printed summary of a conversion (``format_summary``): dropped frames by reason, at most 20
skipped scenes named, the EXIF note."""

from __future__ import annotations

import pytest

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
