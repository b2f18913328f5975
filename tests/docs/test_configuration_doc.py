"""docs/configuration.md stays complete: every key of the run-config schema has a row with its
default, and every bad configuration of BAD_CONFIGS (tests/helpers/bad_configs.py) is in the
"Bad configurations" table."""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

import yaml

from depthpe.model.config import PRESETS, DepthModelConfig
from depthpe.run.schema import RunConfig
from tests.helpers.bad_configs import BAD_CONFIGS

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"

# list[SourceConfig] fields are documented per entry, with N standing for the list index.
_INDEX = "N"


def schema_keys(cls=RunConfig, prefix: str = "") -> dict[str, object]:
    """Every leaf key of a config dataclass (``section.key``; list-of-dataclass entries as
    ``section.key.N.sub``) with its default (``dataclasses.MISSING`` when it has none)."""
    hints = typing.get_type_hints(cls)
    out: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        hint = hints[f.name]
        args = typing.get_args(hint)
        if dataclasses.is_dataclass(hint):
            out.update(schema_keys(hint, f"{key}."))
        elif typing.get_origin(hint) is list and args and dataclasses.is_dataclass(args[0]):
            out[key] = []  # the list itself, and each field of its entries
            out.update(schema_keys(args[0], f"{key}.{_INDEX}."))
        elif f.default is not dataclasses.MISSING:
            out[key] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[key] = f.default_factory()
        else:
            out[key] = dataclasses.MISSING
    return out


def _rows(text: str) -> dict[str, list[str]]:
    """Table rows of the page by each key named in their first cell (a cell may name several)."""
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for key in re.findall(r"`([^`]+)`", cells[0]):
            rows.setdefault(key, cells)
    return rows


def _value(cell: str):
    """The value written in a table cell such as `` `1e-4` `` or `` `[2, 24]` ``."""
    match = re.fullmatch(r"`([^`]*)`", cell)
    assert match, f"expected one value in backticks, got {cell!r}"
    return yaml.safe_load(match.group(1))


def _same(written, expected) -> bool:
    if isinstance(expected, tuple):
        expected = list(expected)
    if isinstance(expected, float) and isinstance(written, str):  # PyYAML reads 1e-4 as a string
        written = float(written)
    if isinstance(expected, list) and isinstance(written, list):
        return len(written) == len(expected) and all(_same(w, e) for w, e in zip(written, expected))
    return written == expected and type(written) is type(expected) or (
        isinstance(expected, float) and isinstance(written, (int, float)) and float(written) == expected)


def test_every_schema_key_is_documented_with_its_default():
    rows = _rows(DOC.read_text())
    keys = schema_keys()
    assert len(keys) > 90 and "data.sources.N.root" in keys and "data.color_jitter.hue" in keys
    missing = [k for k in keys if k not in rows]
    assert not missing, f"docs/configuration.md has no table row for {missing}"
    model_fields = {f.name for f in dataclasses.fields(DepthModelConfig)}
    wrong = []
    for key, default in keys.items():
        cells = rows[key]
        section, _, name = key.partition(".")
        if section == "model" and name in model_fields:  # defaults come from the presets
            tiny, vggt = (DepthModelConfig.from_preset(p).to_dict()[name] for p in ("tiny", "vggt-1b"))
            if not (_same(_value(cells[2]), tiny) and _same(_value(cells[3]), vggt)):
                wrong.append(f"{key}: {cells[2]} / {cells[3]} (tiny {tiny!r}, vggt-1b {vggt!r})")
        elif default is dataclasses.MISSING:
            assert "required" in cells[2], key
        elif not _same(_value(cells[2]), default):
            wrong.append(f"{key}: documented {cells[2]}, schema default {default!r}")
    assert not wrong, "docs/configuration.md gives wrong defaults:\n" + "\n".join(wrong)
    assert set(PRESETS) == {"tiny", "vggt-1b"}, "document the new preset in docs/configuration.md's model table"


def test_bad_config_table_has_every_row_of_bad_configs():
    text = DOC.read_text()
    start = text.index("\n## Bad configurations")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end > 0 else len(text)]
    table = [line for line in section.splitlines() if line.startswith("| ")]
    assert len(table) >= 2 + 12, "the bad-config table needs at least 12 rows"
    for args, fragment in BAD_CONFIGS:
        assert any(fragment in line for line in table), f"no row of the bad-config table shows {fragment!r}"
        shown = [a for a in args if "@" not in a]
        assert any(all(a in line for a in shown) and fragment in line for line in table), (args, fragment)
    for line in table[2:]:
        error = line.rstrip(" |").rsplit("| ", 1)[-1]
        assert error.startswith("`` error: ") and error.endswith(" ``"), line
