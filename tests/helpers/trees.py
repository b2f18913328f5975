"""Hashing a folder tree, to show that a command wrote nothing outside its output folder."""

from __future__ import annotations

import hashlib
from pathlib import Path


def tree_hashes(root: Path, skip: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` outside ``skip`` (paths relative to ``root``)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and skip not in p.parents}


def assert_only_inside(root: Path, out: Path, before: dict[str, str]) -> None:
    """Nothing under ``root`` outside ``out`` differs from ``before`` (``tree_hashes(root, out)``), and
    every path under ``out`` resolves inside it (no link out)."""
    assert tree_hashes(root, out) == before, "a file outside the output folder was created, changed or removed"
    assert all(out in p.resolve().parents or p.resolve() == out for p in out.rglob("*"))
