"""Atomic file writes: a reader never sees a half-written file, and an interrupted write leaves the
previous file (or none) in place.

A file is written under a temporary name in its own folder (``.<name>.<random>.tmp``: same file
system, so the rename is atomic), flushed to disk (``fsync``) and renamed onto its final name with
``os.replace``; on any error the temporary file is removed. The standard library has the pieces
(``tempfile.mkstemp``, ``os.fsync``, ``os.replace``) but no function that puts them together.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator


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


def atomic_write_json(path: str | os.PathLike, doc, indent: int = 1) -> Path:
    """``doc`` as JSON (``indent``, a final newline) written with ``atomic_write_bytes``; the folder is
    created if missing. Returns ``path`` as a ``Path``."""
    import json

    return atomic_write_bytes(path, (json.dumps(doc, indent=indent) + "\n").encode())
