"""An interrupted `depthpe eval` continues where it stopped: the finished scenes are kept in
OUT/partial/, a rerun evaluates only the others and writes the same files as an uninterrupted run;
other settings are a one-line error, --restart starts over, a complete evaluation is not redone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import depthpe.evaluation.loop as evaluation
from tests.helpers.eval_resume import ARGS, SCENES, Predictions, eval_into, interrupt, output_files

@pytest.fixture(scope="module")
def data(resume_data):
    return resume_data


@pytest.fixture(scope="module")
def reference(data, saved_model, tmp_path_factory):
    """The outputs of an uninterrupted evaluation, with one thread like every run compared with it (a
    module fixture is made before the function-level thread reset of conftest.py)."""
    import torch

    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("reference") / "eval"
    assert eval_into(data, saved_model, out) == 0
    return out


def test_an_interrupted_evaluation_resumes_and_writes_the_same_files(data, saved_model, reference, tmp_path,
                                                                     monkeypatch, capsys):
    out = tmp_path / "eval"
    interrupt(data, saved_model, out, monkeypatch, after=2)
    with open(out / "partial" / "scenes.0.jsonl", "a") as f:
        f.write('{"key": "synth/val_0000')  # a line cut short by a kill
    capsys.readouterr()
    predictions = Predictions(monkeypatch)
    passes_one = []
    monkeypatch.setattr(evaluation, "_global_medians", lambda *a: passes_one.append(a))
    assert eval_into(data, saved_model, out) == 0
    assert f"resuming: 2 of {SCENES} scenes already evaluated in {out}" in capsys.readouterr().out
    assert predictions.calls == SCENES - 2 and not passes_one  # pass 1's medians were kept too
    assert output_files(out) == output_files(reference)
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
    assert eval_into(data, saved_model, out) == 0
    assert output_files(out) == output_files(reference)


def test_other_settings_are_an_error_and_restart_starts_over(data, saved_model, reference, tmp_path,
                                                            monkeypatch, capsys):
    out = tmp_path / "eval"
    interrupt(data, saved_model, out, monkeypatch, after=1)
    capsys.readouterr()
    assert eval_into(data, saved_model, out, "--seed", "1") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: --out {out} holds a partial evaluation made with other settings: --seed was 0, now 1; "
                   "rerun with the same settings to resume it, choose another --out, or pass --restart to discard "
                   "the partial results"]
    weights = Path(saved_model) / "model.safetensors"
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a retrained model, same path
    try:
        assert eval_into(data, saved_model, out) == 2
        assert "the weights file of --model (its size or modification time) changed" in capsys.readouterr().err
    finally:
        os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    predictions = Predictions(monkeypatch)
    assert eval_into(data, saved_model, out, "--restart") == 0
    assert predictions.calls == SCENES and "resuming" not in capsys.readouterr().out
    assert output_files(out) == output_files(reference)


def test_a_complete_evaluation_is_not_redone(data, saved_model, reference, tmp_path, monkeypatch, capsys):
    import shutil

    out = tmp_path / "eval"
    shutil.copytree(reference, out)
    predictions = Predictions(monkeypatch)
    assert eval_into(data, saved_model, out) == 0
    assert "already holds a complete evaluation with these settings" in capsys.readouterr().out
    assert predictions.calls == 0 and output_files(out) == output_files(reference)
    capsys.readouterr()
    assert eval_into(data, saved_model, out, "--views", "2") == 2  # other settings: refused, the evaluation kept
    assert ("holds a complete evaluation made with other settings: --views was 3, now 2; choose another --out, "
            "or pass --restart to replace it") in capsys.readouterr().err
    assert predictions.calls == 0 and output_files(out) == output_files(reference)
    (out / "panels" / "stale.png").write_bytes(b"old")  # a file evaluation did not write
    old_panels = {p.name for p in (out / "panels").glob("*.png")} - {"stale.png"}
    assert eval_into(data, saved_model, out, "--views", "2", "--restart") == 0  # replaced, nothing stale of its own
    owned = json.loads((out / ".depthpe-owner.json").read_text())["files"]
    assert predictions.calls == SCENES and old_panels and (out / "panels" / "stale.png").read_bytes() == b"old"
    assert "panels/stale.png" not in owned  # kept: only files evaluation wrote are deleted or listed
    assert {f"panels/{p.name}" for p in (out / "panels").glob("*.png")} - {"panels/stale.png"} <= set(owned)
    assert output_files(out)["manifest.json"] != output_files(reference)["manifest.json"]


@pytest.mark.slow
def test_two_processes_resume_one_process_run(data, saved_model, reference, tmp_path, monkeypatch):
    """The finished scenes of a one-process run are skipped by a 2-process rerun (accelerate launch,
    gloo on CPU), which splits the others and writes the same numbers."""
    import json
    import socket

    out = tmp_path / "eval"
    interrupt(data, saved_model, out, monkeypatch, after=2)
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
    files, expected = output_files(out), output_files(reference)
    assert {k: v for k, v in files.items() if k not in ("summary.json", "report.html")} == \
        {k: v for k, v in expected.items() if k not in ("summary.json", "report.html")}
    assert not (out / "partial").exists()



def test_unreadable_partial_settings_are_an_error(data, saved_model, tmp_path, capsys):
    out = tmp_path / "eval"
    (out / "partial").mkdir(parents=True)
    (out / "partial" / "settings.json").write_text("{")  # cut short
    (out / ".depthpe-owner.json").write_text(json.dumps({"command": "depthpe eval", "fingerprint": {},
                                                          "files": ["partial/settings.json"]}))
    assert eval_into(data, saved_model, out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: --out {out}: unreadable partial/settings.json (")
    assert err[0].endswith("pass --restart to discard the partial results")
