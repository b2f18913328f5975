"""The real entry point train/train.py with 2 CPU processes (gloo): world size, synchronised replicas,
the same result as one process with the same global batch, files written once, RNG state per rank.

One 2-process run (module fixture) serves all tests. It is launched the way that really starts a
distributed CPU run (docs/distributed.md): ``ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu
--num_processes 2``. A small test-only wrapper around train/train.py saves each rank's replica of the
weights when training ends and makes rank 1's loss NaN at its second step, so the run also exercises the
DDP-safe skip of a step that is non-finite on one process only.
"""

import json
import math
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from depthpe.run import dump_run_config
from depthpe.run.trainer import train
from tests.helpers.training import run_config

TRAIN_PY = Path(__file__).resolve().parents[2] / "train" / "train.py"
pytestmark = pytest.mark.slow  # every test uses the 2-process accelerate launch run

STEPS = 3
NAN_STEP = 2  # 1-based optimizer step whose loss is NaN on rank 1 only

WRAPPER = '''
import os, runpy, sys
import accelerate, torch
import depthpe.run.losses as losses

out = os.environ["DEPTHPE_TEST_REPLICAS"]
end_training = accelerate.Accelerator.end_training

def save_replica(self):
    model = self.unwrap_model(self._models[0])
    torch.save({k: v.detach().clone() for k, v in model.state_dict().items()},
               os.path.join(out, f"replica_{self.process_index}.pt"))
    return end_training(self)

accelerate.Accelerator.end_training = save_replica
depth_loss, calls = losses.depth_loss, [0]

def nan_on_rank1(*args, **kwargs):
    terms = depth_loss(*args, **kwargs)
    calls[0] += 1
    if os.environ.get("RANK") == "1" and calls[0] == @NAN_STEP@:
        terms["total"] = terms["total"] * float("nan")
    return terms

losses.depth_loss = nan_on_rank1
sys.argv = [@TRAIN_PY@] + sys.argv[1:]
runpy.run_path(@TRAIN_PY@, run_name="__main__")
'''


def _config(root, out, **train_overrides):
    """The run of this module: micro model, 3 steps, one checkpoint, 1 torch thread per process."""
    return run_config(root, out, train={"steps": STEPS, "checkpoint_every": 2, "torch_threads": 1,
                                        **train_overrides})


@pytest.fixture(scope="module")
def two_procs(synth_root, tmp_path_factory):
    """Run train/train.py with 2 CPU processes; returns (output_dir, combined log text)."""
    tmp = tmp_path_factory.mktemp("ddp")
    out = tmp / "run"
    config = tmp / "config.yaml"
    config.write_text(dump_run_config(_config(synth_root, out)))
    wrapper = tmp / "train_wrapper.py"
    wrapper.write_text(WRAPPER.replace("@TRAIN_PY@", repr(str(TRAIN_PY))).replace("@NAN_STEP@", str(NAN_STEP)))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1", "HF_HOME": str(tmp / "hf"),
           "DEPTHPE_TEST_REPLICAS": str(tmp)}
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(port), str(wrapper), "--config", str(config)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    return out, log, tmp


def test_two_processes_really_train_together(two_procs):
    out, log, _ = two_procs
    assert "world size 2 (MULTI_CPU" in log
    state = json.loads((out / "final" / "trainer_state.json").read_text())
    assert state["world_size"] == 2 and state["step"] == STEPS
    # the step that was NaN on rank 1 only was skipped on both processes, without a DDP hang
    assert state["counters"]["nonfinite_steps"] == 1
    # the images of both processes are counted: 2 x B x S per step
    assert state["counters"]["images"] == sum(2 * s * (6 // s) for s in _views_per_step(out))


def test_replicas_hold_identical_weights(two_procs):
    out, _, tmp = two_procs
    r0, r1 = torch.load(tmp / "replica_0.pt"), torch.load(tmp / "replica_1.pt")
    assert r0.keys() == r1.keys() and len(r0) > 100
    for k in r0:
        assert torch.equal(r0[k], r1[k]), k
    final = load_file(out / "final" / "model.safetensors")
    assert all(torch.equal(final[k], r0[k]) for k in final)
    at2 = load_file(out / "checkpoints" / "step_0000002" / "model" / "model.safetensors")
    assert any(not torch.equal(at2[k], final[k]) for k in final)  # training moved the weights


def test_files_written_once_and_every_rank_saves_its_rng_state(two_procs):
    out, log, _ = two_procs
    assert log.count("training done:") == 1 and log.count("world size 2") == 1
    state_dir = out / "checkpoints" / "step_0000002" / "state"
    assert (state_dir / "random_states_0.pkl").is_file() and (state_dir / "random_states_1.pkl").is_file()
    events = list((out / "logs").rglob("events.out.tfevents.*"))
    assert events and len({e.name.split(".")[4] for e in events}) == 1  # one writer process (pid)
    assert len(list((out / "logs").rglob("hparams.yml"))) == 1
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_0000002"]


def test_matches_one_process_with_the_same_global_batch(two_procs, synth_root, tmp_path, monkeypatch):
    """2 processes x B == 1 process x 2 micro-batches of B: the same samples, the same loss
    normalisation, the same learning rate per step, so the same weights (on this CPU even
    bit-identical; the test allows 1e-6). Half the global batch gives clearly different weights."""
    import depthpe.run.losses as losses

    out, _, _ = two_procs
    two = load_file(out / "final" / "model.safetensors")
    real, calls = losses.depth_loss, {"n": 0}

    def nan_like_rank1(*args, **kwargs):  # rank 1's micro-batch of step NAN_STEP is call 2 * NAN_STEP
        terms = real(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 2 * NAN_STEP:
            terms["total"] = terms["total"] * math.nan
        return terms

    monkeypatch.setattr(losses, "depth_loss", nan_like_rank1)
    one = load_file(train(_config(synth_root, tmp_path / "accum", grad_accum=2)) / "model.safetensors")
    assert max((one[k] - two[k]).abs().max().item() for k in two) <= 1e-6

    monkeypatch.setattr(losses, "depth_loss", real)
    half = load_file(train(_config(synth_root, tmp_path / "half")) / "model.safetensors")
    assert max((half[k] - two[k]).abs().max().item() for k in two) > 1e-3


def _views_per_step(out: Path) -> list[int]:
    """S of each step of the run (the batch shape is a function of (seed, step) only)."""
    from depthpe.loader.sampling import batch_shape
    from depthpe.run import load_run_config

    cfg = load_run_config(out / "config.yaml")
    return [batch_shape(cfg.seed, step, cfg.data).num_views for step in range(cfg.train.steps)]
