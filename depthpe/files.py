"""Safe file names and atomic file writes.

Every string that comes from data (scene ids, dataset and source names, frame and image names,
camera names) becomes part of a file path only through ``safe_component``: one path component,
never a separator, ``..``, a hidden name or an absolute path, so no name from a dataset can write
outside the output folder.

Atomic writes: a reader never sees a half-written file, and an interrupted write leaves
the previous file (or none) in place.

A file is written under a temporary name in its own folder (``.<name>.<random>.tmp``: same file
system, so the rename is atomic), flushed to disk (``fsync``) and renamed onto its final name with
``os.replace``; on any error the temporary file is removed. The standard library has the pieces
(``tempfile.mkstemp``, ``os.fsync``, ``os.replace``) but no function that puts them together.

Folder locks: one writer per output folder (``lock_folder``).

This module is the bottom layer of depthpe: standard library (and ``filelock``) only, no torch, no h5py.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Iterator

__all__ = ["read_json", "read_record", "safe_component", "LOCK_FILE", "FolderInUse", "LocksUnsupported", "lock_folder", "atomic_target", "atomic_write_bytes", "output_folder_problem"]

MAX_COMPONENT_CHARS = 120  # characters of a safe component (file systems allow 255 bytes)
_UNSAFE = re.compile(r"[^A-Za-z0-9._+=@,-]+")


def safe_component(name: str) -> str:
    """``name`` as one safe file-name component: returned unchanged when it already is one (letters,
    digits and ``._+=@,-``, not starting with ``.``, at most ``MAX_COMPONENT_CHARS``); otherwise every
    run of other characters (``/``, ``\\``, spaces, control and non-ASCII characters) becomes ``_``,
    leading dots are dropped, the result is cut to length and ``-`` + 8 hex digits of the SHA-256 of
    the original are appended, so that two different names never share a component.

    ``safe_component("scene_0001") == "scene_0001"``; ``safe_component("x/../../tmp/victim")`` is
    ``"x_.._.._tmp_victim-<hash>"``, a plain file name inside whatever folder it is joined to."""
    name = str(name)
    if name and not name.startswith(".") and len(name) <= MAX_COMPONENT_CHARS and not _UNSAFE.search(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    cleaned = _UNSAFE.sub("_", name).lstrip(".")[: MAX_COMPONENT_CHARS - 9] or "_"
    return f"{cleaned}-{digest}"


@contextlib.contextmanager
def atomic_target(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary file name in ``path``'s folder (created if missing) for the block to write;
    when the block ends without error, fsync that file and rename it onto ``path``; on any error
    (``KeyboardInterrupt`` included) remove it and re-raise. For writers that want a file name
    (``h5py.File``, ``plyfile``, ``savefig``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file in the same folder, fsync, rename);
    returns ``path`` as a ``Path``."""
    path = Path(path)
    with atomic_target(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
    return path


def read_json(path: str | os.PathLike):
    """The JSON value of ``path``'s UTF-8 text. OSError as raised; ``ValueError`` with one line for
    text that is not UTF-8 or not JSON, and for JSON nested deeper than Python's recursion limit (a
    "nesting bomb" such as 100000 ``[``, on which ``json.loads`` raises ``RecursionError``)."""
    import json

    text = Path(path).read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply (more levels of [ or { than any real file has)") from None
    except ValueError as err:
        raise ValueError(str(err).splitlines()[0]) from None


def read_record(path: str | os.PathLike) -> dict | None:
    """A small JSON object that a command keeps next to its outputs (a lock holder, a folder's
    manifest): the dict, None when the file does not exist, {} when it cannot be read or is not an
    object (a record is advisory: its reader decides what an unreadable one means)."""
    try:
        doc = read_json(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def output_folder_problem(path: str | os.PathLike, label: str, fix: str = "give a folder path") -> str | None:
    """Why ``path`` cannot be an output folder, as one line starting with ``label`` (``--out``,
    ``output_dir``), or None: ``path`` or one of its parents exists and is not a folder, or the
    nearest existing folder on the way is not writable (read-only mount, no permission; checked with
    ``os.access``, so the superuser passes on a writable disk). ``fix``: what to do about a file."""
    path = Path(path)
    for existing in (path, *path.parents):
        if not existing.exists():
            continue
        if not existing.is_dir():
            if existing != path:
                return f"{label} {path} cannot be a folder: {existing} is a file ({fix})"
            return f"{label} {path} is a file, not a folder ({fix})"
        if not os.access(existing, os.W_OK | os.X_OK):
            return (f"{label} {path}: {existing} is not writable (a read-only file system or no permission); "
                    "choose a folder you can write to")
        return None
    return None


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
