"""Command-line options generated from a config dataclass.

A command's settings are one dataclass (``EvalConfig``, ``PredictConfig``, ``ConvertConfig``); each
field carries its help text through ``option(...)``. ``add_options`` turns the fields into argparse
options, so every default is written once, in the dataclass, and the command gets what
``depthpe train`` has: ``--config FILE`` (a YAML file with the dataclass's keys) and ``key=value``
overrides. ``config_from_args`` merges, later wins: the dataclass defaults, ``--config FILE``, the
options given on the command line, the ``key=value`` overrides; it builds the dataclass with
``depthpe.config`` (OmegaConf), so the ``__post_init__`` checks run and every error is one line.

Written by hand because argparse has no dataclass bridge, and the libraries that have one
(simple-parsing, tyro, draccus) bring parsers and error messages of their own, unlike
``depthpe train``'s. This module imports neither torch nor OmegaConf at import time.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from typing import Any

__all__ = ["REQUIRED", "option", "add_options", "config_from_args", "flag_of", "check_required"]

REQUIRED: Any = "???"  # OmegaConf's marker of a value that must be set; a field without a usable default


def option(default: Any = dataclasses.MISSING, *, help: str, flag: str | None = None, metavar: str | None = None,
           choices: tuple | None = None, positional: bool = False, store_false: bool = False,
           append: bool = False, nargs: int | None = None, parse: Any = None,
           default_factory: Any = dataclasses.MISSING):
    """A dataclass field that is also a command-line option.

    help: one line (the default is appended); flag: the option's spelling (default ``--field-name``);
    positional: a positional argument instead; store_false: a bool field set to False by ``flag``
    (e.g. ``--quiet`` for ``progress``); append: a list field given by repeating ``flag`` (``--shift a
    --shift b``) instead of listing its values after one ``flag``; nargs: a list field given as exactly
    this many values after ``flag`` (``--depth-ratio 2 8``; metavar a tuple naming each); parse: the
    argparse ``type`` (a function of the text that raises ``argparse.ArgumentTypeError``: the command
    line's error; the dataclass should check the value too, for ``--config FILE``); choices / metavar
    as in argparse.
    """
    meta = {"help": help, "flag": flag, "metavar": metavar, "choices": choices, "positional": positional,
            "store_false": store_false, "append": append, "nargs": nargs, "parse": parse}
    return dataclasses.field(default=default, default_factory=default_factory, metadata={"option": meta})


def flag_of(cls, name: str) -> str:
    """How field ``name`` of ``cls`` is spelled on the command line (``--scenes``; a positional one
    by its metavar or upper-case name: ``RUN_DIR``, ``DATASET``)."""
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    meta = field.metadata.get("option", {})
    if meta.get("positional"):
        return meta.get("metavar") or name.upper()
    return meta.get("flag") or "--" + name.replace("_", "-")


def _help_text(field: dataclasses.Field) -> str:
    """The field's help with its default: ``(required)``, ``(default: 8)``; None or an empty list is
    ``(default: none)``, left out when the help explains ``none:`` itself."""
    text = field.metadata["option"]["help"]
    value = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
    if value is REQUIRED:
        return f"{text} (required)"
    if value is None or value == []:
        return text if "none:" in text else f"{text} (default: none)"
    return f"{text} (default: {_shown(value)})"


def _shown(value) -> str:
    """A default as the command line writes it: ``true``, ``8``, ``abs_rel delta1`` for a list."""
    if isinstance(value, bool):
        return str(value).lower()
    return " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _example(cls) -> tuple[str, str]:
    """(key, value) of ``cls`` for the help's examples: its first option with a number as default,
    else its first with a text default."""
    defaults = [(f.name, f.default) for f in dataclasses.fields(cls) if "option" in f.metadata
                and f.default is not REQUIRED and not isinstance(f.default, bool)]
    numbers = [(k, v) for k, v in defaults if isinstance(v, (int, float))]
    texts = [(k, v) for k, v in defaults if isinstance(v, str)]
    name, value = (numbers or texts or [("key", "value")])[0]
    return name, _shown(value)


def _plain_type(hint):
    """``int | None`` -> ``int``; other hints unchanged."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0] if len(args) == 1 else hint
    return hint


def _argparse_kwargs(field: dataclasses.Field, hint) -> dict:
    """argparse keyword arguments for one field (its value, or nothing when not given)."""
    meta = field.metadata["option"]
    kind = _plain_type(hint)
    kwargs: dict = {"default": argparse.SUPPRESS, "help": _help_text(field)}
    if meta["store_false"]:
        return {**kwargs, "action": "store_false", "help": meta["help"]}
    if kind is bool:
        return {**kwargs, "action": argparse.BooleanOptionalAction}
    if typing.get_origin(kind) is list:
        kind = typing.get_args(kind)[0]
        kwargs.update({"action": "append"} if meta.get("append") else {"nargs": meta.get("nargs") or "*"})
    kwargs["type"] = meta.get("parse") or kind
    for key in ("metavar", "choices"):
        if meta[key] is not None:
            kwargs[key] = meta[key]
    if meta["positional"]:  # optional here (it may come from --config); None = not given. Its choices
        kwargs.update(nargs=kwargs.get("nargs", "?"), default=None)  # are checked by the dataclass:
        kwargs.pop("choices", None)  # argparse would read key=value
        kwargs["metavar"] = ("{" + ",".join(meta["choices"]) + "}" if meta["choices"]
                             else meta["metavar"] or field.name.upper())
    return kwargs


def add_options(parser: argparse.ArgumentParser, cls) -> None:
    """Add one option per ``option(...)`` field of dataclass ``cls``, then ``--config FILE`` and the
    ``key=value`` overrides. Options not given are absent from the parsed namespace (a positional
    one is None); required fields come first in the help."""
    hints = typing.get_type_hints(cls)
    for field in sorted(dataclasses.fields(cls), key=lambda f: f.default is not REQUIRED):  # required first
        if "option" not in field.metadata:
            continue
        kwargs = _argparse_kwargs(field, hints[field.name])
        if field.metadata["option"]["positional"]:
            parser.add_argument(field.name, **kwargs)
        else:
            parser.add_argument(flag_of(cls, field.name), dest=field.name, **kwargs)
    name, value = _example(cls)
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="YAML file of these settings (keys = the option names with underscores, "
                             f"e.g. '{name}: {value}'); options and key=value given here win")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help=f"settings as key=value (values parsed as YAML), e.g. {name}={value}")


def _is_positional(cls, name: str) -> bool:
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    return bool(field.metadata.get("option", {}).get("positional"))


def check_required(obj) -> None:
    """Raise ``ValueError`` naming the first field of dataclass ``obj`` still set to ``REQUIRED``."""
    for field in dataclasses.fields(obj):
        if getattr(obj, field.name) is REQUIRED:
            raise ValueError(f"{flag_of(type(obj), field.name)} is required (or '{field.name}:' in --config FILE)")


def config_from_args(cls, args: argparse.Namespace):
    """The ``cls`` object of a parsed command line: defaults < ``--config FILE`` < options < ``key=value``.
    Raises ``depthpe.config.ConfigError`` (one line) for unknown keys, bad values or missing required ones."""
    from omegaconf import OmegaConf

    from . import ConfigError, instantiate, merge_layers, read_yaml_chain

    layers = [read_yaml_chain(args.config)] if getattr(args, "config", None) else []
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if getattr(args, f.name, None) is not None}
    overrides = list(getattr(args, "overrides", ()) or ())
    for name, value in list(given.items()):  # key=value items that argparse took for a positional
        if not _is_positional(cls, name):
            continue
        if isinstance(value, str) and "=" in value:
            overrides.insert(0, given.pop(name))
        elif isinstance(value, list):
            overrides[:0] = [v for v in value if "=" in v]
            given[name] = [v for v in value if "=" not in v]
            if not given[name]:  # none given here: the list may come from --config
                del given[name]
    node = merge_layers(cls, [*layers, given], overrides)
    for field in dataclasses.fields(cls):
        if OmegaConf.is_missing(node, field.name):
            raise ConfigError(f"{flag_of(cls, field.name)} is required (or '{field.name}:' in --config FILE)")
    return instantiate(node, cls)
