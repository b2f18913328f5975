"""One training run per output folder: the run holds a kernel lock on ``<output_dir>/.lock``.

Two runs writing one folder interleave checkpoints and corrupt each other. The run takes an
exclusive ``flock`` on ``.lock`` (through ``filelock``) and holds it for its lifetime; the kernel
releases it when the process ends in any way (SIGKILL, a crash, a container restart), so a lock is
never stale and nothing has to guess from a pid whether its holder still lives (a restarted
container is PID 1 again, and a pid on another host cannot be checked at all). The ``.lock`` file
itself stays in place after a run (removing a lock file breaks the exclusion for a run waiting on
it). ``.lock.owner`` records the holder's host, pid and start time for the refusal message only; one
left behind by a run that did not end cleanly is reported when the next run takes over.

On a filesystem whose locks do not work (``flock`` refused, e.g. some NFS setups) the run goes on
without the lock and logs a warning; see docs/training.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path

from filelock import FileLock, Timeout

from ..config import ConfigError
from ..files import LOCK_FILE, FolderInUse, LocksUnsupported, lock_folder, read_record

__all__ = ["LOCK_FILE", "OWNER_FILE", "lock_owner", "lock_problem", "acquire_lock", "release_lock", "run_lock"]

OWNER_FILE = ".lock.owner"


def lock_owner(output_dir: str | Path) -> dict | None:
    """The holder recorded in ``output_dir/.lock.owner`` ({host, pid, since}), {} if unreadable,
    None if there is no record (``depthpe.files.read_record``)."""
    return read_record(Path(output_dir) / OWNER_FILE)


def _describe(owner: dict | None) -> str:
    if not owner:
        return "an unknown run"
    return f"pid {owner.get('pid')} on {owner.get('host')}, since {owner.get('since')}"


def _in_use(output_dir: Path) -> str:
    return (f"output_dir {output_dir} is in use by another training run ({_describe(lock_owner(output_dir))}) "
            f"(wait for it to finish, or use another output_dir)")


def lock_problem(output_dir: str | Path) -> str | None:
    """Why ``output_dir`` cannot be trained into now (a live process holds its lock), or None. Takes
    the lock for a moment to find out; never creates ``output_dir``."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return None
    probe = FileLock(str(output_dir / LOCK_FILE))
    try:
        probe.acquire(timeout=0)
    except Timeout:
        return _in_use(output_dir)
    except OSError:  # no locks here (or no write access): acquire_lock reports it
        return None
    probe.release()
    return None


def acquire_lock(output_dir: Path) -> tuple[FileLock | None, str | None]:
    """Lock ``output_dir/.lock`` for this process and record it as the holder. Returns the held lock
    and a note to log: that a run which did not end cleanly left its record, or, where the
    filesystem refuses locks, that the run goes on without one (the lock is then None). Raises
    ``ConfigError`` when a live process holds the lock."""
    try:
        lock = lock_folder(output_dir)
    except FolderInUse:
        raise ConfigError(_in_use(output_dir)) from None
    except LocksUnsupported as err:
        return None, (f"could not lock {output_dir / LOCK_FILE} ({err}): file locks do not work on this filesystem, "
                      "so nothing stops a second run from writing into this output_dir; make sure only one run "
                      "trains into it (docs/training.md)")
    left = lock_owner(output_dir)
    note = f"took over the lock of a run that is gone ({_describe(left)})" if left is not None else None
    record = {"host": socket.gethostname(), "pid": os.getpid(), "since": time.strftime("%Y-%m-%d %H:%M:%S")}
    (output_dir / OWNER_FILE).write_text(json.dumps(record))
    return lock, note


def release_lock(lock: FileLock | None, output_dir: Path) -> None:
    """Remove this run's holder record and release ``lock`` (the ``.lock`` file stays)."""
    if lock is None:
        return
    (output_dir / OWNER_FILE).unlink(missing_ok=True)
    lock.release()


@contextlib.contextmanager
def run_lock(output_dir: str | Path, accelerator):
    """Hold the run folder's lock for the duration; yields the take-over note (or None). The main
    process takes it; every process learns whether it could, so all stop together with ``ConfigError``."""
    import torch

    output_dir, problem, note, lock = Path(output_dir), None, None, None
    if accelerator.is_main_process:
        try:
            lock, note = acquire_lock(output_dir)
        except ConfigError as err:
            problem = str(err)
    failed = accelerator.reduce(torch.tensor(float(problem is not None), device=accelerator.device), reduction="sum")
    if float(failed) > 0:
        raise ConfigError(problem or f"the main process could not lock {output_dir}")
    try:
        yield note
    finally:
        release_lock(lock, output_dir)
