"""Faults in short real training runs: SIGKILL at a step and during a checkpoint save (exact resume),
bad scene files and NaN/inf data (skipped, counted, logged), non-finite gradients (step skipped).

Killed runs are forked child processes (they inherit the imported libraries, so they start fast) that
install a fault and then call the real ``depthpe.train.main``; the fault SIGKILLs the child, which
nothing can catch. The resumed runs use ``main([... "--resume", "latest"])`` in this process. All runs
use 1 torch thread, so CPU fp32 results are bit-for-bit reproducible.
"""

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from depthpe.run import dump_run_config
from depthpe.run.checkpoints import find_checkpoint
from depthpe.run.trainer import train
from depthpe.train import main
from tests.helpers.training import run_config

STEPS = 5  # checkpoints after steps 2 and 4
CAMERA_SEED = 7  # a seed whose first 3 steps draw every scene of CAMERA_BAD


def _config(root, out, **train_overrides):
    return run_config(root, out, train={"steps": STEPS, "checkpoint_every": 2, "torch_threads": 1,
                                        **train_overrides})


def _weights(final: Path) -> dict:
    return load_file(final / "model.safetensors")


def _assert_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


@pytest.fixture(scope="module")
def reference(synth_root, tmp_path_factory):
    """Final weights of the uninterrupted run."""
    return _weights(train(_config(synth_root, tmp_path_factory.mktemp("ref") / "run")))


def _kill_at_loss_call(n: int) -> None:
    """Fault: SIGKILL this process in the n-th loss computation (= during optimizer step n)."""
    import depthpe.run.losses as losses

    real, calls = losses.depth_loss, [0]

    def depth_loss(*args, **kwargs):
        calls[0] += 1
        if calls[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)

    losses.depth_loss = depth_loss


def _kill_after_state_save(n: int) -> None:
    """Fault: SIGKILL this process in the n-th checkpoint save, right after the Accelerate state was
    written into the temporary folder (model export and trainer_state.json still missing)."""
    import accelerate

    real, calls = accelerate.Accelerator.save_state, [0]

    def save_state(self, *args, **kwargs):
        result = real(self, *args, **kwargs)
        calls[0] += 1
        if calls[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    accelerate.Accelerator.save_state = save_state


def _child(config: str, fault, arg: int) -> None:
    fault(arg)
    main(["--config", config])


def _run_killed(tmp_path: Path, cfg, fault, arg: int) -> Path:
    """Run training with ``fault(arg)`` installed in a child process; check it died of SIGKILL.

    The child is spawned, not forked: a fork is unsafe once autograd has started a device thread in
    this process (an earlier test running backward on fake CUDA tensors does, e.g. bench memory)."""
    config = tmp_path / "config.yaml"
    config.write_text(dump_run_config(cfg))
    child = multiprocessing.get_context("spawn").Process(target=_child, args=(str(config), fault, arg))
    child.start()
    child.join(timeout=240)
    if child.is_alive():
        child.kill()
        pytest.fail("the training child neither finished nor died within 240 s")
    assert child.exitcode == -signal.SIGKILL, child.exitcode
    return config


def test_sigkill_mid_run_then_resume_latest_is_bit_exact(synth_root, reference, tmp_path):
    out = tmp_path / "run"
    config = _run_killed(tmp_path, _config(synth_root, out), _kill_at_loss_call, 4)  # during step 4
    assert find_checkpoint(out, "latest").name == "step_0000002"
    assert not (out / "final").exists()
    assert main(["--config", str(config), "--resume", "latest"]) == 0
    _assert_equal(_weights(out / "final"), reference)
    assert json.loads((out / "final" / "trainer_state.json").read_text())["step"] == STEPS


def test_kill_during_checkpoint_save_keeps_previous_checkpoint(synth_root, reference, tmp_path, capsys):
    out = tmp_path / "run"
    config = _run_killed(tmp_path, _config(synth_root, out), _kill_after_state_save, 2)  # saving step 4
    partial = out / "checkpoints" / ".tmp_step_0000004"
    assert (partial / "state" / "model.safetensors").is_file()  # the save had really begun
    assert not (partial / "trainer_state.json").exists() and not (out / "checkpoints" / "step_0000004").exists()
    assert find_checkpoint(out, "latest").name == "step_0000002"  # the partial one is ignored
    capsys.readouterr()
    assert main(["--config", str(config), "--resume", "latest"]) == 0
    printed = capsys.readouterr().out
    assert "resumed from" in printed and "step_0000002 at step 2" in printed
    assert ".tmp_step_0000004: an interrupted checkpoint save" in printed
    _assert_equal(_weights(out / "final"), reference)
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_0000002", "step_0000004"]


def _wait_at_loss_call(n: int, marker: Path) -> None:
    """Fault: in the n-th loss computation (during step n) create ``marker`` and wait until the test
    has removed it (after sending its signal)."""
    import depthpe.run.losses as losses

    real, calls = losses.depth_loss, [0]

    def depth_loss(*args, **kwargs):
        calls[0] += 1
        if calls[0] == n:
            marker.touch()
            deadline = time.monotonic() + 120
            while marker.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        return real(*args, **kwargs)

    losses.depth_loss = depth_loss


def waiting_child(at_step: str, marker: str, *argv: str) -> None:
    """Entry point of a training child (``depthpe train ARGV``) that waits for the test's signal
    during step ``at_step``."""
    _wait_at_loss_call(int(at_step), Path(marker))
    raise SystemExit(main(list(argv)))


ROOT = Path(__file__).resolve().parents[2]
WAITING_CHILD = [sys.executable, "-c", "import sys; from tests.run.test_fault_tolerance import waiting_child; "
                                       "waiting_child(*sys.argv[1:])"]


def _signal_group_at_step(tmp_path: Path, prefix: list[str], argv: list[str], signum: int,
                          step: int) -> tuple[int, str]:
    """Run ``prefix + WAITING_CHILD`` (``depthpe train ARGV`` in a child process) in a new session, so
    it, its loader workers and anything between form one process group; during ``step`` send
    ``signum`` to that whole group with ``os.killpg``, as Slurm, systemd and Kubernetes do. Returns
    the exit status and what the child printed."""
    marker, log = tmp_path / "at_step", tmp_path / "child.log"
    with open(log, "w") as out:
        child = subprocess.Popen([*prefix, *WAITING_CHILD, str(step), str(marker), *argv], cwd=ROOT,
                                 start_new_session=True, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), f"the child did not reach step {step}: {log.read_text()[-3000:]}"
        os.killpg(child.pid, signum)
        marker.unlink()
        child.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    return child.returncode, log.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("signum,status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_stop_signal_to_the_process_group_checkpoints_that_step_and_resumes_exactly(
        synth_root, reference, tmp_path, signum, status):
    """Pre-emption as schedulers do it: the signal reaches the training process and its 2 loader
    workers at once, during step 3 (between the periodic checkpoints of steps 2 and 4). The workers
    leave it to the main process, which finishes the step, writes step_3, prints one line and exits
    with 143 (SIGTERM) or 130 (SIGINT); --resume latest then ends with the uninterrupted weights."""
    out, config = tmp_path / "run", tmp_path / "config.yaml"
    config.write_text(dump_run_config(_config(synth_root, out, num_workers=2)))
    returncode, printed = _signal_group_at_step(tmp_path, [], ["--config", str(config)], signum, 3)
    assert returncode == status, printed[-3000:]
    assert "Traceback" not in printed and "killed by signal" not in printed, printed[-3000:]
    name = signal.Signals(signum).name
    assert f"{name} received: stopping after this step with a checkpoint" in printed  # said at once
    assert sum(f"{name} received: checkpoint written at step 3; continue with --resume latest" in line
               for line in printed.splitlines()) == 1, printed[-3000:]
    assert find_checkpoint(out, "latest").name == "step_0000003"
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_0000002", "step_0000003"]
    assert not (out / "final").exists()
    assert main(["--config", str(config), "--resume", "latest"]) == 0
    _assert_equal(_weights(out / "final"), reference)


NEW_PID_NAMESPACE = ["unshare", "--pid", "--fork", "--mount-proc"]  # the trainer is PID 1, as in a container


def _pid_namespaces_work() -> bool:
    try:
        return subprocess.run([*NEW_PID_NAMESPACE, "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.slow
def test_a_run_killed_in_a_container_resumes_with_the_same_command(synth_root, reference, tmp_path):
    """A container restart: the run is PID 1 of a fresh PID namespace on the same host, is SIGKILLed
    during step 3, and the same command (``--resume auto``) in a new namespace, where it is PID 1
    again, takes the lock over instead of taking "pid 1 is alive" for the old run, and resumes."""
    if not _pid_namespaces_work():
        print("skipped: `unshare --pid --fork --mount-proc` does not work here (needs root or user namespaces)")
        pytest.skip("`unshare --pid --fork --mount-proc` does not work here (needs root or user namespaces)")
    import socket

    out, config = tmp_path / "run", tmp_path / "config.yaml"
    config.write_text(dump_run_config(_config(synth_root, out)))
    argv = ["--config", str(config), "--resume", "auto"]
    returncode, printed = _signal_group_at_step(tmp_path, NEW_PID_NAMESPACE, argv, signal.SIGKILL, 3)
    assert returncode == -signal.SIGKILL, printed[-3000:]
    assert find_checkpoint(out, "latest").name == "step_0000002"
    again = subprocess.run([*NEW_PID_NAMESPACE, sys.executable, "-m", "depthpe.train", *argv], cwd=ROOT,
                           capture_output=True, text=True, timeout=240)
    printed = again.stdout + again.stderr
    assert again.returncode == 0, printed[-3000:]
    assert f"took over the lock of a run that is gone (pid 1 on {socket.gethostname()}, since " in printed
    assert "resumed from" in printed and "step_0000002 at step 2" in printed
    _assert_equal(_weights(out / "final"), reference)


# ------------------------------------------------------------------------------------------- bad data
BAD = ("corrupt", "truncated", "nan_depth", "inf_depth", "nan_camera", "inf_camera", "missing")


def _break(split_dir: Path, good: Path, kind: str) -> Path:
    """Write scene file ``<kind>.h5`` next to the good scene ``good`` with the named defect."""
    path = split_dir / f"{kind}.h5"
    if kind == "corrupt":
        path.write_bytes(np.random.default_rng(0).integers(0, 256, 4000, dtype=np.uint8).tobytes())
    elif kind == "truncated":
        data = good.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif kind != "missing":
        shutil.copyfile(good, path)
        with h5py.File(path, "r+") as f:
            if kind == "nan_depth":
                f["depth"][:, 3, 5] = np.nan  # one pixel of every frame: any draw reads one
            elif kind == "inf_depth":
                f["depth"][:, 7, 2] = np.inf
            elif kind == "nan_camera":
                f["K"][1, 0, 0] = np.nan  # one frame: the whole file is checked when it is opened
            elif kind == "inf_camera":
                f["w2c"][2, 1, 3] = np.inf
            elif kind == "zero_focal":
                f["K"][1, 0, 0] = 0.0
            elif kind == "bad_rotation":
                f["w2c"][2, :, :3] = f["w2c"][2, :, :3] * 1.3  # scaled: not orthonormal
            elif kind == "far_principal_point":
                f["K"][3, 0, 2] = 10.0 * f["depth"].shape[2]  # 10 image widths to the right
    return path


def _add_broken(split_dir: Path, kinds, split: str) -> None:
    """Write one broken copy of the split's first scene per kind and list them all in its index."""
    from depthpe.scenes.format.scene_file import read_index, write_index

    entries = read_index(split_dir)
    good = split_dir / entries[0]["path"]
    for kind in kinds:
        _break(split_dir, good, kind)
        entries.append({**entries[0], "path": f"{kind}.h5", "scene_id": kind})
    write_index(split_dir, entries, dataset="synth", split=split)


@pytest.fixture(scope="module")
def bad_root(tmp_path_factory):
    """synth/train with 3 good scenes and one scene of each kind in BAD, all listed in index.json."""
    from depthpe.scenes.synth import write_synth_dataset

    root = tmp_path_factory.mktemp("bad")
    write_synth_dataset(root, train_scenes=3, val_scenes=1, views=4, height=56, width=56, seed=0, progress=False)
    _add_broken(root / "synth" / "train", BAD, "train")
    return root


def _replay_skips(cfg, bad=BAD) -> tuple[int, set[str]]:
    """Skipped draws and distinct bad files of a 1-process run, replayed from the deterministic
    sampler and redraw rule: each draw of a sample that lands on a bad scene is skipped."""
    from depthpe.loader.datasets import MultiViewDataset
    from depthpe.loader.sampling import DynamicBatchSampler

    ds = MultiViewDataset(cfg.data)
    sampler = DynamicBatchSampler(cfg.data, ds.scene_counts, seed=cfg.seed, num_steps=cfg.train.steps)
    skipped, hit = 0, set()
    for keys in sampler:
        for key in keys:
            for attempt in range(cfg.data.max_attempts):
                source, scene = ds.scene_of_attempt(key, attempt)
                scene_id = ds.entries[source][scene].scene_id
                if scene_id not in bad:
                    break
                skipped += 1
                hit.add(scene_id)
    return skipped, hit


def test_bad_files_and_nonfinite_data_are_skipped_counted_and_logged(bad_root, tmp_path, capsys):
    cfg = run_config(bad_root, tmp_path / "run", seed=7,
                     train={"steps": 3, "checkpoint_every": 0, "torch_threads": 1})
    expected_skips, expected_files = _replay_skips(cfg)
    assert expected_files == set(BAD)  # seed 7's draws hit every kind of defect at least once
    with pytest.warns(UserWarning, match="skipping unusable scene file"):
        final = train(cfg)
    state = json.loads((final / "trainer_state.json").read_text())
    counters = state["counters"]
    assert counters["skipped_files"] == expected_skips
    assert counters["bad_files"] == len(BAD) and {Path(p).stem for p in state["bad_files"]} == set(BAD)
    assert counters["nonfinite_steps"] == 0 and counters["redraws"] == 0
    assert all(torch.isfinite(w).all() for w in _weights(final).values())
    log = capsys.readouterr()
    printed = log.out + log.err
    for kind in BAD:  # each bad file is named once in the run log, with its problem
        assert sum(f"{kind}.h5" in line and "skipping unusable scene file (" in line
                   for line in printed.splitlines()) == 1, kind
    reasons = state["bad_files"]
    assert "NaN/inf depth" in reasons[str(bad_root / "synth" / "train" / "nan_depth.h5")]
    assert "non-finite camera" in reasons[str(bad_root / "synth" / "train" / "inf_camera.h5")]
    assert "file not found" in reasons[str(bad_root / "synth" / "train" / "missing.h5")]
    assert f"{expected_skips} draws skipped from {len(BAD)} unusable scene file(s)" in printed


CAMERA_BAD = ("zero_focal", "bad_rotation", "far_principal_point")


@pytest.fixture(scope="module")
def camera_root(tmp_path_factory):
    """synth/train (3 good scenes) and synth/val (1 good scene), each with one scene per invalid
    camera kind in CAMERA_BAD (finite values the model's input check or the geometry would choke on)."""
    from depthpe.scenes.synth import write_synth_dataset

    root = tmp_path_factory.mktemp("cameras")
    write_synth_dataset(root, train_scenes=3, val_scenes=1, views=4, height=56, width=56, seed=0, progress=False)
    for split in ("train", "val"):
        _add_broken(root / "synth" / split, CAMERA_BAD, split)
    return root


def test_invalid_cameras_make_a_file_unusable_in_training_and_evaluation(camera_root, tmp_path, capsys):
    from depthpe.evaluation.heldout import HeldOutProtocol, ViewDraw, InputSize, resolve_held_out
    from depthpe.evaluation.loop import evaluate
    from depthpe.evaluation.protocol import discover_sources
    from depthpe.model import DepthModel

    cfg = run_config(camera_root, tmp_path / "run", seed=CAMERA_SEED,
                     train={"steps": 3, "checkpoint_every": 0, "torch_threads": 1})
    expected_skips, expected_files = _replay_skips(cfg, CAMERA_BAD)
    assert expected_files == set(CAMERA_BAD)  # the seed's draws hit every kind at least once
    with pytest.warns(UserWarning, match="skipping unusable scene file"):
        final = train(cfg)
    state = json.loads((final / "trainer_state.json").read_text())
    counters = state["counters"]
    assert counters["skipped_files"] == expected_skips and counters["bad_files"] == len(CAMERA_BAD)
    assert {Path(p).stem for p in state["bad_files"]} == set(CAMERA_BAD)
    assert counters["nonfinite_steps"] == 0 and counters["redraws"] == 0
    assert all(torch.isfinite(w).all() for w in _weights(final).values())
    printed = "".join(capsys.readouterr())
    for kind in CAMERA_BAD:
        assert sum(f"{kind}.h5" in line and "skipping unusable scene file (" in line
                   for line in printed.splitlines()) == 1, kind
    reasons = {Path(p).stem: r for p, r in state["bad_files"].items()}
    assert "non-positive focal length in 1 frame(s), first frame 1 (fx=0," in reasons["zero_focal"]
    assert "non-orthonormal rotation in 1 frame(s), first frame 2" in reasons["bad_rotation"]
    assert "principal point far outside the image in 1 frame(s), first frame 3" in reasons["far_principal_point"]

    with pytest.warns(UserWarning, match="skipping unusable scene file"):
        held_out = resolve_held_out(discover_sources(camera_root, "val"), HeldOutProtocol(ViewDraw(3)), InputSize(42))
        result = evaluate(DepthModel.from_pretrained(final), held_out)
    failures = {f["scene"]: f["error"] for f in result.failures}
    assert sorted(failures) == sorted(f"synth/{kind}" for kind in CAMERA_BAD)
    assert all(e.startswith("unusable scene file: ") for e in failures.values())
    assert result.summary["synth"]["native"]["n_scenes"] == 1


def test_nonfinite_gradients_skip_the_step(synth_root, tmp_path, monkeypatch):
    """A finite loss whose gradient is NaN (0 * d sqrt(x)/dx at x = 0) skips exactly that step (had
    the optimizer stepped with those gradients, every trained weight would be NaN)."""
    import depthpe.run.losses as losses

    real, calls = losses.depth_loss, {"n": 0}

    def nan_gradient_on_call_2(pred, *args, **kwargs):
        terms = real(pred, *args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 2:
            zero = pred.min() - pred.min()
            terms["total"] = terms["total"] + 0.0 * torch.sqrt(zero)
            assert torch.isfinite(terms["total"])
        return terms

    monkeypatch.setattr(losses, "depth_loss", nan_gradient_on_call_2)
    out = tmp_path / "run"
    final = train(_config(synth_root, out, steps=3, checkpoint_every=0))
    state = json.loads((final / "trainer_state.json").read_text())
    assert state["counters"]["nonfinite_steps"] == 1 and state["step"] == 3
    assert all(torch.isfinite(w).all() for w in _weights(final).values())
