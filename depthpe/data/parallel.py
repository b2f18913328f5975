"""One function over many items in worker processes, results in item order, with a progress bar.

``depthpe check`` and ``depthpe index`` read every scene file of a data root; at paper size that is
100,000 files or more, so both spread the files over ``--workers`` processes with ``ordered_map``.
Workers are *spawned* (a fresh interpreter), never forked: the calling process may hold OpenCV's or
torch's thread pools, which a forked child can inherit in a broken state (see ``workers.py``).
``concurrent.futures.ProcessPoolExecutor.map`` does the distribution and keeps the order; what is
added here is the choice of the worker count, the chunk size, the tqdm bar (rate and remaining time)
and the one-line error when a worker process dies. Light module: no torch, OpenCV or h5py import.
"""

from __future__ import annotations

import os
from typing import Callable, Iterable, TypeVar

__all__ = ["MAX_AUTO_WORKERS", "resolve_workers", "workers_used", "ordered_map", "WorkerDied"]

MAX_AUTO_WORKERS = 16
MAX_CHUNK = 32  # items per task sent to a worker: few round trips, yet a bar that moves

T = TypeVar("T")
R = TypeVar("R")


class WorkerDied(RuntimeError):
    """A worker process ended abruptly (killed, e.g. by the out-of-memory killer)."""


def resolve_workers(workers: int, limit: int = MAX_AUTO_WORKERS) -> int:
    """``workers`` processes, or for 0 the CPU cores this process may use (at most ``limit``)."""
    if workers:
        return workers
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not available on macOS / Windows
        cores = os.cpu_count() or 1
    return max(1, min(cores, limit))


def _chunk_size(items: int, workers: int) -> int:
    """Items per task: about 8 tasks per worker, at most ``MAX_CHUNK``."""
    return max(1, min(MAX_CHUNK, items // (8 * workers)))


def workers_used(workers: int, items: int, min_per_worker: int = 1) -> int:
    """Processes ``ordered_map`` uses for ``items`` items: ``workers``, but at most one per
    ``min_per_worker`` items (a worker's start-up should pay for itself), and at least 1 (this process)."""
    return max(1, min(workers, items // max(1, min_per_worker)))


def ordered_map(fn: Callable[[T], R], items: Iterable[T], *, workers: int = 1, progress: bool = False,
                desc: str = "", unit: str = "item", initializer: Callable[[], None] | None = None,
                min_per_worker: int = 1) -> list[R]:
    """``[fn(item) for item in items]``, in item order, computed by ``workers`` spawned processes.

    ``workers_used(workers, len(items), min_per_worker)`` processes are started; when that is one,
    ``fn`` runs in this process and ``initializer`` is never called. Otherwise each worker runs
    ``initializer()`` once first (e.g. to use one thread: the workers are the parallelism). ``fn``, the items and the results must pickle, and ``fn`` should not raise: an
    exception it raises stops the whole map. ``progress`` shows a tqdm bar labelled ``desc`` counting
    ``unit``s. Raises ``WorkerDied`` when a worker process is killed.
    """
    from tqdm.auto import tqdm

    items = list(items)
    workers = workers_used(workers, len(items), min_per_worker)
    bar = tqdm(total=len(items), desc=desc, unit=unit, disable=not progress)
    pool = None
    try:
        if workers > 1:
            results = _pool_map(fn, items, workers, initializer)
            pool = results.pool
        else:
            results = map(fn, items)
        out = []
        for result in results:
            out.append(result)
            bar.update(1)
        return out
    finally:
        bar.close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


class _PoolResults:
    """The ordered results of ``ProcessPoolExecutor.map`` with the pool that computes them; a worker
    that dies becomes ``WorkerDied`` with one line saying what to do."""

    def __init__(self, pool, results) -> None:
        self.pool, self._results = pool, results

    def __iter__(self):
        from concurrent.futures.process import BrokenProcessPool

        try:
            yield from self._results
        except BrokenProcessPool as err:
            raise WorkerDied(f"a worker process died ({err}); out of memory? rerun with fewer --workers "
                             "(or --workers 1)") from err


def _pool_map(fn, items: list, workers: int, initializer) -> _PoolResults:
    """Start ``workers`` spawned processes and map ``fn`` over ``items`` in order."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=initializer)
    return _PoolResults(pool, pool.map(fn, items, chunksize=_chunk_size(len(items), workers)))
