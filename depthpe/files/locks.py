"""One writer per output folder: the folder's exclusive kernel lock (``lock_folder``)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

LOCK_FILE = ".lock"
_NO_LOCKS = {errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP}  # what flock says where locks do not work


class FolderInUse(Exception):
    """Another live process holds the folder's lock."""


class LocksUnsupported(OSError):
    """The filesystem refuses file locks (``flock``: ENOLCK, ENOSYS, EOPNOTSUPP); str = its error."""


def lock_folder(folder: str | os.PathLike):
    """Take the exclusive kernel lock ``folder/.lock`` without waiting (``flock`` through ``filelock``;
    the kernel releases it when the holder ends in any way, so it is never stale), creating ``folder``.
    Returns the held ``FileLock`` (``.release()`` it). Raises ``FolderInUse`` when a live process
    holds it, ``LocksUnsupported`` where the filesystem refuses locks (some NFS setups); other
    OSErrors propagate (a read-only folder: the caller reports it). The ``.lock`` file stays after release."""
    from filelock import FileLock, Timeout

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(folder / LOCK_FILE))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise FolderInUse(str(folder)) from None
    except OSError as err:
        if err.errno not in _NO_LOCKS:
            raise
        raise LocksUnsupported(str(err)) from err
    return lock
