"""YAML run configs with dotted command-line overrides.

``load_config(path, overrides)`` reads a YAML mapping and applies overrides such as
``train.steps=200`` or ``model.global_pe=prope`` (values are parsed as YAML, so ``1e-4``, ``true``,
``[2, 8]`` work). A key that does not exist in the file may be added only under a section that the
consumer validates (unknown keys are rejected there with the list of valid keys).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

__all__ = ["load_config", "apply_overrides", "dump_config", "parse_value", "merge"]

# PyYAML follows YAML 1.1, where "1e-4" (no dot) is a string; users mean a number.
_FLOAT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)$")


def _coerce(x: Any) -> Any:
    """Turn strings like "1e-4" into floats, recursively (see ``_FLOAT``)."""
    if isinstance(x, str) and _FLOAT.match(x.strip()):
        return float(x)
    if isinstance(x, dict):
        return {k: _coerce(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_coerce(v) for v in x]
    return x


def parse_value(raw: str) -> Any:
    """Parse one override value as YAML (``1e-4`` is a float, ``[2, 8]`` a list, ``true`` a bool)."""
    return _coerce(yaml.safe_load(raw))


def apply_overrides(config: dict, overrides: list[str]) -> dict:
    """Return a copy of ``config`` with ``key.sub=value`` overrides applied (values parsed as YAML)."""
    out = copy.deepcopy(config)
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} must look like key.subkey=value")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        if not all(parts):
            raise ValueError(f"override {item!r} has an empty key part")
        node = out
        for p in parts[:-1]:
            if p not in node or node[p] is None:
                node[p] = {}
            if not isinstance(node[p], dict):
                raise ValueError(f"override {item!r}: {p!r} is not a section")
            node = node[p]
        node[parts[-1]] = parse_value(raw)
    return out


def merge(base: dict, update: dict) -> dict:
    """Deep merge: mappings are merged key by key, everything else (lists too) is replaced."""
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_config(path: str | Path, overrides: list[str] | None = None, _seen: tuple = ()) -> dict:
    """Read a YAML config file (a mapping) and apply overrides; clear errors for bad files.

    A top-level ``base: OTHER.yaml`` (relative to the file) is loaded first and the file's own keys
    are deep-merged over it, so recipe variants only state what differs.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} not found (see configs/ for examples)")
    if path.resolve() in _seen:
        raise ValueError(f"{path}: circular 'base:' chain {[str(p) for p in _seen]}")
    try:
        config = _coerce(yaml.safe_load(path.read_text()) or {})
    except yaml.YAMLError as err:
        raise ValueError(f"{path}: not valid YAML: {err}") from err
    if not isinstance(config, dict):
        raise ValueError(f"{path}: the top level must be a mapping of sections")
    base = config.pop("base", None)
    if base is not None:
        config = merge(load_config(path.parent / base, _seen=_seen + (path.resolve(),)), config)
    return apply_overrides(config, list(overrides or []))


def dump_config(config: dict[str, Any]) -> str:
    """YAML text of a resolved config (keys kept in insertion order)."""
    return yaml.safe_dump(config, sort_keys=False)
