"""One training run per output folder: ``<output_dir>/.lock`` names the run that writes there.

Two runs writing one folder interleave checkpoints and corrupt each other. The lock file is created
exclusively (``O_CREAT | O_EXCL``) and holds the owner's host, pid and start time, so a refusal can
say who holds the folder. A lock left by a process that no longer exists on this host is taken over
with a message; a lock held by another host cannot be checked and is refused (delete the file if
that run is gone). Written by hand because ``filelock``'s kernel locks record no owner to report
and its marker files expose the owner only through private modules.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path

from ..config import ConfigError

__all__ = ["LOCK_FILE", "lock_owner", "lock_problem", "acquire_lock", "release_lock", "run_lock"]

LOCK_FILE = ".lock"


def lock_owner(output_dir: str | Path) -> dict | None:
    """The owner recorded in ``output_dir/.lock`` ({host, pid, since}), {} if unreadable, None if no lock."""
    path = Path(output_dir) / LOCK_FILE
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _alive(owner: dict) -> bool:
    """Whether the owning process may still run: True for another host (cannot tell) or a live pid."""
    if owner.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(owner.get("pid", -1)), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, OverflowError):
        return True
    return True


def lock_problem(output_dir: str | Path) -> str | None:
    """Why ``output_dir`` cannot be trained into now (a live run holds its lock), or None."""
    owner = lock_owner(output_dir)
    if owner is None or (owner and not _alive(owner)):
        return None
    who = f"pid {owner.get('pid')} on {owner.get('host')}, since {owner.get('since')}" if owner else "an unknown run"
    return (f"output_dir {output_dir} is in use by another training run ({who}) (wait for it to finish, use another "
            f"output_dir, or delete {Path(output_dir) / LOCK_FILE} if that run is gone)")


def acquire_lock(output_dir: Path) -> str | None:
    """Create ``output_dir/.lock`` for this process; returns a note when a dead run's lock was taken
    over. Raises ``ConfigError`` when a live run holds it."""
    output_dir.mkdir(parents=True, exist_ok=True)
    path, note = output_dir / LOCK_FILE, None
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            problem, owner = lock_problem(output_dir), lock_owner(output_dir)
            if problem:
                raise ConfigError(problem) from None
            note = f"took over the lock of a run that is gone ({owner or 'unreadable lock file'})"
            path.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as f:
            json.dump({"host": socket.gethostname(), "pid": os.getpid(), "since": time.strftime("%Y-%m-%d %H:%M:%S")}, f)
        return note
    raise ConfigError(f"could not lock {output_dir} (another run took it at the same moment; try again)")


def release_lock(output_dir: Path) -> None:
    """Remove ``output_dir/.lock`` if this process holds it."""
    owner = lock_owner(output_dir)
    if owner and owner.get("pid") == os.getpid() and owner.get("host") == socket.gethostname():
        (output_dir / LOCK_FILE).unlink(missing_ok=True)


@contextlib.contextmanager
def run_lock(output_dir: str | Path, accelerator):
    """Hold the run folder's lock for the duration; yields the take-over note (or None). The main
    process takes it; every process learns whether it could, so all stop together with ``ConfigError``."""
    import torch

    output_dir, problem, note = Path(output_dir), None, None
    if accelerator.is_main_process:
        try:
            note = acquire_lock(output_dir)
        except ConfigError as err:
            problem = str(err)
    failed = accelerator.reduce(torch.tensor(float(problem is not None), device=accelerator.device), reduction="sum")
    if float(failed) > 0:
        raise ConfigError(problem or f"the main process could not lock {output_dir}")
    try:
        yield note
    finally:
        if accelerator.is_main_process:
            release_lock(output_dir)
