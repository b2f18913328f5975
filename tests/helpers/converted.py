"""Comparing two converted datasets (``depthpe convert`` outputs) file by file."""

from __future__ import annotations

import filecmp
import json
from pathlib import Path


def dataset_files(root: Path) -> dict[str, Path]:
    """Relative path -> path of every file a conversion leaves under ``root``, but the summary (its
    timings differ from run to run) and the output-folder owner's lock and manifest (bookkeeping of
    the command, not data: ``depthpe convert`` leaves them, the ``convert`` function does not)."""
    from depthpe.files import LOCK_FILE
    from depthpe.files.output_folder import MANIFEST

    skip = {"convert_summary.json", LOCK_FILE, MANIFEST}
    return {p.relative_to(root).as_posix(): p for p in sorted(Path(root).rglob("*"))
            if p.is_file() and p.name not in skip}


def assert_same_dataset(a: Path, b: Path) -> None:
    """The same files under ``a`` and ``b``: equal JSON (split.json, index.json), equal bytes (scene files)."""
    fa, fb = dataset_files(a), dataset_files(b)
    assert sorted(fa) == sorted(fb)
    for name in fa:
        if name.endswith(".json"):
            assert json.loads(fa[name].read_text()) == json.loads(fb[name].read_text()), name
        else:
            assert filecmp.cmp(fa[name], fb[name], shallow=False), name
