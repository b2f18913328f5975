"""docs/architecture.md stays complete: its ownership table names every module of the package and
its commands row every `depthpe` command, like docs/configuration.md names every config key."""

from __future__ import annotations

import re
from pathlib import Path

from depthpe.cli import COMMANDS
from depthpe.commands.bench import BENCHMARKS

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"


def ownership_rows() -> dict[str, str]:
    """First-cell path (e.g. ``depthpe/pe/``) -> the row's text, from the ``| path | owns |`` table."""
    text = DOC.read_text()
    start = text.index("| path | owns |")
    rows = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        first, _, rest = line.strip().strip("|").partition("|")
        for path in re.findall(r"`([^`]+)`", first):
            rows[path] = rest
    return rows


def _named(relative: str, rows: dict[str, str]) -> bool:
    """``depthpe/a/b.py`` is named by a row of its own, or by the row of a folder above it whose text
    names the rest of the path in backticks (`` `b.py` ``, `` `convert/b.py` ``; a command or
    benchmark module also by its name, `` `b` ``)."""
    if relative in rows:
        return True
    parts = relative.split("/")
    for i in range(1, len(parts)):
        folder, rest = "/".join(parts[:i]) + "/", "/".join(parts[i:])
        names = {f"`{rest}`", f"`{rest.removesuffix('.py').replace('_', '-')}`"}
        if folder in rows and any(name in rows[folder] for name in names):
            return True
    return False


def test_every_package_module_is_in_the_ownership_table():
    rows = ownership_rows()
    modules = [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "depthpe").rglob("*.py"))
               if p.name != "__init__.py"]
    assert len(modules) > 80
    missing = [m for m in modules if not _named(m, rows)]
    assert not missing, f"docs/architecture.md's ownership table does not name {missing}"


def test_every_command_and_benchmark_is_named():
    commands_row = ownership_rows()["depthpe/commands/"]
    missing = [name for name in COMMANDS if f"`{name}`" not in commands_row]
    assert not missing, f"the depthpe/commands/ row does not name the commands {missing}"
    bench_row = ownership_rows()["depthpe/bench/"]
    missing = [name for name in BENCHMARKS if f"`{name}`" not in bench_row]
    assert not missing, f"the depthpe/bench/ row does not name the benchmarks {missing}"


def test_the_package_root_holds_only_the_entry_points_the_page_names():
    """The root line of the page's package tree (``depthpe/  __init__ __main__ cli ...``) lists every
    module at the package root; anything else belongs in a folder."""
    text = DOC.read_text()
    line = next(line for line in text.splitlines() if line.startswith("depthpe/  "))
    named = set(line.split("(")[0].split()[1:])
    present = {p.stem for p in (ROOT / "depthpe").glob("*.py")}
    assert {"__init__", "cli", "train", "eval"} <= named
    assert present == named, f"modules at the package root: {sorted(present)}; the page names {sorted(named)}"
