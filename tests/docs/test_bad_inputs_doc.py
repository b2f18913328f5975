"""docs/bad-inputs.md stays true to itself: the number of cases it states is the number of rows of
its table, the rows are numbered 1..N, and every row names at least one test
(``tests/FILE.py::test_name``) that exists: the file is there and defines ``def test_name`` (for a
parametrized test the base name, without ``[...]``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "bad-inputs.md"

_COUNT = re.compile(r"The table below has (\d+) cases, and every row names the test")
_TEST_REF = re.compile(r"tests/([\w/]+\.py)::(\w+)")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")  # a pipe escaped as \| belongs to the cell's text


def _cells(line: str) -> list[str]:
    return [c.strip() for c in _CELL_SPLIT.split(line.strip().strip("|"))]


def case_rows(text: str) -> list[list[str]]:
    """The cells of each body row of the table whose header starts with ``| # |``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| # |"))
    header = _cells(lines[start])
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = _cells(line)
        assert len(cells) == len(header), f"row with {len(cells)} cells instead of {len(header)}: {line[:80]}"
        rows.append(cells)
    return rows


def stated_count(text: str) -> int:
    match = _COUNT.search(" ".join(text.replace("*", "").split()))
    assert match, "docs/bad-inputs.md must say 'The table below has N cases, and every row names the test ...'"
    return int(match.group(1))


def missing_tests(root: Path, refs) -> list[str]:
    """The ``tests/FILE.py::name`` references (pairs of file and name) that do not exist under ``root``."""
    missing = []
    for file, name in refs:
        path = root / "tests" / file
        if not path.is_file():
            missing.append(f"tests/{file}::{name} (no such file)")
        elif not re.search(rf"^\s*(?:async\s+)?def {re.escape(name)}\(", path.read_text(), re.M):
            missing.append(f"tests/{file}::{name} (no such test)")
    return missing


def test_the_stated_count_is_the_number_of_rows_numbered_in_order():
    text = DOC.read_text()
    rows = case_rows(text)
    assert len(rows) == stated_count(text), f"the page says {stated_count(text)} cases, its table has {len(rows)} rows"
    assert [r[0] for r in rows] == [str(i) for i in range(1, len(rows) + 1)]


def test_every_row_names_tests_that_exist():
    rows = case_rows(DOC.read_text())
    without = [r[0] for r in rows if not _TEST_REF.findall(r[-1])]
    assert not without, f"rows without a tests/FILE.py::name in their test column: {without}"
    missing = missing_tests(ROOT, [ref for r in rows for ref in _TEST_REF.findall(r[-1])])
    assert not missing, "docs/bad-inputs.md names tests that do not exist:\n" + "\n".join(missing)


def test_the_checker_finds_wrong_counts_and_missing_tests(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("@p\ndef test_one(x):\n    pass\n\n\nasync def test_two():\n    pass\n")
    text = ("The table below has **2** cases, and every row names the test.\n\n"
            "| # | bad input | where | what the user sees | test |\n|---|---|---|---|---|\n"
            "| 1 | a | check | `\\|RR^T-I\\|=…` | `tests/test_a.py::test_one`, `tests/test_a.py::test_two` |\n"
            "| 2 | b | load | `x` | `tests/test_a.py::test_three`, `tests/test_b.py::test_one` |\n\nafter\n")
    rows = case_rows(text)
    assert len(rows) == stated_count(text) == 2 and rows[0][3] == "`\\|RR^T-I\\|=…`"
    refs = [ref for r in rows for ref in _TEST_REF.findall(r[-1])]
    assert missing_tests(tmp_path, refs) == ["tests/test_a.py::test_three (no such test)",
                                             "tests/test_b.py::test_one (no such file)"]
    assert stated_count(text.replace("**2**", "**3**")) == 3
