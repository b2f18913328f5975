"""Rebuild ``index.json`` files from the scene files themselves (``depthpe index ROOT``).

Scene files written by other tools, copied together by hand or listed by an index in another
shape (a bare list, missing fields) cannot be read by training, evaluation or ``depthpe check``,
which trust only ``index.json`` (docs/scene-format.md). ``rebuild_indexes(root)`` finds every
folder under ``root`` that holds ``*.h5`` files, opens each file with a strict ``SceneReader``
(format attributes, required datasets, shapes within ``validation.MAX_FRAMES`` /
``MAX_FRAME_SIDE``, valid cameras: ``validation.camera_problems``), checks the entry it would list
(``validation.index_entry_problem``: field types, no scene id twice) and writes the folder's
index atomically. Files that fail are left out and reported with the reason.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .scene_file import INDEX_NAME, SceneFileError, SceneReader, index_entry, write_index
from .validation import index_entry_problem

__all__ = ["FolderResult", "index_folder", "scene_folders", "rebuild_indexes"]

BACKUP_SUFFIX = ".bak"


@dataclass
class FolderResult:
    """What ``index_folder`` did for one folder: the entries listed, the files ``skipped``
    (``[(file name, reason)]``), the dataset and split written into the index, ``backed_up``
    (an existing index that differed was kept as ``index.json.bak``) and
    ``written`` (False for a dry run or a folder without usable scenes)."""

    folder: str
    dataset: str = ""
    split: str = ""
    entries: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    backed_up: bool = False
    written: bool = False


def scene_folders(root: str | os.PathLike) -> list[Path]:
    """Folders under ``root`` (root included) that hold at least one visible ``*.h5`` file, sorted."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder")
    return sorted({p.parent for p in root.rglob("*.h5") if not p.name.startswith(".") and p.is_file()})


def _read_entry(path: Path) -> tuple[dict | None, dict, str]:
    """``(entry, attrs, "")`` for a usable scene file, else ``(None, {}, reason)``."""
    reader = SceneReader(path, strict=True)
    try:
        attrs = reader.attrs
        return index_entry(path.name, attrs), attrs, ""
    except SceneFileError as err:
        return None, {}, str(err).replace(f"{path}: ", "")
    except (OSError, KeyError, ValueError, TypeError) as err:
        return None, {}, f"unreadable: {err}"
    finally:
        reader.close()


def _common(values: list[str], fallback: str) -> str:
    """The value shared by all ``values``, else ``fallback`` (the folder's own name)."""
    return values[0] if len(set(values)) == 1 else fallback


def index_folder(folder: str | os.PathLike, *, dry_run: bool = False) -> FolderResult:
    """Rebuild ``folder/index.json`` from the folder's ``*.h5`` files (not its subfolders).

    The index's ``dataset`` and ``split`` are those the files agree on, else the names of the
    folder's parent and of the folder. Nothing is written when no file is usable or ``dry_run``.
    """
    folder = Path(folder)
    result = FolderResult(folder=str(folder))
    seen_paths: dict[str, int] = {}
    seen_ids: dict[str, int] = {}
    datasets, splits = [], []
    for path in sorted(p for p in folder.glob("*.h5") if not p.name.startswith(".")):
        entry, attrs, reason = _read_entry(path)
        if entry is not None:
            reason = index_entry_problem(entry, seen_paths, seen_ids, len(result.entries)) or ""
        if reason:
            result.skipped.append((path.name, reason))
            continue
        result.entries.append(entry)
        datasets.append(str(attrs["dataset"]))
        splits.append(str(attrs["split"]))
    result.dataset = _common(datasets, folder.parent.name)
    result.split = _common(splits, folder.name)
    if result.entries and not dry_run:
        result.backed_up = _back_up_old_index(folder, result)
        write_index(folder, result.entries, dataset=result.dataset, split=result.split)
        result.written = True
    return result


def _back_up_old_index(folder: Path, result: FolderResult) -> bool:
    """Keep an existing index that differs from the new one as ``index.json.bak``; True if so."""
    old = folder / INDEX_NAME
    if not old.is_file():
        return False
    try:
        doc = json.loads(old.read_text())
        same = isinstance(doc, dict) and doc.get("scenes") == sorted(result.entries, key=lambda e: e["path"])
    except (ValueError, OSError):
        same = False
    if not same:
        os.replace(old, old.with_name(INDEX_NAME + BACKUP_SUFFIX))
    return not same


def rebuild_indexes(root: str | os.PathLike, *, dry_run: bool = False) -> list[FolderResult]:
    """``index_folder`` for every folder of ``scene_folders(root)``; raises FileNotFoundError when
    ``root`` is not a folder."""
    return [index_folder(folder, dry_run=dry_run) for folder in scene_folders(root)]
