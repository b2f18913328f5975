"""An interrupted `depthpe eval` continues where it stopped: the finished scenes are kept in
OUT/partial/, a rerun evaluates only the others and writes the same files as an uninterrupted run;
other settings are a one-line error, --restart starts over, a complete evaluation is not redone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import depthpe.evaluation.loop as evaluation
from depthpe.eval import main

SCENES = 5
ARGS = ["--views", "3", "--image-width", "42", "--panels", "2", "--worst", "3", "--num-workers", "0", "--cpu"]
OUTPUTS = ("summary.json", "metrics_per_image.csv", "manifest.json", "summary.md", "worst.json", "report.html")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from depthpe.data.synth import write_synth_dataset

    root = tmp_path_factory.mktemp("data")
    write_synth_dataset(root, train_scenes=0, val_scenes=SCENES, views=4, height=56, width=56, seed=0, progress=False)
    return root


@pytest.fixture(scope="module")
def reference(data, saved_model, tmp_path_factory):
    """The outputs of an uninterrupted evaluation, with one thread like every run compared with it (a
    module fixture is made before the function-level thread reset of conftest.py)."""
    import torch

    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("reference") / "eval"
    assert _eval(data, saved_model, out) == 0
    return out


def _eval(data, model, out, *extra) -> int:
    return main(["--model", str(model), "--data", str(data), "--out", str(out), *ARGS, *extra])


def _files(out: Path) -> dict[str, bytes]:
    """Every output file's bytes (the PNG panels too)."""
    names = [*OUTPUTS, *(str(p.relative_to(out)) for p in sorted(out.glob("*/*.png")))]
    return {name: (out / name).read_bytes() for name in names}


class Predictions:
    """Counts the model's scenes; raises ``error`` at call number ``fail_at`` (1-based), like a crash."""

    def __init__(self, monkeypatch, fail_at: int | None = None, error=KeyboardInterrupt):
        self.calls, self.fail_at, self.error = 0, fail_at, error
        self._predict = evaluation.scene_prediction
        monkeypatch.setattr(evaluation, "scene_prediction", self)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.fail_at:
            raise self.error()
        return self._predict(*args, **kwargs)


def _interrupt(data, model, out, monkeypatch, after: int) -> None:
    """An evaluation stopped (Ctrl-C) while predicting scene ``after + 1``."""
    with monkeypatch.context() as patch:
        Predictions(patch, fail_at=after + 1)
        with pytest.raises(KeyboardInterrupt):
            _eval(data, model, out)
    assert len((out / "partial" / "scenes.0.jsonl").read_text().splitlines()) == after


def test_an_interrupted_evaluation_resumes_and_writes_the_same_files(data, saved_model, reference, tmp_path,
                                                                     monkeypatch, capsys):
    out = tmp_path / "eval"
    _interrupt(data, saved_model, out, monkeypatch, after=2)
    with open(out / "partial" / "scenes.0.jsonl", "a") as f:
        f.write('{"key": "synth/val_0000')  # a line cut short by a kill
    capsys.readouterr()
    predictions = Predictions(monkeypatch)
    passes_one = []
    monkeypatch.setattr(evaluation, "_global_medians", lambda *a: passes_one.append(a))
    assert _eval(data, saved_model, out) == 0
    assert f"resuming: 2 of {SCENES} scenes already evaluated in {out}" in capsys.readouterr().out
    assert predictions.calls == SCENES - 2 and not passes_one  # pass 1's medians were kept too
    assert _files(out) == _files(reference)
    assert not (out / "partial").exists()


def test_a_killed_evaluation_resumes(data, saved_model, reference, tmp_path):
    """SIGKILL of a real `depthpe eval` process once 2 scenes are kept; the rerun finishes the rest."""
    out = tmp_path / "eval"
    # the third scene's prediction waits until the kill: exactly 2 scenes are kept, however busy the machine
    slow = ("import sys, time, depthpe.evaluation.loop as e; p = e.scene_prediction; calls = []; "
            "e.scene_prediction = lambda *a, **k: (calls.append(1), len(calls) > 2 and time.sleep(3600), "
            "p(*a, **k))[2]; from depthpe.eval import main; sys.exit(main(sys.argv[1:]))")
    argv = ["--model", str(saved_model), "--data", str(data), "--out", str(out), *ARGS]
    child = subprocess.Popen([sys.executable, "-c", slow, *argv], env={**os.environ, "OMP_NUM_THREADS": "1"},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kept = out / "partial" / "scenes.0.jsonl"
    deadline = time.monotonic() + 120
    while not (kept.exists() and kept.read_text().count("\n") >= 2) and child.poll() is None:
        assert time.monotonic() < deadline, "the evaluation kept no scene in 120 s"
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert kept.read_text().count("\n") == 2 and not (out / "summary.json").exists()
    assert _eval(data, saved_model, out) == 0
    assert _files(out) == _files(reference)


def test_other_settings_are_an_error_and_restart_starts_over(data, saved_model, reference, tmp_path,
                                                            monkeypatch, capsys):
    out = tmp_path / "eval"
    _interrupt(data, saved_model, out, monkeypatch, after=1)
    capsys.readouterr()
    assert _eval(data, saved_model, out, "--seed", "1") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: --out {out} holds a partial evaluation made with other settings: --seed was 0, now 1; "
                   "rerun with the same settings to resume it, choose another --out, or pass --restart to discard "
                   "the partial results"]
    weights = Path(saved_model) / "model.safetensors"
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a retrained model, same path
    try:
        assert _eval(data, saved_model, out) == 2
        assert "the weights file of --model (its size or modification time) changed" in capsys.readouterr().err
    finally:
        os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    predictions = Predictions(monkeypatch)
    assert _eval(data, saved_model, out, "--restart") == 0
    assert predictions.calls == SCENES and "resuming" not in capsys.readouterr().out
    assert _files(out) == _files(reference)


def test_a_complete_evaluation_is_not_redone(data, saved_model, reference, tmp_path, monkeypatch, capsys):
    import shutil

    out = tmp_path / "eval"
    shutil.copytree(reference, out)
    predictions = Predictions(monkeypatch)
    assert _eval(data, saved_model, out) == 0
    assert "already holds a complete evaluation with these settings" in capsys.readouterr().out
    assert predictions.calls == 0 and _files(out) == _files(reference)
    capsys.readouterr()
    assert _eval(data, saved_model, out, "--views", "2") == 2  # other settings: refused, the evaluation kept
    assert ("holds a complete evaluation made with other settings: --views was 3, now 2; choose another --out, "
            "or pass --restart to replace it") in capsys.readouterr().err
    assert predictions.calls == 0 and _files(out) == _files(reference)
    (out / "panels" / "stale.png").write_bytes(b"old")
    assert _eval(data, saved_model, out, "--views", "2", "--restart") == 0  # replaced, nothing stale kept
    assert predictions.calls == SCENES and not (out / "panels" / "stale.png").exists()
    assert _files(out)["manifest.json"] != _files(reference)["manifest.json"]


@pytest.mark.slow
def test_two_processes_resume_one_process_run(data, saved_model, reference, tmp_path, monkeypatch):
    """The finished scenes of a one-process run are skipped by a 2-process rerun (accelerate launch,
    gloo on CPU), which splits the others and writes the same numbers."""
    import json
    import socket

    out = tmp_path / "eval"
    _interrupt(data, saved_model, out, monkeypatch, after=2)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(port),
           "-m", "depthpe.eval", "--model", str(saved_model), "--data", str(data), "--out", str(out), *ARGS]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resuming: 2 of {SCENES} scenes already evaluated" in done.stdout
    ours, theirs = (json.loads((folder / "summary.json").read_text()) for folder in (out, reference))
    assert ours["meta"]["processes"] == 2
    assert ours["summary"] == theirs["summary"] and ours["failures"] == theirs["failures"]
    files, expected = _files(out), _files(reference)
    assert {k: v for k, v in files.items() if k not in ("summary.json", "report.html")} == \
        {k: v for k, v in expected.items() if k not in ("summary.json", "report.html")}
    assert not (out / "partial").exists()



def test_unreadable_partial_settings_are_an_error(data, saved_model, tmp_path, capsys):
    out = tmp_path / "eval"
    (out / "partial").mkdir(parents=True)
    (out / "partial" / "settings.json").write_text("{")  # cut short
    assert _eval(data, saved_model, out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: --out {out}: unreadable partial/settings.json (")
    assert err[0].endswith("pass --restart to discard the partial results")
