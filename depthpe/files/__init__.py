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

One job per module, every name above importable from ``depthpe.files``: ``paths``, ``atomic``,
``records``, ``locks``; ``output_folder`` (the one owner of a command's output folder) builds on them.
The bottom layer of depthpe: standard library (and ``filelock``) only, no torch, no h5py.
"""

from __future__ import annotations

from .atomic import atomic_target, atomic_write_bytes, atomic_write_json
from .locks import LOCK_FILE, FolderInUse, LocksUnsupported, lock_folder
from .paths import MAX_COMPONENT_CHARS, output_file_problem, output_folder_problem, safe_component
from .records import read_json, read_record

__all__ = ["read_json", "read_record", "safe_component", "MAX_COMPONENT_CHARS", "LOCK_FILE", "FolderInUse", "LocksUnsupported", "lock_folder",
           "atomic_target", "atomic_write_bytes", "atomic_write_json", "output_folder_problem",
           "output_file_problem"]
