"""A checkpoint or final export that does not fit on the disk: one `error:` line (also in train.log),
no partial folder, the previous checkpoint kept, a non-zero exit status; the free space is checked
before writing. Nothing fills a real disk: ``shutil.disk_usage`` and the writer are monkeypatched,
and the file-size limit (``RLIMIT_FSIZE``) of a child process gives a real failing write."""

from __future__ import annotations

import errno
import resource
import shutil
import signal
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import pytest

from depthpe.cli import main
from depthpe.run import dump_run_config
from depthpe.run.disk_space import format_bytes, space_error
from tests.helpers.training import run_config

Usage = namedtuple("Usage", "total used free")


def _config_file(root, out, tmp_path, **sections) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(dump_run_config(run_config(root, out, **sections)))
    return path


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in [*out.glob(".*"), *(out / "checkpoints").glob(".*")] if p.name != ".lock")


def _assert_one_error_line(err: str, start: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and lines and lines[-1].startswith(start), err
    return lines[-1]


def test_a_checkpoint_that_does_not_fit_is_refused_before_writing(synth_root, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    real = shutil.disk_usage

    def usage(path):  # plenty of room until the first checkpoint exists, then 1 kB
        full = (out / "checkpoints" / "step_0000002").is_dir()
        return Usage(10**12, 0, 1000) if full else real(path)

    monkeypatch.setattr(shutil, "disk_usage", usage)
    status = main(["train", "--config", str(_config_file(synth_root, out, tmp_path, train={"steps": 6}))])
    assert status == 1
    line = _assert_one_error_line(capsys.readouterr().err, f"error: no space left on {out} for checkpoint step 4")
    size = (out / "checkpoints" / "step_0000002")
    assert f"needs about {format_bytes(sum(p.stat().st_size for p in size.rglob('*') if p.is_file()))}" in line
    assert "1 kB free" in line
    assert line[len("error: "):] in (out / "train.log").read_text()
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_0000002"]
    assert not (out / "final").exists() and _leftovers(out) == []


def test_enospc_while_writing_removes_the_partial_folder_and_keeps_the_previous(synth_root, tmp_path, monkeypatch,
                                                                                 capsys):
    import depthpe.run.checkpoints as checkpoints

    real = checkpoints.export_model

    def export_model(accelerator, model, directory, inputs):  # the disk fills up at the second checkpoint
        if "step_0000004" in str(directory):
            directory.mkdir(parents=True)
            (directory / "model.safetensors").write_bytes(b"\0" * 1000)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(accelerator, model, directory, inputs)

    monkeypatch.setattr(checkpoints, "export_model", export_model)
    out = tmp_path / "run"
    status = main(["train", "--config", str(_config_file(synth_root, out, tmp_path, train={"steps": 6}))])
    assert status == 1
    line = _assert_one_error_line(capsys.readouterr().err,
                                  f"error: no space left on {out} while writing checkpoint step 4 (needs about ")
    assert line[len("error: "):] in (out / "train.log").read_text()
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_0000002"]
    assert _leftovers(out) == []


def _limit_file_size():
    """In the child: files may not grow past 1 MB, and a write beyond fails with EFBIG (SIGXFSZ ignored)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (10**6, 10**6))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def test_the_file_size_limit_during_a_checkpoint_is_one_error_line(synth_root, tmp_path):
    out = tmp_path / "run"
    config = _config_file(synth_root, out, tmp_path)
    proc = subprocess.run([sys.executable, "-m", "depthpe", "train", "--config", str(config)], capture_output=True,
                          text=True, preexec_fn=_limit_file_size, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    line = _assert_one_error_line(proc.stderr, "error: the file-size limit of this process (ulimit -f) was reached "
                                               f"on {out} while writing checkpoint step 2 (needs about ")
    assert line[len("error: "):] in (out / "train.log").read_text()
    assert not (out / "checkpoints").exists() or not any((out / "checkpoints").iterdir())
    assert _leftovers(out) == []


@pytest.mark.parametrize("err, reason", [
    (OSError(errno.ENOSPC, "No space left on device"), "no space left"),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), "disk quota exceeded"),
    (RuntimeError("Error while serializing: I/O error: File too large (os error 27)"), "file-size limit"),
    (RuntimeError("Error while serializing: IoError(Os { code: 28, kind: StorageFull })"), None),
    (ValueError("not about space"), None),
])
def test_write_errors_are_told_apart(tmp_path, err, reason, monkeypatch):
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(10**12, 0, 10**12))
    problem = space_error(err, tmp_path, 10**9, "checkpoint step 7")
    if reason is None:
        assert problem is None
    else:
        assert reason in str(problem) and "checkpoint step 7 (needs about 1 GB)" in str(problem)
