"""One OpenCV and torch thread in a process: the setting of worker processes, where the processes
are the parallelism (``depthpe check``, ``depthpe index``, the loader's benchmarks)."""

from __future__ import annotations

import contextlib

import cv2
import torch

__all__ = ["use_one_thread", "one_thread"]


def use_one_thread() -> None:
    """OpenCV and torch with one thread in this process: the setting of a worker process, where the
    processes are the parallelism (e.g. the pool initializer of ``depthpe check --workers``)."""
    cv2.setNumThreads(1)
    torch.set_num_threads(1)


@contextlib.contextmanager
def one_thread():
    """``use_one_thread`` inside the block, the previous thread counts restored after. For small
    tensors (a check's 4096 points per view pair) more threads only cost: on a loaded 2-core
    machine two OpenMP threads made ``depthpe check`` 17x slower than one."""
    threads = cv2.getNumThreads(), torch.get_num_threads()
    use_one_thread()
    try:
        yield
    finally:
        cv2.setNumThreads(threads[0])
        torch.set_num_threads(threads[1])
