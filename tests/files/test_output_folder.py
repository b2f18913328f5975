"""depthpe.files.output_folder: the one owner of a command's output folder (issue 42 item 1)."""

import json
import re
import os
import subprocess
import sys

import pytest

from depthpe.config import ConfigError
from depthpe.files.output_folder import MANIFEST, claim_output_folder, folder_owner, owned_output_folder, settings_fingerprint


def _write(folder, name, text="x"):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_manifest_lists_the_command_its_fingerprint_and_the_files_it_wrote(tmp_path):
    out = tmp_path / "out"
    with claim_output_folder(out, "depthpe a") as folder:
        assert not (out / MANIFEST).exists()  # nothing written before the checks pass
        folder.begin({"views": 2})
        _write(out, "sub/table.csv")
        _write(out, "summary.json")
    owner = folder_owner(out)
    assert owner["command"] == "depthpe a" and owner["fingerprint"] == {"views": 2}
    assert owner["files"] == ["sub/table.csv", "summary.json"] and owner["state"] == "complete"


def test_other_settings_are_refused_and_replacing_deletes_only_the_commands_own_files(tmp_path):
    out = tmp_path / "out"
    with owned_output_folder(out, "depthpe a", {"views": 2}):
        _write(out, "predictions/a.npy")
    _write(out, "predictions/mine.npy")  # a file the command did not write
    with pytest.raises(ConfigError, match=r"holds the outputs of depthpe a made with other settings: views was 2, "
                                          r"now 3; .* or pass --overwrite to replace them$"):
        with owned_output_folder(out, "depthpe a", {"views": 3}):
            pytest.fail("refused before the block")
    assert (out / "predictions" / "a.npy").exists()
    with owned_output_folder(out, "depthpe a", {"views": 3}, replace=True):
        assert not (out / "predictions" / "a.npy").exists() and (out / "predictions" / "mine.npy").exists()
        _write(out, "predictions/b.npy")
    with owned_output_folder(out, "depthpe a", {"views": 3}):  # the same settings again: accepted
        pass


def test_another_commands_folder_and_unrecorded_files_are_refused_before_anything_changes(tmp_path):
    out = tmp_path / "out"
    with owned_output_folder(out, "depthpe a", {}):
        _write(out, "summary.json", "a")
    before = sorted((p.name, p.read_bytes()) for p in out.iterdir())
    with pytest.raises(ConfigError, match=r"holds the outputs of depthpe a, not of depthpe b; .*--overwrite"):
        with claim_output_folder(out, "depthpe b"):
            pass
    assert sorted((p.name, p.read_bytes()) for p in out.iterdir()) == before
    plain = tmp_path / "plain"
    _write(plain, "notes.txt")
    with pytest.raises(ConfigError, match=r"already holds 1 file\(s\) that no depthpe command recorded .*notes.txt"):
        with claim_output_folder(plain, "depthpe b"):
            pass
    assert [p.name for p in plain.iterdir()] == ["notes.txt"]  # not even a lock file is left
    with owned_output_folder(plain, "depthpe b", {}, replace=True):  # adopted on request, the file kept
        _write(plain, "out.txt")
    assert folder_owner(plain)["files"] == ["out.txt"] and (plain / "notes.txt").exists()


def test_an_unreadable_manifest_is_refused_unless_replacing(tmp_path):
    """A damaged manifest names no owner: the folder is refused (nobody can tell whose files are
    whose), nothing changes; with replace it is adopted and its files are kept."""
    out = tmp_path / "out"
    with owned_output_folder(out, "depthpe a", {}):
        _write(out, "summary.json", "a")
    (out / MANIFEST).write_text("{ not json")
    with pytest.raises(ConfigError, match=re.escape(f"--out {out}: its {MANIFEST} is unreadable, so depthpe cannot "
                                                    "tell which files are whose; choose another --out, or pass "
                                                    "--overwrite to write into it anyway")):
        with claim_output_folder(out, "depthpe a"):
            pass
    assert (out / MANIFEST).read_text() == "{ not json" and (out / "summary.json").read_text() == "a"
    with owned_output_folder(out, "depthpe a", {}, replace=True):
        _write(out, "new.json", "b")
    assert folder_owner(out)["command"] == "depthpe a" and (out / "summary.json").read_text() == "a"


def test_a_command_that_wrote_nothing_leaves_no_trace(tmp_path):
    out = tmp_path / "new"
    with pytest.raises(ConfigError):
        with owned_output_folder(out, "depthpe a", {}):
            raise ConfigError("refused by the command's own check")
    assert not out.exists()


def test_the_files_of_a_killed_holder_count_as_its_own(tmp_path):
    out = tmp_path / "out"
    code = ("import os, sys; from pathlib import Path; from depthpe.files.output_folder import claim_output_folder\n"
            f"out = Path({str(out)!r})\n"
            "with claim_output_folder(out, 'depthpe a') as f:\n"
            "    f.begin({'v': 1}); (out / 'half.npy').write_text('x'); print('written', flush=True); sys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert holder.stdout.readline().strip() == "written"
    holder.kill()
    holder.wait()
    assert folder_owner(out)["state"] == "running"
    with owned_output_folder(out, "depthpe a", {"v": 2}, replace=True):
        assert not (out / "half.npy").exists()  # the dead run's file, deleted as the command's own


def test_settings_fingerprint_resolves_paths_and_leaves_out_what_changes_no_number(tmp_path, monkeypatch):
    from dataclasses import dataclass

    @dataclass
    class Cfg:
        data: str
        out: str
        views: int
        workers: int = 1

    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    a = settings_fingerprint(Cfg("d", "o1", 2, 1))
    assert a == settings_fingerprint(Cfg(str(tmp_path / "d"), "o2", 2, 8)) == {"data": str(tmp_path / "d"), "views": 2}
    assert json.dumps(a)


def test_a_training_run_refuses_another_commands_folder(tmp_path, synth_root):
    from depthpe.run.preflight import preflight
    from tests.helpers.training import run_config

    out = tmp_path / "run"
    with owned_output_folder(out, "depthpe eval", {}):
        _write(out, "summary.json")
    with pytest.raises(ConfigError, match=r"^output_dir .* holds the outputs of depthpe eval \(.depthpe-owner.json\), "
                                          r"not a training run"):
        preflight(run_config(synth_root, out))


def test_shards_write_alongside_and_the_final_run_owns_their_files(tmp_path):
    from depthpe.files.output_folder import register_shard

    out = tmp_path / "out"
    register_shard(out, "depthpe convert", {"v": 1})  # shard 0 writes the manifest
    _write(out, "train/a.h5")
    # shard 0 started well before shard 1 registers: its start time must stay the manifest's, or the files
    # it wrote before shard 1 came would no longer count as the command's own
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["started_ns"] -= 10**10
    (out / MANIFEST).write_text(json.dumps(manifest))
    register_shard(out, "depthpe convert", {"v": 1})  # shard 1 checks it, the manifest kept
    assert folder_owner(out)["started_ns"] == manifest["started_ns"]
    _write(out, "train/b.h5")
    assert folder_owner(out)["state"] == "running"
    with pytest.raises(ConfigError, match="made with other settings"):
        register_shard(out, "depthpe convert", {"v": 2})
    with pytest.raises(ConfigError, match="holds the outputs of depthpe convert, not of depthpe synth"):
        register_shard(out, "depthpe synth", {"v": 1})
    with owned_output_folder(out, "depthpe convert", {"v": 1}):  # the run that writes the indexes
        _write(out, "train/index.json")
    owner = folder_owner(out)
    assert owner["state"] == "complete" and owner["files"] == ["train/a.h5", "train/b.h5", "train/index.json"]


def test_replacing_removes_the_subfolders_it_empties_and_nothing_above_the_folder(tmp_path):
    out = tmp_path / "parent" / "out"
    with owned_output_folder(out, "depthpe a", {"v": 1}):
        _write(out, "panels/deep/a.png")
        _write(out, "kept/b.png")
    _write(out, "kept/mine.txt")  # not the command's: its folder stays
    with owned_output_folder(out, "depthpe a", {"v": 2}, replace=True):
        assert not (out / "panels").exists()  # panels/deep/ and panels/ emptied: gone
        assert (out / "kept" / "mine.txt").exists() and not (out / "kept" / "b.png").exists()
        assert out.is_dir() and (tmp_path / "parent").is_dir()


_HOLD_THE_FOLDER = """
import pathlib, sys, time
from depthpe.files.output_folder import claim_output_folder
release = pathlib.Path(sys.argv[2])
with claim_output_folder(sys.argv[1], "depthpe convert"):
    print("held", flush=True)
    while not release.exists():
        time.sleep(0.05)
"""


def test_a_shard_waits_while_another_process_holds_the_lock(tmp_path, monkeypatch):
    import depthpe.files.output_folder as owner_module
    from depthpe.files.output_folder import register_shard

    out, release = tmp_path / "out", tmp_path / "release"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_THE_FOLDER, str(out), str(release)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=r"is in use by .*; wait for it to finish"):
            register_shard(out, "depthpe convert", {"v": 1}, wait_s=0)
        waits = []
        real_sleep = owner_module.time.sleep

        def release_on_first_wait(seconds):  # the shard was refused once and waits: let the holder go
            waits.append(seconds)
            release.touch()
            real_sleep(seconds)

        monkeypatch.setattr(owner_module.time, "sleep", release_on_first_wait)
        register_shard(out, "depthpe convert", {"v": 1}, wait_s=120)
    finally:
        release.touch()
        holder.wait(timeout=60)
    assert waits and folder_owner(out)["command"] == "depthpe convert"
