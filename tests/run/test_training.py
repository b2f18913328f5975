import json
import math

import pytest
import torch
from safetensors.torch import load_file

from depthpe.run import OptimConfig, RunConfig
from depthpe.run.checkpoints import find_checkpoint
from depthpe.run.step import lr_at
from depthpe.run.trainer import train
from tests.helpers.training import MICRO_MODEL, run_config
from tests.helpers.locks import HOLD_LOCK







def test_micro_model_preset_is_valid():
    cfg = RunConfig.from_dict({"model": dict(MICRO_MODEL)}).model_config()
    assert cfg.embed_dim == 32 and cfg.head_layers == [0, 1, 2, 3]


def test_lr_schedule():
    cfg = OptimConfig(lr=1e-3, min_lr=1e-5, warmup_steps=10, schedule="constant")
    assert lr_at(0, cfg, 100) == pytest.approx(1e-5 + (1e-3 - 1e-5) / 10)
    assert lr_at(9, cfg, 100) == pytest.approx(1e-3)
    assert lr_at(50, cfg, 100) == 1e-3
    cos = OptimConfig(lr=1e-3, min_lr=1e-5, warmup_steps=10, schedule="cosine")
    assert lr_at(10, cos, 110) == pytest.approx(1e-3)
    assert lr_at(60, cos, 110) == pytest.approx(1e-5 + 0.5 * (1e-3 - 1e-5))
    assert lr_at(110, cos, 110) == pytest.approx(1e-5)
    with pytest.raises(ValueError, match="schedule"):
        OptimConfig(schedule="linear")
    assert lr_at(3, OptimConfig(lr=1e-3, min_lr=1e-5, warmup_steps=0, schedule="constant"), 100) == 1e-3


def test_few_steps_reduce_loss_on_fixed_batch(synth_root):
    from depthpe.loader.loaders import build_train_loader
    from depthpe.run.losses import depth_loss
    from depthpe.model import DepthModel

    torch.manual_seed(0)
    cfg = run_config(synth_root, "unused")
    batch = next(iter(build_train_loader(cfg.data, seed=0, num_workers=0)))
    model = DepthModel(cfg.model_config())
    opt = torch.optim.AdamW(model.param_groups(0.0), lr=2e-3)
    losses = []
    for _ in range(12):
        out = model(batch["images"], batch["K"], batch["w2c"])
        loss = depth_loss(out["depth"], batch["depth"], batch["valid"])["total"]
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.85 * losses[0], losses


def test_train_writes_run_and_resume_is_bit_exact(synth_root, tmp_path):
    out = tmp_path / "run"
    cfg = run_config(synth_root, out)
    final = train(cfg)
    assert (out / "config.yaml").is_file() and list((out / "logs").rglob("events.out.tfevents*"))
    assert (final / "config.json").is_file() and (final / "model.safetensors").is_file()
    ckpt = find_checkpoint(out, "latest")
    assert ckpt.name == "step_0000002" and (ckpt / "model" / "model.safetensors").is_file()
    uninterrupted = load_file(final / "model.safetensors")

    resumed_final = train(run_config(synth_root, out), resume=str(ckpt))
    resumed = load_file(resumed_final / "model.safetensors")
    assert uninterrupted.keys() == resumed.keys()
    for k in uninterrupted:
        assert torch.equal(uninterrupted[k], resumed[k]), k
    state = json.loads((resumed_final / "trainer_state.json").read_text())
    assert state["step"] == 4
    # the checkpoint of step 2 differs from the final weights (training really continued)
    at2 = load_file(ckpt / "model" / "model.safetensors")
    assert any(not torch.equal(at2[k], uninterrupted[k]) for k in at2)


def test_checkpoint_rotation_and_latest_skips_incomplete(synth_root, tmp_path):
    out = tmp_path / "run"
    train(run_config(synth_root, out, train={"steps": 7, "checkpoint_every": 2, "keep_checkpoints": 2}))
    names = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert names == ["step_0000004", "step_0000006"]
    (out / "checkpoints" / "step_0000009").mkdir()  # incomplete: no trainer_state.json
    assert find_checkpoint(out, "latest").name == "step_0000006"
    with pytest.raises(FileNotFoundError, match="not a complete depthpe checkpoint"):
        find_checkpoint(out, str(out / "checkpoints" / "step_0000009"))


def test_nonfinite_loss_is_skipped_and_counted(synth_root, tmp_path, monkeypatch):
    import depthpe.run.losses as losses

    real = losses.depth_loss
    calls = {"n": 0}

    def flaky(*args, **kwargs):
        terms = real(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 2:
            terms["total"] = terms["total"] * math.nan
        return terms

    monkeypatch.setattr(losses, "depth_loss", flaky)
    final = train(run_config(synth_root, tmp_path / "run", train={"steps": 3, "checkpoint_every": 0}))
    state = json.loads((final / "trainer_state.json").read_text())
    assert state["counters"]["nonfinite_steps"] == 1
    weights = load_file(final / "model.safetensors")
    assert all(torch.isfinite(w).all() for w in weights.values())

    monkeypatch.setattr(losses, "depth_loss", lambda *a, **k: {**real(*a, **k), "total": torch.tensor(math.nan, requires_grad=True)})
    with pytest.raises(RuntimeError, match="in a row had a non-finite loss"):
        train(run_config(synth_root, tmp_path / "run2",
                         train={"steps": 5, "checkpoint_every": 0, "max_nonfinite_in_row": 3}))


def test_sigterm_writes_a_checkpoint_and_resume_matches(synth_root, tmp_path, monkeypatch):
    """Pre-emption: SIGTERM during step 2 -> checkpoint of step 2, exit 143; --resume latest then
    ends with the same weights as an uninterrupted run."""
    import signal

    import depthpe.run.losses as losses

    reference = load_file(train(run_config(synth_root, tmp_path / "ref", train={"checkpoint_every": 0}))
                          / "model.safetensors")
    real = losses.depth_loss
    calls = {"n": 0}

    def preempt_on_second_step(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            signal.raise_signal(signal.SIGTERM)  # its handler has run when this returns (os.kill: maybe later)
        return real(*args, **kwargs)

    monkeypatch.setattr(losses, "depth_loss", preempt_on_second_step)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        train(run_config(synth_root, out, train={"checkpoint_every": 0}))
    assert exit_info.value.code == 143
    assert find_checkpoint(out, "latest").name == "step_0000002"
    assert not (out / "final").exists()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handler restored
    monkeypatch.setattr(losses, "depth_loss", real)
    resumed = load_file(train(run_config(synth_root, out, train={"checkpoint_every": 0}), resume="latest")
                        / "model.safetensors")
    for k in reference:
        assert torch.equal(reference[k], resumed[k]), k


def test_ctrl_c_once_asks_for_a_checkpoint_twice_stops_at_once_with_one_line(monkeypatch, capfd):
    """SIGINT is recorded like SIGTERM (exit status 130 rather than 143; SIGTERM wins when both came);
    a second SIGINT raises KeyboardInterrupt, which `depthpe train` reports in one line with status 130.
    Afterwards the handlers that were there before are back, whatever they were (Python's
    default_int_handler, or SIG_IGN in a process started in the background: see the next test)."""
    import signal
    from types import SimpleNamespace

    import depthpe.run.trainer as trainer_mod
    from depthpe.run.preemption import StopRequest
    from depthpe.train import main

    one_process = SimpleNamespace(device=torch.device("cpu"), reduce=lambda t, reduction: t)
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    stop = StopRequest()
    try:
        assert stop.requested(one_process) == 0
        # raise_signal returns after the handler ran; os.kill may deliver the signal to another of the
        # process's threads (torch's) and the handler then runs later, on a busy machine after the next line
        signal.raise_signal(signal.SIGINT)
        assert stop.requested(one_process) == 130
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGTERM)
        assert stop.requested(one_process) == 143
    finally:
        stop.restore()
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert "SIGINT received: stopping after this step with a checkpoint (Ctrl-C again" in capfd.readouterr().err

    def interrupted(cfg, **options):
        raise KeyboardInterrupt

    monkeypatch.setattr(trainer_mod, "train", interrupted)
    assert main(["--config", "quickstart"]) == 130
    err = capfd.readouterr().err
    assert err.strip() == ("error: interrupted (Ctrl-C) without a new checkpoint; `--resume latest` continues from "
                           "the last complete one") and "Traceback" not in err


def test_ctrl_c_handling_in_a_process_started_with_sigint_ignored():
    """A process started in the background (``nohup ... &``, as on a shared server) inherits SIGINT
    ignored: the test above passes there too, and the stop request leaves SIGINT ignored after it."""
    import signal
    import subprocess
    import sys
    from pathlib import Path

    node = "tests/run/test_training.py::test_ctrl_c_once_asks_for_a_checkpoint_twice_stops_at_once_with_one_line"
    child = ("import signal, sys, pytest\n"
             "assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN, 'the child did not start with SIGINT ignored'\n"
             f"status = pytest.main(['-p', 'no:cacheprovider', '-q', {node!r}])\n"
             "assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN, 'SIGINT is no longer ignored'\n"
             "sys.exit(status)\n")
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited through exec, as from nohup ... &
    try:
        run = subprocess.Popen([sys.executable, "-c", child], cwd=Path(__file__).parents[2], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        out, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:  # timed out: leave no child behind
            run.kill()
            run.wait()
    assert run.returncode == 0, out[-3000:]
    assert "1 passed" in out


def _record_optimizer_steps(monkeypatch):
    """Patch AdamW.step to record, at every real optimizer step, each param group's lr and weight
    decay and the global norm of the gradients it is about to apply (after clipping)."""
    records = []
    real_step = torch.optim.AdamW.step

    def recording_step(self, *args, **kwargs):
        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])).item()
        records.append({"lr": [g["lr"] for g in self.param_groups], "betas": [g["betas"] for g in self.param_groups],
                        "weight_decay": [g["weight_decay"] for g in self.param_groups], "grad_norm": norm})
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", recording_step)
    return records


def test_optimizer_gets_the_scheduled_lr_decay_groups_and_clipped_gradients(synth_root, tmp_path, monkeypatch):
    records = _record_optimizer_steps(monkeypatch)
    cfg = run_config(synth_root, tmp_path / "run", optim={"lr": 1e-3, "min_lr": 1e-5, "warmup_steps": 2,
                                                         "schedule": "cosine", "weight_decay": 0.3, "grad_clip": 1e-3},
                     train={"steps": 5, "checkpoint_every": 0})
    train(cfg)
    assert len(records) == 5
    for step, rec in enumerate(records):
        assert rec["lr"] == [pytest.approx(lr_at(step, cfg.optim, 5))] * 2, step
        assert rec["weight_decay"] == [0.3, 0.0]  # decayed group, then norms/biases/tokens without decay
        assert rec["grad_norm"] <= 1e-3 * (1 + 1e-4)  # clipped to optim.grad_clip
    assert len({r["lr"][0] for r in records}) == 4  # warm-up (2 steps), then cosine from lr down (the first two equal lr)
    logged = _tensorboard_scalars(tmp_path / "run", "grad_norm")
    assert min(logged) > 1e-3  # the unclipped norms were larger: clipping was active


def test_gradients_are_clipped_over_the_whole_model_parameter_list(synth_root, tmp_path, monkeypatch):
    """Accelerate's FSDP branch of ``clip_grad_norm_`` unscales fp16 gradients once only when it is
    given the prepared model's own parameter list (a trainable subset gets unscaled twice, and the
    gradient scaler raises): the step passes exactly that list, frozen parameters included."""
    from accelerate import Accelerator

    seen = []
    original = Accelerator.clip_grad_norm_

    def recording(self, parameters, *args, **kwargs):
        parameters = list(parameters)
        seen.append((parameters, [list(m.parameters()) for m in self._models]))
        return original(self, parameters, *args, **kwargs)

    monkeypatch.setattr(Accelerator, "clip_grad_norm_", recording)
    train(run_config(synth_root, tmp_path / "run", train={"steps": 2, "checkpoint_every": 0}))
    assert len(seen) == 2
    for parameters, model_lists in seen:
        assert any(len(parameters) == len(m) and all(a is b for a, b in zip(parameters, m)) for m in model_lists)
        assert any(not p.requires_grad for p in parameters)  # the frozen backbone is in the list


def _tensorboard_scalars(run_dir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    values = []
    for events in (run_dir / "logs").rglob("events.out.tfevents*"):
        acc = EventAccumulator(str(events))
        acc.Reload()
        if tag in acc.Tags().get("scalars", []):
            values += [e.value for e in acc.Scalars(tag)]
    return values


def test_train_log_training_inputs_and_val_panels_in_every_tracker(synth_root, tmp_path, monkeypatch):
    from depthpe.model.training_inputs import read_training_inputs

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    final = train(run_config(synth_root, out, train={"steps": 2, "checkpoint_every": 0,
                                                      "report_to": ["tensorboard", "wandb"]},
                             val={"sources": [{"name": "synth", "root": str(synth_root), "split": "val"}],
                                  "every": 0, "views": 3, "max_scenes": 1, "panels": 1}))
    log_text = (out / "train.log").read_text()
    assert "world size 1" in log_text and "validation at step 2" in log_text and "training done: 2 steps" in log_text
    assert "[RANK" not in log_text  # a single process's messages carry no rank prefix
    inputs = read_training_inputs(final)
    assert inputs.image_width == 42 and inputs.aspect == (0.5, 1.0) and inputs.views == (2, 3)
    assert json.loads((out / "val_summary.json").read_text())["step"] == 2
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    image_tags, scalar_tags = [], []
    for events in (out / "logs").rglob("events.out.tfevents*"):
        acc = EventAccumulator(str(events))
        acc.Reload()
        image_tags += acc.Tags().get("images", [])
        scalar_tags += acc.Tags().get("scalars", [])
    assert any(t.startswith("val_panels/") for t in image_tags), image_tags
    # the step scalars (the TrackerLogging callback) and validation's table
    assert {"loss/total", "smooth/loss/total", "lr", "counters/images", "val/synth/loss/total"} <= set(scalar_tags), scalar_tags
    assert list((out / "wandb").rglob("media/images/val_panels/*.png"))  # W&B (offline) got the panel too


def test_resume_refuses_another_model_and_reports_changed_settings(synth_root, tmp_path, capsys):
    from depthpe.config import ConfigError

    out = tmp_path / "run"
    train(run_config(synth_root, out))
    with pytest.raises(ConfigError, match=r"model.global_pe \(checkpoint 'rope', config 'prope'\)"):
        train(run_config(synth_root, out, model={**MICRO_MODEL, "global_pe": "prope"}), resume="latest")
    capsys.readouterr()
    train(run_config(synth_root, out, train={"steps": 6}), resume="latest")
    printed = capsys.readouterr().out
    assert "resumed from" in printed and "train.steps: 4 -> 6" in printed
    assert json.loads((out / "final" / "trainer_state.json").read_text())["step"] == 6


def test_resume_auto_starts_fresh_and_latest_without_checkpoint_is_an_error(synth_root, tmp_path):
    from depthpe.config import ConfigError

    with pytest.raises(ConfigError, match="no complete checkpoint"):
        train(run_config(synth_root, tmp_path / "a"), resume="latest")
    assert not (tmp_path / "a").exists()
    final = train(run_config(synth_root, tmp_path / "b", train={"steps": 2}), resume="auto")
    assert json.loads((final / "trainer_state.json").read_text())["step"] == 2


def test_final_model_survives_a_failing_final_validation(synth_root, tmp_path, monkeypatch, capsys):
    import depthpe.evaluation.loop as evaluation

    def broken(*args, **kwargs):
        raise OSError("disk went away")

    monkeypatch.setattr(evaluation, "evaluate", broken)
    final = train(run_config(synth_root, tmp_path / "run", train={"steps": 2, "checkpoint_every": 0},
                             val={"sources": [{"name": "synth", "root": str(synth_root), "split": "val"}]}))
    assert (final / "model.safetensors").is_file()
    assert "final validation failed: OSError: disk went away" in capsys.readouterr().out


@pytest.mark.parametrize("broken", ["model/model.safetensors", "state/optimizer.bin", "trainer_state.json"])
def test_resume_latest_falls_back_past_a_broken_checkpoint(synth_root, tmp_path, capsys, broken):
    from depthpe.config import ConfigError

    out = tmp_path / "run"
    train(run_config(synth_root, out, train={"steps": 5, "checkpoint_every": 2, "keep_checkpoints": 0}))
    reference = load_file(out / "final" / "model.safetensors")
    path = out / "checkpoints" / "step_0000004" / broken
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])  # truncated
    with pytest.raises(ConfigError, match=f"step_0000004 is broken: {broken}"):
        train(run_config(synth_root, out, train={"steps": 5}), resume=str(path.parents[len(broken.split("/")) - 1]))
    capsys.readouterr()
    resumed = load_file(train(run_config(synth_root, out, train={"steps": 5}), resume="latest") / "model.safetensors")
    printed = capsys.readouterr().out
    assert f"skipping checkpoint {out / 'checkpoints' / 'step_0000004'}: {broken}" in printed
    assert "resumed from" in printed and "step_0000002 at step 2" in printed
    assert all(torch.equal(reference[k], resumed[k]) for k in reference)  # still bit-exact from step 2




def test_a_live_run_holds_its_output_dir_and_a_dead_ones_lock_is_taken_over(synth_root, tmp_path, capsys):
    """The lock is the kernel's: a .lock file left by a run on another host (or by an older depthpe)
    does not block, a live holder (a child process) is refused with one line, and the lock of a
    holder killed with SIGKILL (nothing released it by hand) is taken over with a note."""
    import re
    import socket
    import subprocess
    import sys

    from depthpe.config import ConfigError

    out, host = tmp_path / "run", socket.gethostname()
    out.mkdir()
    (out / ".lock").write_text(json.dumps({"host": "elsewhere", "pid": 1, "since": "earlier"}))
    train(run_config(synth_root, out, train={"steps": 1, "checkpoint_every": 0}))
    assert not (out / ".lock.owner").exists()  # the holder's record is removed at the end; .lock stays

    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(out)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=rf"^output_dir {re.escape(str(out))} is in use by another training run "
                                              rf"\(pid {holder.pid} on {re.escape(host)}, since [^)]+\) \(wait for "
                                              rf"it to finish, or use another output_dir\)$"):
            train(run_config(synth_root, out, train={"steps": 1}))
    finally:
        holder.kill()
        holder.wait()
    assert holder.returncode == -9
    capsys.readouterr()
    train(run_config(synth_root, out, train={"steps": 1, "checkpoint_every": 0}), overwrite=True)  # holds a run
    assert f"took over the lock of a run that is gone (pid {holder.pid} on {host}, since " in capsys.readouterr().out
    assert not (out / ".lock.owner").exists()


def test_a_filesystem_without_locks_trains_with_a_warning(synth_root, tmp_path, monkeypatch, capsys):
    """Where flock is refused (ENOLCK, e.g. NFS without a lock manager) the run goes on and says
    that nothing stops a second run."""
    import errno

    import filelock

    class NoLocks(filelock.FileLock):
        def acquire(self, *args, **kwargs):
            raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(filelock, "FileLock", NoLocks)  # depthpe.files.lock_folder takes it from filelock
    out = tmp_path / "run"
    train(run_config(synth_root, out, train={"steps": 1, "checkpoint_every": 0}))
    printed = "".join(capsys.readouterr())
    assert f"could not lock {out / '.lock'} ([Errno {errno.ENOLCK}] No locks available): file locks do not work" in printed
    assert (out / "final" / "model.safetensors").is_file() and not (out / ".lock.owner").exists()


def test_resumed_optimizer_groups_carry_changed_weight_decay_and_betas(synth_root, tmp_path, monkeypatch):
    out = tmp_path / "run"
    train(run_config(synth_root, out, optim={"weight_decay": 0.05}, train={"steps": 2, "checkpoint_every": 1}))
    records = _record_optimizer_steps(monkeypatch)
    train(run_config(synth_root, out, optim={"weight_decay": 0.2, "betas": [0.8, 0.95]}, train={"steps": 3}),
          resume=str(out / "checkpoints" / "step_0000001"))
    assert [r["weight_decay"] for r in records] == [[0.2, 0.0], [0.2, 0.0]]
    assert all(r["betas"] == [(0.8, 0.95)] * 2 for r in records)


def test_validation_manifest_history_and_loss_terms(synth_root, tmp_path):
    from depthpe.run.validation import read_val_history

    val = {"sources": [{"name": "synth", "root": str(synth_root), "split": "val"}], "every": 2, "views": 3,
           "max_scenes": 1, "selection": "random", "seed": 5, "panels": 0}
    out = tmp_path / "run"
    train(run_config(synth_root, out, train={"steps": 4, "checkpoint_every": 2}, val=val))
    manifest = json.loads((out / "val_manifest.json").read_text())
    assert manifest["seed"] == 5 and len(manifest["scenes"]) == 1 and len(next(iter(manifest["scenes"].values()))) == 3
    history = read_val_history(out)
    assert [(h["step"], h["dataset"]) for h in history] == [(2, "synth"), (4, "synth")]
    for h in history:
        assert set(h["loss"]) >= {"l1", "grad", "total"} and h["loss"]["total"] > 0
        assert h["metrics"]["native"]["n_scenes"] == 1 and "abs_rel" in h["metrics"]["native"]
    # another run (other encoding) validates on exactly this run's views
    other = tmp_path / "other"
    train(run_config(synth_root, other, model={**MICRO_MODEL, "global_pe": "prope"}, train={"steps": 2},
                     val={**val, "selection": "first", "manifest": str(out / "val_manifest.json")}))
    assert json.loads((other / "val_summary.json").read_text())["summary"]["synth"]["native"]["n_scenes"] == 1
    assert not (other / "val_manifest.json").exists()  # it used the given one
    # resuming from step 2 drops the step-4 line and redoes it
    train(run_config(synth_root, out, train={"steps": 4, "checkpoint_every": 2}, val=val),
          resume=str(out / "checkpoints" / "step_0000002"))
    again = read_val_history(out)
    assert [h["step"] for h in again] == [2, 4] and again[1]["loss"] == history[1]["loss"]


def test_random_scene_selection_is_seeded_per_source(synth_root):
    from depthpe.loader.datasets import SceneEvalDataset
    from depthpe.evaluation.protocol import scene_indices

    ds = SceneEvalDataset([{"name": "synth", "root": str(synth_root), "split": "train"}], views=2, seed=0, image_width=42)
    assert scene_indices(ds, 2) == [0, 1]
    draws = {tuple(scene_indices(ds, 2, "random", seed)) for seed in range(12)}
    assert len(draws) > 1 and all(len(d) == 2 for d in draws)  # the seed changes the draw
    assert scene_indices(ds, 2, "random", 3) == scene_indices(ds, 2, "random", 3)
    assert scene_indices(ds, None, "random", 3) == [0, 1, 2]
    assert scene_indices(ds, 5, "first", scenes={"synth/train_000002"}) == [2]


def test_scale_reference_is_recorded_and_used_by_evaluation(synth_root, tmp_path):
    from depthpe.eval import main as eval_main
    from depthpe.evaluation.heldout import HeldOutProtocol, ViewDraw, InputSize, resolve_held_out
    from depthpe.evaluation.loop import evaluate
    from depthpe.evaluation.protocol import discover_sources
    from depthpe.model import DepthModel
    from depthpe.model.training_inputs import read_training_inputs

    final = train(run_config(synth_root, tmp_path / "run", data={"scale_reference": "all"},
                             train={"steps": 1, "checkpoint_every": 0}))
    assert read_training_inputs(final).scale_reference == "all"
    assert eval_main(["--model", str(final), "--data", str(synth_root), "--views", "3", "--out", str(tmp_path / "e"),
                      "--num-workers", "0", "--panels", "0", "--cpu"]) == 0
    doc = json.loads((tmp_path / "e" / "summary.json").read_text())
    assert doc["meta"]["scale_reference"] == "all"
    model, sources = DepthModel.from_pretrained(final), discover_sources(synth_root, "val")
    ours = evaluate(model, resolve_held_out(sources, HeldOutProtocol(ViewDraw(3)), InputSize(42, 0.5, "all")))
    others = evaluate(model, resolve_held_out(sources, HeldOutProtocol(ViewDraw(3)), InputSize(42, 0.5)))
    value = lambda r: r.summary["synth"]["global_constant"]["value"]  # noqa: E731
    assert value(ours) == pytest.approx(value(others) * 3 / 2, rel=1e-3)  # S / (S - 1) with S = 3 views
