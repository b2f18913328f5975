"""``depthpe convert --shard K/N`` (and a Slurm array task's shard): each shard converts a disjoint part
and writes no index; the same command without --shard then joins them into exactly the result of one
run (split, scene files, indexes). The real Slurm array job: tests/slurm/test_cluster.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from depthpe.cli import main
from depthpe.scenes.convert import convert
from depthpe.scenes.convert.common import ConvertOptions
from depthpe.scenes.convert.options import parse_shard
from depthpe.cluster.slurm import array_shard
from depthpe.testing import fake_datasets as fake
from tests.helpers.converted import assert_same_dataset


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    root = tmp_path_factory.mktemp("co3d") / "raw"
    fake.write_fake_co3d(root, fake.make_scenes(5, views=3, height=32, width=40, seed=3))
    return root


def test_shards_then_a_join_equal_one_conversion(raw, tmp_path):
    options = dict(val_scenes=1, progress=False)
    convert("co3d", raw, tmp_path / "one", ConvertOptions(**options))
    written = []
    for k in range(3):
        summary = convert("co3d", raw, tmp_path / "sharded", ConvertOptions(**options, shard=f"{k}/3"))
        assert summary["shard"] == [k, 3]
        written.append(summary["scenes_written"])
        assert not list((tmp_path / "sharded").rglob("index.json"))  # shards write no index
    assert written == [2, 2, 1]  # every 3rd of the 5 sorted scenes: disjoint, all covered
    joined = convert("co3d", raw, tmp_path / "sharded", ConvertOptions(**options))
    assert joined["scenes_existing"] == 5 and joined["scenes_written"] == 0
    assert_same_dataset(tmp_path / "one", tmp_path / "sharded")


def test_the_shard_of_a_slurm_array_task(raw, tmp_path, monkeypatch, capsys):
    env = {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "4", "SLURM_ARRAY_TASK_MAX": "6",
           "SLURM_ARRAY_TASK_COUNT": "3"}
    assert array_shard(env) == (1, 3) and array_shard({}) is None
    assert ConvertOptions().shard_of_run(env) == (1, 3)
    assert ConvertOptions(shard="0/2").shard_of_run(env) == (0, 2)  # --shard wins
    with pytest.raises(ValueError, match="not consecutive"):
        array_shard({**env, "SLURM_ARRAY_TASK_MAX": "8"})
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "2")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "3")
    summary = convert("co3d", raw, tmp_path, ConvertOptions(val_scenes=1, progress=False))
    assert summary["shard"] == [2, 3] and summary["scenes_written"] == 1
    monkeypatch.setenv("SLURM_ARRAY_TASK_MAX", "4")  # --array=0-4:2: ids 0, 2, 4
    assert main(["convert", "co3d", "--src", str(raw), "--out", str(tmp_path / "gaps"), "--quiet"]) == 2
    assert "error: the array job's task ids are not consecutive (3 tasks from 0 to 4)" in capsys.readouterr().out


@pytest.mark.parametrize("text", ["3/3", "1", "a/2", "-1/2", "1/0"])
def test_a_bad_shard_is_one_line(text, raw, tmp_path):
    with pytest.raises(ValueError, match="expected K/N"):
        parse_shard(text)
    done = subprocess.run([sys.executable, "-m", "depthpe", "convert", "co3d", "--src", str(raw), "--out",
                           str(tmp_path), "--shard", text], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--shard" in (done.stdout + done.stderr) and "Traceback" not in done.stderr


def test_a_slurm_array_task_registers_as_a_shard_and_does_not_hold_the_folder(raw, tmp_path, monkeypatch):
    """An array task (no --shard, its shard from Slurm's variables) writes beside its sibling tasks: it
    waits for a sibling's moment under the lock instead of refusing, and leaves the folder unlocked
    and its manifest 'running' for the join (it failed with 'in use by' when only --shard did this)."""
    import json
    import time

    from depthpe.files import lock_folder

    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "0")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "3")
    (tmp_path / "co3d").mkdir()
    sibling = subprocess.Popen([sys.executable, "-c", "import sys, time; from depthpe.files import lock_folder; "
                                "lock = lock_folder(sys.argv[1]); print('held', flush=True); time.sleep(2)",
                                str(tmp_path / "co3d")], stdout=subprocess.PIPE, text=True)
    assert sibling.stdout.readline().strip() == "held"  # a sibling task registering at this moment
    start = time.monotonic()
    assert main(["convert", "co3d", "--src", str(raw), "--out", str(tmp_path), "--quiet", "--workers", "1"]) == 0
    sibling.wait(timeout=30)
    assert time.monotonic() - start > 0.5  # it waited for the sibling
    assert json.loads((tmp_path / "co3d" / ".depthpe-owner.json").read_text())["state"] == "running"
    lock_folder(tmp_path / "co3d").release()  # nobody holds it after the task
