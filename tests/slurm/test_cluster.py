"""The scripts of scripts/slurm/ under a real one-node Slurm cluster (scripts/slurm/local_cluster.sh;
.ci/run starts it, and the first test here starts it when it is not running; no cluster is a failure
that says why, never a skip).

Every job of the module is submitted at once, by one scenario thread each, so that they run side by
side on the cluster; each test waits for its scenarios and checks them:

* a 1-task job of train.sbatch trains a tiny config to the end (the reference of the pre-emptions);
* 2 processes train with DDP over gloo from Slurm's variables, as 2 srun tasks and as one task's
  ``accelerate launch`` of 2 processes, and end with the weights of the same run launched by hand
  (``accelerate launch --num_processes 2``);
* pre-emption for real, each ending with the weights of the uninterrupted run bit for bit, one restart
  in the job's log with the step it resumed from, and every step logged once (TensorBoard):
  (a) ``scancel --batch --signal=TERM``, (b) a job of a higher-priority partition, (c) ``scontrol
  requeue``, (d) ``--time=2`` shorter than the run (several allocations);
* convert_array.sbatch: 3 array tasks and one join job give the files of a one-process conversion;
* eval.sbatch: 2 tasks give the summary of 1 task.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest

from depthpe.run import dump_run_config
from tests.helpers.converted import assert_same_dataset
from tests.helpers.slurm import CLUSTER, SCRIPTS, Cluster, ensure_cluster, job_env
from tests.helpers.tables import nested_close
from tests.helpers.training import run_config

pytestmark = pytest.mark.slow

TRAIN = SCRIPTS / "train.sbatch"
STEPS, EVERY = 20, 2  # the pre-emption runs: a checkpoint every 2 steps, signalled as they begin
# The time-limit run must outlast its first allocation (40 to 55 s) however fast the machine: 400 steps
# took 43 s on a quiet 2-core VM (2026-12-05) and ended inside one; 900 stay over 55 s at 1.5 x that
# speed, and on a busy machine (about 150 steps per allocation) take some 6 allocations, within JOB_TIMEOUT.
LONG_STEPS, LONG_EVERY = 900, 50
JOB_TIMEOUT = 420


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Runs:
    """The module's runs: configs written under ``tmp``, scenarios submitted at once (``start``), their
    outcomes (``result``)."""

    def __init__(self, tmp: Path, data: Path):
        self.tmp, self.data = tmp, data
        self.cluster = Cluster(job_env(tmp), tmp)
        self.pool = ThreadPoolExecutor(max_workers=16)
        self.futures = {}

    def config(self, name: str, steps: int = STEPS, every: int = EVERY) -> Path:
        path = self.tmp / f"{name}.yaml"
        path.write_text(dump_run_config(run_config(self.data, self.tmp / name, train={
            "steps": steps, "checkpoint_every": every, "keep_checkpoints": 2, "torch_threads": 1})))
        return path

    def start(self, name: str, fn, *args, **kwargs) -> None:
        self.futures[name] = self.pool.submit(fn, *args, **kwargs)

    def result(self, name: str):
        return self.futures[name].result(timeout=JOB_TIMEOUT + 120)

    def log(self, name: str) -> str:
        text = (self.tmp / f"{name}.out").read_text(errors="replace").replace("\r", "\n")
        return "\n".join(line for line in text.splitlines() if not line.startswith("train:"))  # no progress bars

    def train_job(self, name: str, *sbatch_args: str, trigger=None, early: bool = False, steps: int = STEPS,
                  every: int = EVERY, **env: str) -> dict:
        """Submit train.sbatch for config ``name``; when ``trigger`` is given, call it with the job id once
        the run has written its first checkpoint (``early``: once the training has begun, for a trigger
        that takes Slurm seconds to act on); wait for the end. Returns the job's last state."""
        config = self.config(name, steps, every)
        job_id = self.cluster.sbatch("-c", "1", "-o", self.tmp / f"{name}.out", *sbatch_args, TRAIN, config, **env)
        if trigger is not None:
            ready = self._started if early else self._checkpointed
            first = self.cluster.wait(job_id, JOB_TIMEOUT, until=lambda: ready(name))
            assert first["JobState"] not in ("COMPLETED", "FAILED"), f"{name} ended before it could be stopped"
            trigger(job_id)
        return self.cluster.wait(job_id, JOB_TIMEOUT)

    def _checkpointed(self, name: str) -> bool:
        """Run ``name`` has written its first checkpoint: it is in its step loop, where a SIGTERM ends it
        after the step, with a checkpoint, within a few seconds (the KillWait of a requeue)."""
        return any((self.tmp / name / "checkpoints").glob("step_*/trainer_state.json"))

    def _started(self, name: str) -> bool:
        """The training process of run ``name`` has begun (its stop handler is installed: "run id" is
        logged after it), so that a SIGTERM from now on ends it after a step, with a checkpoint."""
        log = self.tmp / name / "train.log"
        return log.exists() and " INFO run id " in log.read_text()

    def by_hand(self, name: str, processes: int, steps: int = STEPS, every: int = EVERY) -> subprocess.CompletedProcess:
        """The same run launched by hand, outside Slurm (``accelerate launch`` for 2 processes)."""
        config = self.config(name, steps, every)
        env = {k: v for k, v in self.cluster.env.items() if k != "SLURM_CONF"}
        if processes > 1:
            cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes",
                   str(processes), "--main_process_port", str(_port()), "-m", "depthpe.train"]
            env["ACCELERATE_USE_CPU"] = "1"
        else:
            cmd = [sys.executable, "-m", "depthpe", "train"]
        return subprocess.run([*cmd, "--config", str(config)], env=env, capture_output=True, text=True,
                              timeout=JOB_TIMEOUT)

    def preempt_by_partition(self, name: str) -> dict:
        """(b): the run in partition ``low`` holds half the node's memory; a job of ``high`` that needs
        more than the rest pre-empts it."""
        def preemptor(job_id):
            self.cluster.sbatch("-p", "high", "--mem=10000", "-c", "1", "-o", self.tmp / "preemptor.out",
                                "--wrap", "echo preemptor ran")
        return self.train_job(name, "-p", "low", "--mem=8192", trigger=preemptor, early=True)

    def time_limited(self, name: str) -> dict:
        """(d): ``--time=2 --signal=B:TERM@50``. slurmctld checks time limits every 30 s and sends the
        signal at the first check that is 50 + 30 s or less before the limit, i.e. 40 to 70 s after the
        job (or its requeued self) started: every allocation lasts 40 s or more. A probe job (signalled
        at the first check after it started; its time stamp appears whole, by a rename, as the test polls
        for it) tells when the checks happen, and the run is submitted 5 s
        after one: started up to 15 s later, its first allocation lasts 40 to 55 s and ends before the
        run does."""
        stamp = self.tmp / "probe.time"
        on_signal = f"date +%s.%N > {stamp}.part && mv {stamp}.part {stamp}; exit 0"
        self.cluster.sbatch("--time=1", "--signal=B:USR1@50", "-o", "/dev/null", "--wrap",
                            f"trap '{on_signal}' USR1; sleep 100 & wait")
        deadline = time.time() + 90
        while not stamp.exists() and time.time() < deadline:
            time.sleep(0.2)
        assert stamp.exists(), "the probe job got no signal within 90 s"
        time.sleep((float(stamp.read_text()) + 5 - time.time()) % 30)
        return self.train_job(name, "--time=2", "--signal=B:TERM@50", steps=LONG_STEPS, every=LONG_EVERY)


@pytest.fixture(scope="module")
def runs(synth_root, tmp_path_factory):
    started = ensure_cluster()
    runs = Runs(tmp_path_factory.mktemp("slurm"), synth_root)
    c = runs.cluster
    runs.start("b", runs.preempt_by_partition, "b")  # first: it needs half the node's memory
    runs.start("ref", runs.train_job, "ref")
    runs.start("a", runs.train_job, "a", trigger=lambda j: c.run("scancel", "--batch", "--signal=TERM", j))
    runs.start("c", runs.train_job, "c", trigger=lambda j: c.run("scontrol", "requeue", j))
    runs.start("d", runs.time_limited, "d")
    runs.start("d_ref", runs.by_hand, "d_ref", 1, LONG_STEPS, LONG_EVERY)
    runs.start("ddp_tasks", runs.train_job, "ddp_tasks", "-n", "2")
    runs.start("ddp_launcher", runs.train_job, "ddp_launcher", "-c", "2", DEPTHPE_PROCS_PER_NODE="2")
    runs.start("ddp_hand", runs.by_hand, "ddp_hand", 2)
    yield runs
    runs.pool.shutdown(wait=False, cancel_futures=True)
    subprocess.run(["scancel", "--user", "root"], env=c.env, capture_output=True)
    if started:
        subprocess.run([str(CLUSTER), "stop"], capture_output=True, timeout=120)


def _weights(run_dir: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(run_dir / "final" / "model.safetensors")


def assert_same_weights(a: Path, b: Path) -> None:
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    different = [k for k in wa if not (wa[k] == wb[k]).all()]
    assert not different, f"{a.name} and {b.name} differ in {len(different)} tensors, e.g. {different[:3]}"


def logged_scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """TensorBoard's view of a run's logs (restarts purge what was logged after the checkpoint they
    resumed from): tag -> [(step, value)] of the losses, lr and gradient norm."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "logs" / "train"))
    acc.Reload()
    tags = [t for t in acc.Tags()["scalars"] if t.startswith(("loss/", "smooth/loss/")) or t in ("lr", "grad_norm")]
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in tags}


def restarts(log: str) -> list[tuple[int, int | None]]:
    """(restart count, step resumed from or None for a fresh start) of every allocation in a job log."""
    blocks = re.split(r"(?=^\S+ \S+ job \d+ on )", log, flags=re.M)
    found = []
    for block in blocks:
        count = re.search(r"restart count (\d+)", block)
        if count:
            resumed = re.search(r"resumed from \S+ at step (\d+)", block)
            found.append((int(count.group(1)), int(resumed.group(1)) if resumed else None))
    return found


def check_resumed_run(runs: Runs, name: str, ref: Path) -> list[tuple[int, int | None]]:
    """The run ``name`` was stopped, requeued and resumed from a checkpoint: it completed, its log shows
    each restart and the step it resumed from (the step of the SIGTERM checkpoint), it ends with
    ``ref``'s weights bit for bit, and TensorBoard shows every step once with ``ref``'s values. Returns
    its restarts."""
    job, log = runs.result(name), runs.log(name)
    assert job["JobState"] == "COMPLETED", (job, log[-3000:])
    found = restarts(log)
    assert found[0] == (0, None) and any(step for _, step in found[1:]), (found, log[-3000:])
    assert [count for count, _ in found] == list(range(len(found))), found
    stopped_at = [int(s) for s in re.findall(r"SIGTERM received: checkpoint written at step (\d+)", log)]
    assert [step for _, step in found[1:] if step is not None] == stopped_at[: len(found) - 1], (found, stopped_at)
    assert int(job["Restarts"]) == len(found) - 1
    assert_same_weights(runs.tmp / name, ref)
    assert logged_scalars(runs.tmp / name) == logged_scalars(ref)
    print(f"\n{name}: {_signal_to_resume(runs, name, log)}")
    return found


def _signal_to_resume(runs: Runs, name: str, log: str) -> str:
    """Seconds from each SIGTERM the batch script got to the line of the step resumed from (train.log)."""
    signals = [datetime.strptime(t, "%Y-%m-%d %H:%M:%S") for t in
               re.findall(r"^(\S+ \S+) SIGTERM: passing it on", log, flags=re.M)]
    train_log = (runs.tmp / name / "train.log").read_text()
    resumes = [datetime.strptime(t.split(",")[0], "%Y-%m-%d %H:%M:%S") for t in
               re.findall(r"^(\S+ \S+) INFO resumed from", train_log, flags=re.M)]
    pairs = [f"{(r - s).total_seconds():.0f} s" for s, r in zip(signals, resumes)]
    return f"restarts {len(resumes)}, signal to resumed step: {', '.join(pairs) or 'no signal to the batch script'}"


def test_a_one_task_job_trains_to_the_end(runs):
    job, log = runs.result("ref"), runs.log("ref")
    assert job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", (job, log[-3000:])
    assert "1 task(s) x 1 process(es) (srun; 0 GPU(s) per node)" in log
    assert f"training done: {STEPS} steps on 1 process(es)" in log
    assert restarts(log) == [(0, None)]


@pytest.mark.parametrize("name, layout", [("ddp_tasks", "2 task(s) x 1 process(es) (srun;"),
                                          ("ddp_launcher", "1 task(s) x 2 process(es) (accelerate launch;")])
def test_two_processes_train_with_ddp_like_the_run_launched_by_hand(runs, name, layout):
    """Two srun tasks (depthpe forms the run from Slurm's variables), or one task with one
    ``accelerate launch`` of two processes: the weights of the same run launched by hand."""
    hand = runs.result("ddp_hand")
    assert hand.returncode == 0, hand.stderr[-3000:]
    job, log = runs.result(name), runs.log(name)
    assert job["JobState"] == "COMPLETED", (job, log[-3000:])
    assert layout in log and "world size 2 (MULTI_CPU" in log, log[-3000:]
    assert f"training done: {STEPS} steps on 2 process(es)" in log
    assert_same_weights(runs.tmp / name, runs.tmp / "ddp_hand")


def test_a_signal_to_the_batch_script_checkpoints_requeues_and_resumes_exactly(runs):
    """(a) scancel --batch --signal=TERM: the job's own --signal=B:TERM, delivered now."""
    found = check_resumed_run(runs, "a", runs.tmp / "ref")
    assert found[1][1] is not None and 0 < found[1][1] < STEPS


def test_preemption_by_a_higher_priority_partition_resumes_exactly(runs):
    """(b) PreemptType=preempt/partition_prio, PreemptMode=REQUEUE: the batch script gets its --signal."""
    check_resumed_run(runs, "b", runs.tmp / "ref")
    assert "preemptor ran" in (runs.tmp / "preemptor.out").read_text()


def test_scontrol_requeue_resumes_exactly(runs):
    """(c) scontrol requeue from outside: Slurm sends SIGTERM to the steps, then requeues the job."""
    check_resumed_run(runs, "c", runs.tmp / "ref")


def test_a_time_limit_shorter_than_the_run_finishes_over_several_allocations(runs):
    """(d) --time=2 --signal=B:TERM@50: the run goes on in a new allocation each time."""
    ref = runs.result("d_ref")
    assert ref.returncode == 0, ref.stderr[-3000:]
    check_resumed_run(runs, "d", runs.tmp / "d_ref")


def test_a_conversion_array_and_one_join_equal_one_conversion(runs, tmp_path):
    from depthpe.scenes.convert import convert
    from depthpe.scenes.convert.common import ConvertOptions
    from depthpe.testing import fake_datasets as fake

    raw = tmp_path / "raw"
    fake.write_fake_co3d(raw, fake.make_scenes(5, views=3, height=32, width=40, seed=3))
    convert("co3d", raw, tmp_path / "one", ConvertOptions(val_scenes=1, progress=False))
    c, script = runs.cluster, SCRIPTS / "convert_array.sbatch"
    args = ["co3d", "--src", raw, "--out", tmp_path / "sharded", "--val-scenes", "1"]
    array = c.sbatch("--array=0-2", "-c", "1", "-o", tmp_path / "convert-%a.out", script, *args)
    join = c.sbatch(f"--dependency=afterok:{array}", "-c", "1", "-o", tmp_path / "join.out", script, *args)
    job = c.wait(join, JOB_TIMEOUT)
    logs = [(tmp_path / f"convert-{k}.out").read_text() for k in range(3)]
    assert job["JobState"] == "COMPLETED", (job, logs, (tmp_path / "join.out").read_text())
    for k, log in enumerate(logs):
        assert f"shard {k}/3" in log and "no index written" in log, log
    assert "5 processed: 0 written, 5 already done" in (tmp_path / "join.out").read_text()
    assert_same_dataset(tmp_path / "one", tmp_path / "sharded")


def test_evaluation_on_two_tasks_equals_one_task(runs, synth_root, tmp_path):
    assert runs.result("ref")["JobState"] == "COMPLETED", "the reference run (the model evaluated here) failed"
    c, script = runs.cluster, SCRIPTS / "eval.sbatch"
    args = ["--model", runs.tmp / "ref" / "final", "--data", synth_root, "--views", "3", "--panels", "0",
            "--num-workers", "0"]
    jobs = {n: c.sbatch("-n", str(n), "-c", "1", "-o", tmp_path / f"eval{n}.out", script, *args, "--out",
                        tmp_path / f"eval{n}") for n in (1, 2)}
    summaries = {}
    for n, job_id in jobs.items():
        job = c.wait(job_id, JOB_TIMEOUT)
        assert job["JobState"] == "COMPLETED", (job, (tmp_path / f"eval{n}.out").read_text()[-3000:])
        summaries[n] = json.loads((tmp_path / f"eval{n}" / "summary.json").read_text())
    assert summaries[2]["meta"]["processes"] == 2 and summaries[1]["meta"]["processes"] == 1
    assert nested_close(summaries[2]["summary"], summaries[1]["summary"])
