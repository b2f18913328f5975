"""scripts/slurm/train.sbatch run with stand-ins for Slurm's `srun` and `scontrol` (no cluster here):
the stand-in srun starts one task per "node" on this machine with SLURM_NODEID set, as srun does, so
the script's two `accelerate launch` calls train as one 2-process run; SIGTERM to the script (what
`--signal=B:TERM@300` sends) is passed on, and the job is requeued."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from depthpe.run import dump_run_config
from tests.helpers.training import run_config

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slurm" / "train.sbatch"

# srun: one task per node (SLURM_JOB_NUM_NODES), SLURM_NODEID and SLURM_PROCID set; SIGTERM is passed on to
# the tasks; the exit status is the largest of the tasks'. scontrol: `show hostnames` -> this machine,
# `requeue ID` is recorded.
FAKE_SRUN = """#!/bin/bash
while [[ "$1" == --* ]]; do shift; done
pids=()
for ((i = 0; i < SLURM_JOB_NUM_NODES; i++)); do
  SLURM_NODEID=$i SLURM_PROCID=$i "$@" &
  pids+=($!)
done
trap 'kill -TERM "${pids[@]}" 2>/dev/null' TERM
status=0
for pid in "${pids[@]}"; do
  wait "$pid"; code=$?
  while kill -0 "$pid" 2>/dev/null; do wait "$pid"; code=$?; done  # a trapped TERM ends `wait` early
  (( code > status )) && status=$code
done
exit $status
"""
FAKE_SCONTROL = """#!/bin/bash
if [ "$1 $2" = "show hostnames" ]; then echo 127.0.0.1; exit 0; fi
echo "$@" >> "$SCONTROL_LOG"
"""


def _slurm_env(tmp: Path, port: int, **extra) -> dict:
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env.update(PATH=f"{bin_dir}:{Path(sys.executable).parent}:{env['PATH']}", SLURM_JOB_NUM_NODES="2",
               SLURM_JOB_NODELIST="node[0-1]", SLURM_JOB_ID="42", DEPTHPE_PROCS_PER_NODE="1",
               DEPTHPE_MAIN_PORT=str(port), SCONTROL_LOG=str(tmp / "scontrol.log"), OMP_NUM_THREADS="1",
               HF_HOME=str(tmp / "hf"), **extra)
    return env


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_batch_script_starts_one_launcher_per_machine(tmp_path):
    """Without training: the launch command each task runs, from Slurm's variables."""
    env = _slurm_env(tmp_path, 29555)
    fake_accelerate = tmp_path / "bin" / "accelerate"
    fake_accelerate.write_text('#!/bin/bash\necho "node $SLURM_NODEID: accelerate $*"\n')
    fake_accelerate.chmod(0o755)
    done = subprocess.run(["bash", str(SCRIPT), "run.yaml", "train.cpu=true"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = sorted(line for line in done.stdout.splitlines() if line.startswith("node "))
    assert len(lines) == 2
    for rank, line in enumerate(lines):
        assert (f"--num_machines 2 --machine_rank {rank} --num_processes 2 --main_process_ip 127.0.0.1 "
                f"--main_process_port 29555 -m depthpe.train --config run.yaml --resume auto train.cpu=true") in line
    assert not (tmp_path / "scontrol.log").exists()  # finished: no requeue


@pytest.mark.slow
def test_two_slurm_tasks_train_as_one_run_and_sigterm_requeues(synth_root, tmp_path):
    out = tmp_path / "run"
    config = tmp_path / "run.yaml"
    config.write_text(dump_run_config(run_config(synth_root, out, train={
        "steps": 2000, "checkpoint_every": 2, "keep_checkpoints": 2, "torch_threads": 1})))
    job = subprocess.Popen(["bash", str(SCRIPT), str(config)], env=_slurm_env(tmp_path, _port()),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.time() + 240
        while not list((out / "checkpoints").glob("step_*/trainer_state.json")) and time.time() < deadline:
            assert job.poll() is None, job.communicate()[0][-3000:]
            time.sleep(0.5)
        job.send_signal(signal.SIGTERM)  # what --signal=B:TERM@300 does before the time limit
        log = job.communicate(timeout=240)[0]
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert "world size 2 (MULTI_CPU" in log, log[-3000:]
    assert log.count("SIGTERM received: checkpoint written at step") == 1, log[-3000:]
    assert (tmp_path / "scontrol.log").read_text().split() == ["requeue", "42"]
    assert "requeueing job 42" in log
