"""Typed configs: YAML files and ``key=value`` overrides merged into dataclasses with OmegaConf.

Every config in depthpe (a training run, the data pipeline, a data source) is a dataclass; this
module is the one place that turns user input into such an object:

* ``read_yaml_chain(path)`` reads a YAML file; a top-level ``base: OTHER.yaml`` (relative to the
  file) is read first and the file's own keys are merged over it, so a recipe variant only states
  what differs. Lists are replaced, not merged.
* ``build(cls, *layers, overrides=...)`` merges mappings and dotted overrides (``train.steps=200``,
  ``data.sources.0.root=/x``, values parsed as YAML) into the dataclass schema ``cls`` and
  instantiates it (``__post_init__`` checks run). ``${section.key}`` interpolation works.
* ``to_yaml(obj)`` is the inverse: the resolved YAML of a config object, which ``build`` reads
  back to an equal object.

Why OmegaConf (and not draccus or hand-written parsing): it merges typed structured configs with
dotlist overrides, list indices and interpolation, rejects unknown keys and wrong types with the
full key path, and reads ``1e-4`` as a float (plain PyYAML follows YAML 1.1 and reads a string).
Every error becomes a one-line ``ConfigError`` saying what was wrong and how to fix it.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from pathlib import Path
from typing import Any, Sequence

__all__ = ["ConfigError", "build", "merge_layers", "instantiate", "env_interpolated_keys", "read_yaml_chain", "to_yaml",
           "to_container", "flatten_settings", "did_you_mean", "require"]


class ConfigError(ValueError):
    """A bad configuration; the message is one line: what is wrong (how to fix it)."""


def require(ok: bool, message: str) -> None:
    """Raise ``ValueError(message)`` unless ``ok``: the checks of the config dataclasses'
    ``__post_init__`` (each message says which key is wrong and how to fix it)."""
    if not ok:
        raise ValueError(message)


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """`` (did you mean 'x'?)``-style hint for a misspelled ``word``, or an empty string."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else ""


def _schema_keys(cls, path: Sequence[str]) -> list[str]:
    """Field names of the dataclass reached from ``cls`` by following ``path`` (list indices skipped)."""
    for part in path:
        if not dataclasses.is_dataclass(cls):
            return []
        hint = typing.get_type_hints(cls).get(part)
        args = typing.get_args(hint)
        cls = args[0] if typing.get_origin(hint) in (list, tuple) and args else hint
    return [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []


def _dotted_entries(value, prefix: str = ""):
    """``(dotted path, key, value, in_mapping)`` of every entry of a nested container of dicts and
    lists, depth first in order (list indices as path numbers; ``in_mapping``: a dict's key)."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        path = f"{prefix}.{k}" if prefix else str(k)
        yield path, k, v, isinstance(value, dict)
        yield from _dotted_entries(v, path)


def _paths_of_key(name: str, layers: Sequence[Any]) -> list[str]:
    """The dotted paths (list indices as numbers) at which mapping key ``name`` appears in
    ``layers`` (OmegaConf nodes or plain containers), sorted and without repeats."""
    from omegaconf import OmegaConf

    found = {path for layer in layers
             for path, key, _, in_mapping in _dotted_entries(
                 OmegaConf.to_container(layer, resolve=False) if OmegaConf.is_config(layer) else layer)
             if in_mapping and str(key) == name}
    return sorted(found)


def _explain(err: Exception, cls, layers: Sequence[Any] = ()) -> ConfigError:
    """Turn an OmegaConf error into a one-line ``ConfigError`` naming the full key. OmegaConf names
    a bad key inside a list element (``data.sources: [{rooot: x}]``) without its path: the path is
    then looked up in ``layers`` (what was merged), and used when the key appears there once."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

    key = re.sub(r"\[(\d+)\]", r".\1", getattr(err, "full_key", None) or "")
    if key and "." not in key and isinstance(err, (ConfigKeyError, ConfigAttributeError)):
        paths = _paths_of_key(key, layers)
        key = paths[0] if len(paths) == 1 else key
    msg = (getattr(err, "msg", None) or str(err)).splitlines()[0]
    if isinstance(err, (ConfigKeyError, ConfigAttributeError)) and key:
        owner = getattr(err, "object_type", None)
        *parent, name = key.split(".")
        valid = ([f.name for f in dataclasses.fields(owner)] if dataclasses.is_dataclass(owner)
                 else _schema_keys(cls, [p for p in parent if not p.isdigit()]))
        hint = did_you_mean(name, valid)
        if hint:
            hint = hint.replace(repr(hint.split("'")[1]), repr(".".join([*parent, hint.split("'")[1]])))
        fix = hint or (f"valid keys here: {', '.join(valid)}" if valid else "remove it")
        return ConfigError(f"unknown config key {key!r} ({fix})")
    if isinstance(err, ValidationError) and key:
        for pattern, text in _TYPE_MESSAGES:
            msg = re.sub(pattern, text, msg)
        return ConfigError(f"{key}: {msg} (fix the value in the config file or the override)")
    return ConfigError(f"{key + ': ' if key else ''}{msg}")


# OmegaConf's type errors, reworded for users (regex, replacement).
_TYPE_MESSAGES = (
    (r"Value '(.*)' of type '\w+' could not be converted to Integer", r"\1 is not an integer (write a whole number)"),
    (r"Value '(.*)' of type '\w+' could not be converted to Float", r"\1 is not a number"),
    (r"Value '(.*)' of type '\w+' could not be converted to Boolean", r"\1 is not true or false"),
    (r"Value '(.*)' is not a valid bool.*", r"\1 is not true or false"),
    (r"Invalid value assigned: \w+ is not a TupleConfig.*", "must be a [min, max] list"),
    (r"Invalid type assigned: dict is not a subclass of \w+.*", "no such list element"),
)


def _read_yaml(path: Path):
    """One YAML file as an OmegaConf node (a mapping); one-line errors for missing or malformed files."""
    from omegaconf import DictConfig, OmegaConf
    from yaml import YAMLError

    if not path.is_file():
        raise ConfigError(f"config file {path} not found (pass a path or the name of a shipped config)")
    try:
        node = OmegaConf.load(path)
    except YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f" line {where.line + 1}" if where is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{path}:{line} is not valid YAML: {problem} (fix the syntax)") from None
    if not isinstance(node, DictConfig):
        raise ConfigError(f"{path}: the top level must be a mapping of sections (e.g. 'train: {{steps: 10}}')")
    return node


def read_yaml_chain(path: str | Path, _seen: tuple = ()):
    """The OmegaConf mapping of a YAML config file with its ``base:`` chain merged in (untyped)."""
    from omegaconf import OmegaConf

    path = Path(path)
    if path.resolve() in _seen:
        raise ConfigError(f"{path}: circular 'base:' chain {[str(p) for p in _seen]} (remove one 'base:')")
    node = _read_yaml(path)
    base = node.pop("base", None)
    if base is None:
        return node
    return OmegaConf.merge(read_yaml_chain(path.parent / str(base), _seen + (path.resolve(),)), node)


def merge_layers(cls, layers: Sequence[Any] = (), overrides: Sequence[str] = ()):
    """The OmegaConf node of schema ``cls`` with ``layers`` (mappings) and dotted ``overrides`` merged in.

    Overrides look like ``section.key=value`` (values parsed as YAML: ``1e-4``, ``[2, 8]``, ``true``);
    list elements are addressed by index (``data.sources.0.root=/x``). Raises ``ConfigError``.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    for item in overrides:
        if "=" not in item or not item.split("=", 1)[0].strip():
            raise ConfigError(f"override {item!r} must look like section.key=value (e.g. train.steps=100)")
    try:
        node = OmegaConf.merge(OmegaConf.structured(cls), *layers)
        for item in overrides:
            _open_unset_mappings(node, item.split("=", 1)[0].strip())
            node.merge_with_dotlist([item])
        return node
    except OmegaConfBaseException as err:
        raise _explain(err, cls, [*layers, *_parsed_overrides(overrides)]) from None


def _parsed_overrides(overrides: Sequence[str]) -> list:
    """Each ``key=value`` override as a nested mapping (for ``_explain``); unparsable ones left out."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    parsed = []
    for item in overrides:
        try:
            parsed.append(OmegaConf.from_dotlist([item]))
        except (OmegaConfBaseException, ValueError):
            continue
    return parsed


def _open_unset_mappings(node, key: str) -> None:
    """Make ``a.b.c=v`` work when ``a.b`` is an unset (``???``) mapping, e.g. ``model.pe_options``
    whose value comes from the preset: the unset parent becomes an empty mapping first (OmegaConf
    fails with an AttributeError on a dotted key below an unset node)."""
    from omegaconf import DictConfig, OmegaConf

    parts = key.split(".")
    for i in range(1, len(parts)):
        parent = OmegaConf.select(node, ".".join(parts[:i - 1])) if i > 1 else node
        if not isinstance(parent, DictConfig) or parent._get_node(parts[i - 1]) is None:
            return  # not a key of the schema: the merge below names it
        if OmegaConf.is_missing(parent, parts[i - 1]):
            parent[parts[i - 1]] = {}


def env_interpolated_keys(node) -> list[str]:
    """Dotted keys of a merged node whose value reads the environment (an ``${oc.env:VAR}``
    interpolation anywhere in the string), in key order, before anything is resolved."""
    from omegaconf import OmegaConf

    container = OmegaConf.to_container(node, resolve=False, throw_on_missing=False)
    return [path for path, _, value, _ in _dotted_entries(container)
            if isinstance(value, str) and re.search(r"\$\{\s*oc\.env\s*:", value)]


def instantiate(node, cls):
    """The dataclass object of a merged node (runs every ``__post_init__`` check); raises ``ConfigError``."""
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

    try:
        return OmegaConf.to_object(node)
    except MissingMandatoryValue as err:
        raise ConfigError(f"{err.full_key} is required but not set (add it to the config)") from None
    except OmegaConfBaseException as err:
        raise _explain(err, cls) from None
    except (ValueError, TypeError) as err:
        raise ConfigError(str(err).splitlines()[0]) from None


def build(cls, *layers, overrides: Sequence[str] = ()):
    """Instantiate dataclass ``cls`` from mappings ``layers`` (later wins) and dotted ``overrides``."""
    return instantiate(merge_layers(cls, layers, overrides), cls)


def to_container(obj) -> dict:
    """Plain dict/list form of a config dataclass (tuples become lists), for JSON/YAML writers."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.structured(obj), resolve=True)


def to_yaml(obj) -> str:
    """YAML text of a config dataclass; ``build(type(obj), yaml)`` gives back an equal object."""
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(OmegaConf.structured(obj), resolve=True)


def flatten_settings(mapping: dict, prefix: str = "") -> dict[str, Any]:
    """{dotted key: value} of a nested config mapping (``to_container``'s form): nested mappings by
    key, lists of mappings by index (``data.sources.0.root``); other lists stay one value
    (``data.views``: [2, 8]); an empty mapping or list is one value too."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten_settings(value, name + "."))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for i, item in enumerate(value):
                out.update(flatten_settings(item, f"{name}.{i}.") if item else {f"{name}.{i}": item})
        else:
            out[name] = value
    return out
