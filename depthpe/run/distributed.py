"""Runs of several processes and machines: the process group's timeout, a launch that did not form
one group, and a peer process that is gone.

* ``process_group_kwargs(minutes)``: the Accelerator's kwargs handler that gives every collective
  (all-reduce, barrier, broadcast) ``train.dist_timeout`` minutes; torch's own defaults are 10 (NCCL)
  and 30 (gloo) minutes, long to notice a machine that died.
* ``check_world_size(accelerator)``: ``accelerate launch`` sets ``WORLD_SIZE`` for the whole run; a
  process that nevertheless starts alone (e.g. ``--multi_gpu`` on machines without a GPU and
  without ``train.cpu=true``: every "node" would train by itself) is a one-line ``ConfigError``.
* ``lost_peer(err, num_processes)``: whether an exception raised in a step is another process being
  gone (gloo: "Connection reset by peer"; any backend: a ``torch.distributed.DistError``, a
  collective that timed out), so that the run ends with one line naming the checkpoint to resume
  from instead of a traceback.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Mapping

from ..config import ConfigError

__all__ = ["process_group_kwargs", "check_world_size", "lost_peer", "LOST_PEER_EXIT_CODE"]

LOST_PEER_EXIT_CODE = 1
_PEER_GONE = ("connection reset by peer", "connection closed by peer", "broken pipe", "timed out",
              "timeout", "socket closed", "failed to recv", "unable to write to socket")


def process_group_kwargs(minutes: float, backend: str | None = None):
    """``accelerate.InitProcessGroupKwargs`` with a collective timeout of ``minutes`` and, when given,
    the process-group ``backend`` (else accelerate's choice)."""
    from accelerate.utils import InitProcessGroupKwargs

    handler = InitProcessGroupKwargs(timeout=timedelta(minutes=minutes))
    if backend is not None:
        handler.backend = backend
    return handler


def check_world_size(num_processes: int, environ: Mapping[str, str] = os.environ) -> None:
    """Raise ``ConfigError`` when the launcher's ``WORLD_SIZE`` is larger than the process group this
    process joined (``num_processes``), saying which setting is missing."""
    launched = int(environ.get("WORLD_SIZE", "1") or 1)
    if launched <= num_processes:
        return
    raise ConfigError(
        f"the launcher started {launched} processes (WORLD_SIZE={launched}) but this one runs in a group of "
        f"{num_processes}: on machines without a GPU add train.cpu=true (or ACCELERATE_USE_CPU=1) so that the "
        "processes join over gloo; on GPUs check --num_machines, --machine_rank, --main_process_ip and "
        "--main_process_port on every machine (docs/distributed.md)")


def lost_peer(err: BaseException, num_processes: int) -> bool:
    """True when ``err`` (raised inside a training step of a run of ``num_processes`` > 1) means that
    another process of the run is gone or stopped answering."""
    if num_processes <= 1:
        return False
    import torch.distributed as dist

    error_types = tuple(t for t in (getattr(dist, "DistError", None),) if t is not None)
    if error_types and isinstance(err, error_types):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and any(marker in text for marker in _PEER_GONE)
