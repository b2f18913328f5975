"""A resumable evaluation never merges results of other models or settings, and a damaged partial
folder costs re-evaluation, never a crash (reliability IV items 3 and 11); one evaluation per --out."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from depthpe.config import ConfigError
from depthpe.evaluation.command import out_lock
from depthpe.evaluation.partial import PartialEvaluation
from depthpe.evaluation.record import SceneRecord

SETTINGS_A, SETTINGS_B = {"model": "a", "seed": 0}, {"model": "b", "seed": 1}


def _record(scene: str, **extra) -> SceneRecord:
    return SceneRecord(key=f"synth/{scene}", dataset="synth", scene=scene, frames=[0, 1],
                       rows=[{"abs_rel": 0.5}], **extra)


def _write(out, settings, scenes, panel=False) -> PartialEvaluation:
    partial = PartialEvaluation(out)
    partial.start(settings)
    for scene in scenes:
        partial.keep(_record(scene, panel_image=np.zeros((2, 3, 3), np.uint8) if panel else None), [])
    partial.close()
    return partial


def test_start_empties_the_folder_of_an_earlier_run(tmp_path):
    old = _write(tmp_path, SETTINGS_A, ["s0", "s1"], panel=True)
    old.save_gt_medians({"synth": 1.5})
    (old.folder / "png" / "stale.png").write_bytes(b"not a panel of this run")
    new = PartialEvaluation(tmp_path)
    new.start(SETTINGS_B)
    assert sorted(p.name for p in new.folder.iterdir()) == ["settings.json"]
    assert new.records() == [] and new.gt_medians() is None


def test_records_of_other_settings_are_never_reused(tmp_path):
    """settings.json deleted (or removed by a concurrent run): another model's lines stay unused."""
    _write(tmp_path, SETTINGS_A, ["s0", "s1"])
    (tmp_path / "partial" / "settings.json").unlink()
    reader = PartialEvaluation(tmp_path)
    reader.use_settings(SETTINGS_B)
    assert reader.records() == [] and reader.bad_records == 2
    reader.use_settings(SETTINGS_A)
    assert [r.key for r in reader.records()] == ["synth/s0", "synth/s1"] and reader.bad_records == 0


def test_damaged_lines_are_skipped_and_counted(tmp_path):
    partial = _write(tmp_path, SETTINGS_A, ["s0", "s1", "s2"], panel=True)
    path = partial.folder / "scenes.0.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(1, b"{not json\n")  # a bad middle line
    lines.insert(2, b"\xff\xfe\x00 bytes\n")  # not UTF-8
    lines.append(lines[0])  # s0 again
    path.write_bytes(b"".join(lines))
    (partial.folder / "png" / "panel_synth_s2.png").unlink()  # s2's panel is gone
    reader = PartialEvaluation(tmp_path)
    reader.use_settings(SETTINGS_A)
    assert [r.key for r in reader.records()] == ["synth/s0", "synth/s1"]
    assert reader.bad_records == 4


@pytest.mark.parametrize("content", ["[]", "{broken", "7"])
def test_an_unreadable_settings_file_is_one_line_with_restart(tmp_path, content):
    _write(tmp_path, SETTINGS_A, ["s0"])
    (tmp_path / "partial" / "settings.json").write_text(content)
    with pytest.raises(ConfigError, match=r"unreadable partial/settings.json .*pass --restart") as err:
        PartialEvaluation(tmp_path).check(SETTINGS_A)
    assert "\n" not in str(err.value)


def test_a_second_evaluation_into_one_out_is_refused(tmp_path):
    out = tmp_path / "eval"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from depthpe.files import lock_folder; "
                               f"lock = lock_folder({str(out)!r}); print('held', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        main = SimpleNamespace(is_main_process=True, num_processes=1)
        with pytest.raises(ConfigError, match=f"--out {out} is in use by another depthpe command or a training run"):
            with out_lock(out, main):
                pytest.fail("the block must not run while another process holds --out")
    finally:
        holder.communicate("")
    ran = []
    with out_lock(out, main):  # free again once the holder is gone
        ran.append(True)
    assert ran == [True]
