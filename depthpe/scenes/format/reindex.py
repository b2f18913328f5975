"""Rebuild ``index.json`` files from the scene files themselves (``depthpe index ROOT``).

Scene files written by other tools, copied together by hand or listed by an index in another
shape (a bare list, missing fields) cannot be read by training, evaluation or ``depthpe check``,
which trust only ``index.json`` (docs/scene-format.md). ``rebuild_indexes(root)`` finds every
folder under ``root`` that holds ``*.h5`` files, opens each file with a strict ``SceneReader``
(format attributes, required datasets, shapes within ``validation.MAX_FRAMES`` /
``MAX_FRAME_SIDE``, valid cameras: ``validation.camera_problems``), checks the entry it would list
(``validation.index_entry_problem``: field types, no scene id twice) and writes the folder's
index atomically. Files that fail, corrupt or truncated ones included, are left out and reported
with the reason. The files are opened in parallel worker processes when there are many
(``parallel.ordered_map``); the entries are then checked in file order, so the result does not
depend on the worker count.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..parallel import ordered_map
from .scene_file import INDEX_NAME, SceneFileError, SceneReader, index_entry, write_index
from .limits import index_entry_problem

__all__ = ["FolderResult", "index_folder", "scene_folders", "rebuild_indexes"]

BACKUP_SUFFIX = ".bak"

# Files per worker process at the least: a spawned worker starts in 0.3 s on a quiet machine and 1-2 s
# on a busy one, the time of opening some 1000 scene files, so fewer files than this are read in the
# calling process.
FILES_PER_WORKER = 1000


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


def _read_entry(path: Path) -> tuple[dict | None, str, str, str]:
    """``(entry, dataset, split, "")`` for a usable scene file, else ``(None, "", "", reason)``.
    Never raises: a file that cannot be read in any way (corrupt, truncated) is a reason."""
    reader = SceneReader(path, strict=True)
    try:
        attrs = reader.attrs
        return index_entry(path.name, attrs), str(attrs["dataset"]), str(attrs["split"]), ""
    except SceneFileError as err:
        return None, "", "", str(err).replace(f"{path}: ", "")
    except Exception as err:  # noqa: BLE001 - one bad file must never stop the index of the others
        return None, "", "", f"unreadable: {err}"
    finally:
        reader.close()


def _common(values: list[str], fallback: str) -> str:
    """The value shared by all ``values``, else ``fallback`` (the folder's own name)."""
    return values[0] if len(set(values)) == 1 else fallback


def _scene_files(folder: Path) -> list[Path]:
    """The visible ``*.h5`` files of ``folder`` (not its subfolders), sorted."""
    return sorted(p for p in folder.glob("*.h5") if not p.name.startswith("."))


def _read_entries(files: list[Path], workers: int, progress: bool) -> list[tuple]:
    """``_read_entry`` of every file, in order (in ``workers`` processes: ``parallel.ordered_map``)."""
    return ordered_map(_read_entry, files, workers=workers, progress=progress, desc="indexing scene files",
                       unit="file", min_per_worker=FILES_PER_WORKER, describe=lambda path: f"scene file {path}")


def index_folder(folder: str | os.PathLike, *, dry_run: bool = False, workers: int = 1,
                 progress: bool = False) -> FolderResult:
    """Rebuild ``folder/index.json`` from the folder's ``*.h5`` files (not its subfolders).

    The index's ``dataset`` and ``split`` are those the files agree on, else the names of the
    folder's parent and of the folder. Nothing is written when no file is usable or ``dry_run``.
    ``workers`` > 1 opens the files in that many processes; the result is the same.
    """
    folder = Path(folder)
    files = _scene_files(folder)
    return _folder_result(folder, files, _read_entries(files, workers, progress), dry_run)


def _folder_result(folder: Path, files: list[Path], reads: list[tuple], dry_run: bool) -> FolderResult:
    """Validate the entries ``reads`` (``_read_entry`` of each of ``files``) in file order, and write
    the folder's index unless ``dry_run`` or none is usable (``index_folder``)."""
    result = FolderResult(folder=str(folder))
    seen_paths: dict[str, int] = {}
    seen_ids: dict[str, int] = {}
    datasets, splits = [], []
    for path, (entry, dataset, split, reason) in zip(files, reads):
        if entry is not None:
            reason = index_entry_problem(entry, seen_paths, seen_ids, len(result.entries)) or ""
        if reason:
            result.skipped.append((path.name, reason))
            continue
        result.entries.append(entry)
        datasets.append(dataset)
        splits.append(split)
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


def rebuild_indexes(root: str | os.PathLike, *, dry_run: bool = False, workers: int = 1,
                    progress: bool = False) -> list[FolderResult]:
    """``index_folder`` for every folder of ``scene_folders(root)``; raises FileNotFoundError when
    ``root`` is not a folder. The files of all folders are opened in one pass (``workers``
    processes, one progress bar), then each folder's index is validated and written in turn."""
    folders = scene_folders(root)
    files = {folder: _scene_files(folder) for folder in folders}
    reads = iter(_read_entries([p for folder in folders for p in files[folder]], workers, progress))
    return [_folder_result(folder, files[folder], [next(reads) for _ in files[folder]], dry_run)
            for folder in folders]
