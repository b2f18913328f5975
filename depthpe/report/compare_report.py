"""``report.html`` of ``depthpe compare --out``: its notes, one table per dataset (the cells of
compare.md, ``depthpe.analysis.compare.compare_cells``; for ``depthpe rmvd`` folders the one table of
``depthpe.analysis.rmvd_compare.rmvd_cells``), the inputs and their groups, and the validation
curves (curves/*.png) embedded."""

from __future__ import annotations

from pathlib import Path

from ..analysis.compare import COLUMNS, compare_cells
from .html import render, write_page

__all__ = ["write_compare_report"]


def _notes(markdown: str) -> list[str]:
    """The note lines at the top of compare.md (before the first table's heading)."""
    head = markdown.split("\n### ", 1)[0]
    return [line.replace("`", "") for line in head.splitlines() if line.strip() and not line.startswith("###")]


def write_compare_report(result: dict, markdown: str, meta: dict, out_dir: str | Path,
                         curves: list[Path] = (), columns=COLUMNS, tables: dict | None = None) -> Path:
    """Write ``out_dir/report.html`` for a ``run_compare`` (result, markdown, meta) and the curve
    PNGs ``curves``; returns its path. ``columns`` and ``tables`` ({title: rows of cells}; None =
    ``compare_cells(result)``): the tables of another comparison (``rmvd_compare.rmvd_cells``)."""
    page = render("compare.html.j2", title=f"depthpe compare: grouped by {meta.get('group_by')}",
                  notes=_notes(markdown), columns=columns, tables=compare_cells(result) if tables is None else tables,
                  inputs=meta.get("inputs", []), curves=[Path(c) for c in curves])
    return write_page(Path(out_dir) / "report.html", page)
