"""Safe paths: a name from data as one harmless file-name component (``safe_component``), and why a
path cannot be an output folder (``output_folder_problem``). Standard library only."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

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


def output_file_problem(path: str | os.PathLike, label: str) -> str | None:
    """Why ``path`` cannot be an output file (``--json FILE``), as one line starting with ``label``, or
    None: it is a folder, or its folder cannot be one (``output_folder_problem``). Checked before a
    command's work, so that hours of a benchmark do not end in an unwritable result."""
    path = Path(path)
    if path.is_dir():
        return f"{label} {path} is a folder, not a file (give a file path, e.g. {path / 'results.json'})"
    return output_folder_problem(path.parent, f"{label} {path}: its folder")


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
