"""DataLoader worker set-up: what each loader worker runs first, and what a process settles before
it forks one.

**Stop signals belong to the main process.** Slurm (``scancel``, the time limit, pre-emption),
systemd and Kubernetes send SIGTERM to every process of a job, and Ctrl-C sends SIGINT to every
process of the terminal's foreground group. A worker killed by it makes the main process fail with
``DataLoader worker (pid N) is killed by signal: Terminated`` before it can write its pre-emption
checkpoint. So workers ignore SIGINT, and ignore SIGTERM unless it comes from their own parent:
the main process decides (training checkpoints and exits 143 or 130) and stops its workers itself.
A SIGTERM from the parent is still obeyed because ``torch`` and ``multiprocessing`` end a worker
that does not leave in time with ``Process.terminate()`` (SIGTERM); a worker that ignored it would
leave its parent waiting for it forever. A Python signal handler cannot see the sender, so a thread
takes SIGTERM with ``signal.sigwaitinfo`` (where the platform has it; elsewhere SIGTERM is simply
ignored). No library offers this, hence written here.

**OpenCV's thread pool is not fork-safe.** A process forked while OpenCV's pthreads pool of the
parent has threads (after any multi-threaded ``cv2.resize``, e.g. ``predict`` in a notebook) can
hang for ever in its first OpenCV call; for a loader worker that is ``cv2.setNumThreads(1)`` in
``worker_init_fn``. Importing this module registers a fork hook that shrinks the pool to one thread
(which joins its threads) just before any ``os.fork`` of this process and restores the previous
count in both processes afterwards, so a forked worker never inherits a live pool. Worker start-up
stays a fork (cheap, and workers see the parent's state) rather than ``spawn``/``forkserver``.
"""

from __future__ import annotations

import os
import random
import signal
import threading

import cv2
import numpy as np
import torch

__all__ = ["worker_init_fn", "ignore_stop_signals"]


def worker_init_fn(worker_id: int) -> None:
    """DataLoader worker setup: leave stop signals to the main process (``ignore_stop_signals``),
    seed python/numpy from torch's per-worker seed and run OpenCV with one thread (workers are the
    parallelism). Sample randomness itself comes from the sample keys."""
    ignore_stop_signals()
    seed = torch.initial_seed() % (1 << 32)
    random.seed(seed)
    np.random.seed(seed)
    cv2.setNumThreads(1)


def ignore_stop_signals() -> None:
    """In a worker process (main thread): ignore SIGINT, and SIGTERM from anyone but the parent
    process; a SIGTERM from the parent ends the process at once with status 143."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not hasattr(signal, "sigwaitinfo"):  # e.g. macOS: no sender to check, so ignore SIGTERM
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # threads started later inherit the mask
    threading.Thread(target=_obey_parent_sigterm, args=(os.getppid(),), name="sigterm-from-parent",
                     daemon=True).start()


def _obey_parent_sigterm(parent: int) -> None:
    """Take every SIGTERM of this process; exit with status 143 when the parent sent it."""
    while True:
        info = signal.sigwaitinfo({signal.SIGTERM})
        if info.si_pid == parent:
            os._exit(128 + signal.SIGTERM)


_saved_threads: list[int] = []


def _opencv_before_fork() -> None:
    _saved_threads.append(cv2.getNumThreads())
    cv2.setNumThreads(1)  # joins the pool's threads: the child inherits none


def _opencv_after_fork() -> None:
    if _saved_threads:
        cv2.setNumThreads(_saved_threads.pop())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_opencv_before_fork, after_in_parent=_opencv_after_fork,
                        after_in_child=_opencv_after_fork)
