"""Which run a run folder and a checkpoint belong to: run ids, what of a run a folder holds, and
moving an earlier run aside (``depthpe train --overwrite``).

Every run has an id (``new_run_id``: 32 hex digits of a uuid4), given when it starts fresh and kept
when it resumes: the main process writes it to ``<output_dir>/run.json`` ({"run_id"}) at the start,
and it is in the ``trainer_state.json`` of every checkpoint and of ``final/`` (``"run_id"``).
Folders and checkpoints written before ids existed have none: such a checkpoint still resumes, and
the run takes the id of the folder's ``run.json`` or a new one.

A folder *holds a run* when it has what a run's progress leaves (``run_remains``): complete
checkpoints, ``final/``, a validation history or manifest. ``config.yaml``, ``train.log`` and
``logs/`` alone (a start that failed before its first checkpoint) do not count.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

from ..files import LOCK_FILE, atomic_write_bytes
from .checkpoint_files import STATE_FILE
from .checkpoints import checkpoint_dirs
from .lock import OWNER_FILE
from .validation import VAL_HISTORY, VAL_MANIFEST

__all__ = ["RUN_FILE", "new_run_id", "read_run_id", "write_run_id", "checkpoint_run_id", "run_remains",
           "aside_path", "move_run_aside"]

RUN_FILE = "run.json"
_KEPT_IN_PLACE = (LOCK_FILE, OWNER_FILE)  # the lock stays where it is: moving it would break the exclusion


def new_run_id() -> str:
    """A new run id: the 32 hex digits of a random uuid4."""
    return uuid.uuid4().hex


def _json_id(path: Path) -> str | None:
    """The string ``run_id`` of the JSON file ``path``, or None (no file, unreadable, no id)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    value = doc.get("run_id") if isinstance(doc, dict) else None
    return value if isinstance(value, str) and value else None


def read_run_id(output_dir: str | Path) -> str | None:
    """The id of the run in ``output_dir`` (its ``run.json``), or None (none, or an older version's folder)."""
    return _json_id(Path(output_dir) / RUN_FILE)


def write_run_id(output_dir: str | Path, run_id: str) -> Path:
    """Write ``output_dir/run.json`` ({"run_id": run_id}) atomically; returns its path."""
    return atomic_write_bytes(Path(output_dir) / RUN_FILE, (json.dumps({"run_id": run_id}) + "\n").encode())


def checkpoint_run_id(checkpoint: str | Path) -> str | None:
    """The run id in a checkpoint's (or ``final/``'s) trainer_state.json, or None (older versions)."""
    return _json_id(Path(checkpoint) / STATE_FILE)


def run_remains(output_dir: str | Path) -> list[str]:
    """What of a run ``output_dir`` holds, as short names ("checkpoints/ (2)", "final/",
    "val_history.jsonl", "val_manifest.json"); empty when it holds no run."""
    out = Path(output_dir)
    found = []
    checkpoints = checkpoint_dirs(out)
    if checkpoints:
        found.append(f"checkpoints/ ({len(checkpoints)})")
    if (out / "final").is_dir():
        found.append("final/")
    history = out / VAL_HISTORY
    if history.is_file() and history.stat().st_size > 0:
        found.append(VAL_HISTORY)
    if (out / VAL_MANIFEST).is_file():
        found.append(VAL_MANIFEST)
    return found


def aside_path(output_dir: str | Path, now: float | None = None) -> Path:
    """Where ``move_run_aside`` puts the run of ``output_dir``: the sibling folder
    ``<output_dir>.old-YYYYmmdd-HHMMSS`` (local time ``now``; ``-2``, ``-3``, ... when taken)."""
    out = Path(output_dir)
    base = out.with_name(f"{out.name}.old-{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}")
    target, n = base, 1
    while target.exists():
        n += 1
        target = base.with_name(f"{base.name}-{n}")
    return target


def move_run_aside(output_dir: str | Path) -> Path | None:
    """Move everything in ``output_dir`` but its lock files into ``aside_path(output_dir)`` (one
    rename per entry, on the same filesystem; call while holding the run lock); returns that folder,
    or None when there was nothing to move."""
    out = Path(output_dir)
    entries = sorted(p for p in out.iterdir() if p.name not in _KEPT_IN_PLACE) if out.is_dir() else []
    if not entries:
        return None
    target = aside_path(out)
    target.mkdir()
    for entry in entries:
        os.replace(entry, target / entry.name)
    return target
