"""Driving the one-node Slurm cluster of scripts/slurm/local_cluster.sh from tests: start it when it is
not running (failing, with its words, when it cannot be), submit jobs, read their state, wait for them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts" / "slurm"
CLUSTER = SCRIPTS / "local_cluster.sh"
SLURM_DIR = Path(os.environ.get("DEPTHPE_SLURM_DIR", "/tmp/depthpe-slurm"))
# States a job leaves only by a requeue, which these tests' jobs do themselves before they end.
FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE"}


def ensure_cluster() -> bool:
    """Make sure the cluster answers; start it when it does not. Returns True when this call started it
    (the caller stops it). Fails the test, with the script's output, when it cannot be started."""
    if subprocess.run([str(CLUSTER), "status"], capture_output=True, text=True, timeout=60).returncode == 0:
        return False
    started = subprocess.run([str(CLUSTER), "start"], capture_output=True, text=True, timeout=900)
    if started.returncode != 0:
        pytest.fail(f"the Slurm tests need a running cluster and `{CLUSTER} start` failed "
                    f"(status {started.returncode}):\n{started.stdout[-2000:]}{started.stderr[-2000:]}", pytrace=False)
    return True


def job_env(tmp: Path, **extra: str) -> dict[str, str]:
    """The environment jobs are submitted with (sbatch passes it on): this checkout first on PYTHONPATH,
    this Python first on PATH, the cluster's config, one thread, no Hub; no launcher or Slurm variables."""
    drop = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "ACCELERATE_USE_CPU")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("SLURM_", "PYTEST_"))}
    env.update(SLURM_CONF=str(SLURM_DIR / "slurm.conf"), PATH=f"{Path(sys.executable).parent}:{env['PATH']}",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p),
               OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", HF_HOME=str(tmp / "hf"), **extra)
    return env


class Cluster:
    """sbatch / scontrol / scancel with ``env``, jobs run in ``workdir``."""

    def __init__(self, env: dict[str, str], workdir: Path):
        self.env, self.workdir = env, workdir

    def run(self, *args: str, **extra_env: str) -> str:
        """Run a Slurm client command; its stdout. Fails the test with its stderr when it fails."""
        done = subprocess.run(list(args), env={**self.env, **extra_env}, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{' '.join(args)}: {done.stderr.strip()}"
        return done.stdout

    def sbatch(self, *args: str, **extra_env: str) -> str:
        """Submit; the job id."""
        out = self.run("sbatch", "--parsable", f"--chdir={self.workdir}", *map(str, args), **extra_env)
        return out.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job`` as a dict (JobState, Restarts, ExitCode, ...)."""
        text = self.run("scontrol", "-o", "show", "job", job_id)
        return dict(re.findall(r"(\w+)=(\S*)", text.splitlines()[0]))

    def wait(self, job_id: str, timeout: float, until=None) -> dict[str, str]:
        """Poll until the job is in a final state twice in a row (a job that requeues itself passes
        through none), or until ``until()`` is true; returns the job's last dict. Fails after ``timeout`` s."""
        deadline, final_seen = time.time() + timeout, False
        while time.time() < deadline:
            job = self.job(job_id)
            if until is not None and until():
                return job
            if job["JobState"] in FINAL_STATES:
                if final_seen:
                    return job
                final_seen = True
            else:
                final_seen = False
            time.sleep(0.5)
        raise AssertionError(f"job {job_id} still {job['JobState']} after {timeout:.0f} s: {job}")
