"""The files of a comparison, one writer for ``depthpe compare --out`` and the studies that compare
their own folders (e.g. the camera-noise sweep): print the Markdown, then compare.md, compare.json,
the validation curves of runs that have a history and report.html."""

from __future__ import annotations

from typing import Sequence

__all__ = ["Comparison", "write_comparison"]


class Comparison:
    """A comparison's result (dict), its Markdown, its meta (the inputs read), the report's table
    columns and cells: what every ``run_*_compare`` function of analysis and the studies gives."""

    def __init__(self, result: dict, markdown: str, meta: dict, columns: Sequence, tables: Sequence):
        self.result, self.markdown, self.meta, self.columns, self.tables = result, markdown, meta, columns, tables


def write_comparison(comparison: Comparison, out: str | None, figures: Sequence = ()) -> dict:
    """Print ``comparison``'s tables and, with ``out``, write compare.md, compare.json, the
    validation curves of runs with a history and report.html (which also shows ``figures``: drawn
    figures with a ``png`` path, e.g. a sweep's). Returns the result."""
    from ..report.compare_report import write_compare_report
    from .compare import write_compare
    from .plotting import write_curves

    print(comparison.markdown)
    if out:
        paths = write_compare(comparison.result, comparison.markdown, out, comparison.meta)
        print(f"wrote {paths['markdown']} and {paths['json']}")
        curves = write_curves(comparison.meta, out)
        for figure in curves:
            print(f"wrote {figure.png} and {figure.svg} (validation curves)")
        pngs = [f.png for f in [*figures, *curves]]
        report = write_compare_report(comparison.result, comparison.markdown, comparison.meta, out, pngs,
                                      comparison.columns, comparison.tables)
        print(f"wrote {report} (open it in a browser)")
    return comparison.result
