"""What Slurm's environment means for a depthpe process: the process group of a task that ``srun``
started (``launch_env``), and the part of a conversion an array task does (``array_shard``).

Standard library only, pure functions of an environment mapping (``os.environ`` by default).

* ``srun --ntasks=N depthpe eval ...`` (or ``depthpe train``) starts N plain processes, one per task,
  with ``SLURM_PROCID``, ``SLURM_STEP_NUM_TASKS``, ``SLURM_LOCALID`` and ``SLURM_STEP_NODELIST`` but
  none of the variables torch.distributed and Accelerate read (``RANK``, ``WORLD_SIZE``,
  ``MASTER_ADDR``...). ``launch_env`` derives them, so the N tasks form one run. A process that a
  launcher (``accelerate launch``, torchrun) started already has ``RANK`` and is left alone, and so is
  the batch script itself (it has ``SLURM_PROCID`` but no ``SLURM_STEP_NUM_TASKS``).
* An array job (``sbatch --array=0-3``) gives each task ``SLURM_ARRAY_TASK_ID``; ``array_shard``
  turns it into the shard (k, n) of ``depthpe convert --shard k/n``.

Hand-written: Accelerate reads Slurm's variables only for its MPI launcher, and torch not at all.
"""

from __future__ import annotations

import os
import re
from typing import Mapping, MutableMapping

__all__ = ["launch_env", "apply_launch_env", "array_shard", "first_host", "main_port"]


def first_host(nodelist: str) -> str:
    """The first host of a Slurm host list: ``"vm"`` -> ``"vm"``, ``"node[07-09,12],gpu1"`` ->
    ``"node07"`` (zero padding kept)."""
    head = re.match(r"([^,\[]*)(?:\[([^\]]*)\])?", nodelist.strip())
    prefix, ranges = head.group(1), head.group(2)
    if not ranges:
        return prefix
    return prefix + ranges.split(",")[0].split("-")[0]


def main_port(environ: Mapping[str, str] = os.environ) -> int:
    """The port of the run's main process: ``DEPTHPE_MAIN_PORT`` when set, else one derived from the
    job and step ids (20000-59999), so that two jobs or steps on one node do not collide."""
    if environ.get("DEPTHPE_MAIN_PORT"):
        return int(environ["DEPTHPE_MAIN_PORT"])
    job = int(environ.get("SLURM_JOB_ID", "0") or 0)
    step = int(environ.get("SLURM_STEP_ID", "0") or 0)
    return 20000 + (job * 16 + step) % 40000


def launch_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The torch.distributed variables for a task of a multi-task ``srun`` step that no launcher
    started: ``RANK`` (= ``SLURM_PROCID``), ``WORLD_SIZE`` (= ``SLURM_STEP_NUM_TASKS``),
    ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` (the step's first node) and ``MASTER_PORT``
    (``main_port``). Empty outside such a step, for a 1-task step, or when ``RANK`` or ``WORLD_SIZE``
    is already set."""
    tasks = int(environ.get("SLURM_STEP_NUM_TASKS", "1") or 1)
    if tasks <= 1 or "SLURM_PROCID" not in environ or "RANK" in environ or "WORLD_SIZE" in environ:
        return {}
    nodes = int(environ.get("SLURM_STEP_NUM_NODES", "1") or 1)
    per_node = environ.get("SLURM_STEP_TASKS_PER_NODE", "")
    local_size = per_node.split("(")[0].split(",")[0] if per_node else str(tasks // max(nodes, 1))
    nodelist = environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST") or "127.0.0.1"
    return {"RANK": environ["SLURM_PROCID"], "WORLD_SIZE": str(tasks),
            "LOCAL_RANK": environ.get("SLURM_LOCALID", "0"), "LOCAL_WORLD_SIZE": local_size,
            "MASTER_ADDR": first_host(nodelist), "MASTER_PORT": str(main_port(environ))}


def apply_launch_env(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Add ``launch_env(environ)`` to ``environ`` (before Accelerate starts); returns what was added."""
    added = launch_env(environ)
    environ.update(added)
    return added


def array_shard(environ: Mapping[str, str] = os.environ) -> tuple[int, int] | None:
    """(k, n) of an array task: k = ``SLURM_ARRAY_TASK_ID`` - ``SLURM_ARRAY_TASK_MIN``, n =
    ``SLURM_ARRAY_TASK_COUNT``; None outside an array job. Raises ``ValueError`` for an array whose
    ids are not consecutive (``--array=0-9:2`` or a list with gaps), whose tasks would not cover every
    shard."""
    if "SLURM_ARRAY_TASK_ID" not in environ or "SLURM_ARRAY_TASK_COUNT" not in environ:
        return None
    task, count = int(environ["SLURM_ARRAY_TASK_ID"]), int(environ["SLURM_ARRAY_TASK_COUNT"])
    low = int(environ.get("SLURM_ARRAY_TASK_MIN", "0"))
    high = int(environ.get("SLURM_ARRAY_TASK_MAX", str(low + count - 1)))
    if high - low + 1 != count or int(environ.get("SLURM_ARRAY_TASK_STEP", "1")) != 1:
        raise ValueError(f"the array job's task ids are not consecutive ({count} tasks from {low} to {high}): "
                         "submit it with --array=0-N (N+1 shards), or pass --shard K/N")
    return task - low, count
