"""One function over many items in worker processes, with a progress bar and one line for a dead worker.

``depthpe check`` and ``depthpe index`` read every scene file of a data root, ``depthpe synth`` renders
scenes and ``depthpe convert`` converts them; at paper size that is 100,000 items or more, so all four
spread them over ``--workers`` processes with ``parallel_map`` (``ordered_map``: results in item order;
``ordered=False``: results as they finish, each passed to a callback at once).
Workers are *spawned* (a fresh interpreter), never forked: the calling process may hold OpenCV's or
torch's thread pools, which a forked child can inherit in a broken state (see ``depthpe.loader.workers``).
The pool is this module's own (``multiprocessing`` processes and pipes): it knows which item each
worker is on, so a worker killed mid-item (the out-of-memory killer sends SIGKILL) ends the map at
once with ``WorkerDied`` naming that item, where ``multiprocessing.Pool`` would wait for ever for the
lost task. ``concurrent.futures.ProcessPoolExecutor`` (and joblib's loky) does notice the death, but
fails every unfinished future with the same ``BrokenProcessPool`` (tried with 2 spawned workers, 8
items, the worker on item 3 killed: items 2 to 7 all failed alike, item 2 having run on the healthy
worker), so it cannot say which item killed the worker: the one fact a user needs to find the scene
that runs out of memory. Light module: no torch, OpenCV or h5py import.
"""

from __future__ import annotations

import os
import pickle
import signal
import traceback
from typing import Any, Callable, Iterable, TypeVar

__all__ = ["MAX_AUTO_WORKERS", "resolve_workers", "workers_used", "parallel_map", "ordered_map", "WorkerDied"]

MAX_AUTO_WORKERS = 16
MAX_CHUNK = 32  # items per task sent to a worker: few round trips, yet a bar that moves
RETRY_HINT = "rerun with fewer --workers (or --workers 1)"

T = TypeVar("T")
R = TypeVar("R")


class WorkerDied(RuntimeError):
    """A worker process ended abruptly (killed, e.g. by the out-of-memory killer) while on ``item``."""

    def __init__(self, message: str, item: Any = None):
        super().__init__(message)
        self.item = item


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
    """Processes ``parallel_map`` uses for ``items`` items: ``workers``, but at most one per
    ``min_per_worker`` items (a worker's start-up should pay for itself), and at least 1 (this process)."""
    return max(1, min(workers, items // max(1, min_per_worker)))


def parallel_map(fn: Callable[[T], R], items: Iterable[T], *, ordered: bool = True,
                 on_result: Callable[[R], dict | None] | None = None, workers: int = 1, progress: bool = False,
                 desc: str = "", unit: str = "item", initializer: Callable[[], None] | None = None,
                 min_per_worker: int = 1, chunk: int | None = None, describe: Callable[[T], str] = repr,
                 hint: str = RETRY_HINT) -> list[R]:
    """``fn(item)`` for every item, computed by ``workers`` spawned processes -> the list of results.

    ``ordered``: the results (and the ``on_result`` calls) in item order; else in the order they
    finish. ``on_result(result)`` runs in this process for every result, exactly once, as soon as
    it is available (in order: once the results before it are in); a dict it returns is shown after
    the bar. ``workers_used(workers, len(items), min_per_worker)`` processes are started; when that
    is one, ``fn`` runs in this process and ``initializer`` is never called. Otherwise each worker
    runs ``initializer()`` once first (e.g. to use one thread: the workers are the parallelism) and
    takes ``chunk`` items at a time (default: about 8 tasks per worker). ``fn``, the items and the
    results must pickle, and ``fn`` should not raise: an exception it raises stops the whole map
    and is raised here. ``progress`` shows a tqdm bar labelled ``desc`` counting ``unit``s.
    Raises ``WorkerDied`` when a worker process dies: one line naming ``describe(item)`` of the
    item it was on, the signal or exit code, and ``hint`` (how to rerun).
    """
    from tqdm.auto import tqdm

    items = list(items)
    workers = workers_used(workers, len(items), min_per_worker)
    bar = tqdm(total=len(items), desc=desc, unit=unit, disable=not progress)
    out: list = []
    try:
        if workers > 1:
            pool = _Pool(fn, workers, initializer)
            try:
                results = pool.results(items, chunk or _chunk_size(len(items), workers), ordered, describe, hint)
                _collect(results, out, on_result, bar)
            finally:
                pool.close()
        else:
            _collect(map(fn, items), out, on_result, bar)
        return out
    finally:
        bar.close()


def ordered_map(fn: Callable[[T], R], items: Iterable[T], **kwargs) -> list[R]:
    """``[fn(item) for item in items]`` in item order: ``parallel_map(fn, items, ordered=True, **kwargs)``."""
    return parallel_map(fn, items, ordered=True, **kwargs)


def _collect(results: Iterable, out: list, on_result, bar) -> None:
    """Append every result to ``out``, call ``on_result`` on it and move the bar."""
    for result in results:
        out.append(result)
        status = on_result(result) if on_result is not None else None
        bar.update(1)
        if isinstance(status, dict):
            bar.set_postfix(status, refresh=False)


def _worker_main(conn, fn, initializer) -> None:
    """A worker: run ``initializer`` once, then for every chunk ``[(index, item)]`` received send one
    ``("ok" | "error", index, result or (exception, traceback text))`` per item; ``None`` ends it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle (it ends the workers)
    if initializer is not None:
        initializer()
    while True:
        try:
            chunk = conn.recv()
        except EOFError:
            return
        if chunk is None:
            return
        for index, item in chunk:
            try:
                message = ("ok", index, fn(item))
            except Exception as err:  # noqa: BLE001 - sent to the parent, which raises it
                message = ("error", index, (err, traceback.format_exc()))
            if not _send(conn, message):
                return


def _send(conn, message: tuple) -> bool:
    """Send a worker's message; an exception that does not pickle goes as a ``RuntimeError`` with
    its text. False when the parent is gone (its pipe closed): the worker then ends."""
    try:
        try:
            conn.send(message)
        except (pickle.PicklingError, TypeError, AttributeError) as err:
            status, index, _ = message
            text = message[2][1] if status == "error" else f"its result does not pickle: {err!r}"
            conn.send(("error", index, (RuntimeError(text.strip().splitlines()[-1]), text)))
    except (BrokenPipeError, ConnectionError, EOFError):
        return False
    return True


class _Pool:
    """``workers`` spawned processes, each fed chunks of items over its own pipe; the parent knows the
    items each one still has, so a dead worker (its sentinel fires, its pipe ends) names its item."""

    def __init__(self, fn, workers: int, initializer) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.procs, self.conns = [], []
        for _ in range(workers):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker_main, args=(child, fn, initializer), daemon=True)
            proc.start()
            child.close()
            self.procs.append(proc)
            self.conns.append(parent)

    def results(self, items: list, chunk: int, ordered: bool, describe, hint: str):
        """Yield ``fn(item)`` of every item (in item order if ``ordered``); raises ``WorkerDied``."""
        from multiprocessing.connection import wait

        todo = list(enumerate(items))[::-1]  # popped from the end: item order
        pending: dict[int, list[int]] = {w: [] for w in range(len(self.procs))}  # worker -> its items
        done: dict[int, Any] = {}
        next_out = 0
        for w in pending:
            self._feed(w, todo, pending, chunk, items, describe, hint)
        while any(pending.values()):
            busy = [w for w in pending if pending[w]]
            ready = wait([self.conns[w] for w in busy] + [self.procs[w].sentinel for w in busy])
            for w in busy:
                if self.conns[w] in ready or self.procs[w].sentinel in ready:
                    done.update(self._receive(w, pending, items, describe, hint))
                    if not pending[w]:
                        self._feed(w, todo, pending, chunk, items, describe, hint)
            if ordered:
                while next_out in done:
                    yield done.pop(next_out)
                    next_out += 1
            else:
                yield from done.values()
                done.clear()

    def _feed(self, w: int, todo: list, pending: dict, chunk: int, items: list, describe, hint: str) -> None:
        """Send worker ``w`` the next ``chunk`` items (none left: nothing)."""
        batch = [todo.pop() for _ in range(min(chunk, len(todo)))]
        if not batch:
            return
        pending[w] = [index for index, _ in batch]
        try:
            self.conns[w].send(batch)
        except (BrokenPipeError, ConnectionError, EOFError):
            raise self._died(w, items[pending[w][0]], describe, hint) from None

    def _receive(self, w: int, pending: dict, items: list, describe, hint: str) -> dict[int, Any]:
        """The results worker ``w`` has sent so far ``{index: result}``; raises the exception ``fn``
        raised, or ``WorkerDied`` if the worker is gone with items left."""
        got, messages = {}, []
        conn = self.conns[w]
        try:
            while len(messages) < len(pending[w]) and conn.poll():
                messages.append(conn.recv())
        except (EOFError, OSError):
            pass  # the pipe ended: the worker is gone (below)
        for status, index, value in messages:
            if status == "error":
                err, text = value
                raise err from RuntimeError(f"in a worker process:\n{text}")
            pending[w].remove(index)
            got[index] = value
        if pending[w] and not self.procs[w].is_alive():
            raise self._died(w, items[pending[w][0]], describe, hint)
        return got

    def _died(self, w: int, item, describe, hint: str) -> WorkerDied:
        """The one-line ``WorkerDied`` of worker ``w``, which was on ``item``."""
        self.procs[w].join(timeout=5)
        code = self.procs[w].exitcode
        how = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0
               else f"exit code {code}")
        return WorkerDied(f"a worker process died ({how}) on {describe(item)}; out of memory? {hint}", item)

    def close(self) -> None:
        """End every worker: ask the idle ones to stop, terminate the rest, and wait for all."""
        for conn, proc in zip(self.conns, self.procs):
            try:
                conn.send(None)
            except (OSError, ValueError):
                pass
        for proc in self.procs:
            proc.join(timeout=2)
            if proc.is_alive():
                proc.terminate()
                proc.join()
        for conn in self.conns:
            conn.close()
