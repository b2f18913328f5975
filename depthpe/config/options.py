"""Command-line options generated from a config dataclass.

A command's settings are one dataclass (``EvalConfig``, ``PredictConfig``, ``ConvertConfig``); each
field carries its help text through ``option(...)``. ``add_options`` turns the fields into argparse
options, so every default is written once, in the dataclass, and the command gets what
``depthpe train`` has: ``--config FILE`` (a YAML file with the dataclass's keys) and ``key=value``
overrides. ``config_from_args`` merges, later wins: the dataclass defaults, ``--config FILE``, the
options given on the command line, the ``key=value`` overrides; it builds the dataclass with
``depthpe.config`` (OmegaConf), so the ``__post_init__`` checks run and every error is one line.
``add_plain_options`` is the variant for commands whose ``--config`` and ``key=value`` mean something
else (``depthpe bench``: the benchmarked training run's config): the fields' options alone, with the
dataclass's defaults as argparse defaults, so the parsed namespace holds every field.

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

__all__ = ["REQUIRED", "option", "overwrite_option", "add_options", "add_plain_options", "config_from_args", "flag_of", "check_required"]

REQUIRED: Any = "???"  # OmegaConf's marker of a value that must be set; a field without a usable default


def option(default: Any = dataclasses.MISSING, *, help: str, flag: str | None = None, metavar: Any = None,
           choices: tuple | None = None, positional: bool = False, store_false: bool = False,
           store_true: bool = False, append: bool = False, nargs: Any = None, hidden: bool = False,
           parse: Any = None, default_factory: Any = dataclasses.MISSING):
    """A dataclass field that is also a command-line option.

    help: one line (the default is appended); flag: the option's spelling (default ``--field-name``);
    positional: a positional argument instead; store_false / store_true: a bool field set to False /
    True by ``flag`` (e.g. ``--quiet`` for ``progress``; ``--raw``), without a ``--no-`` twin;
    append: a list field given by repeating ``flag`` (``--shift a --shift b``) instead of listing its
    values after one ``flag``; nargs: argparse's, for a list (default ``*``; ``+``: at least one) or a
    tuple field (default: its length); hidden: left out of the help (a flag the command passes to its
    own child processes); parse: the argparse ``type`` (a function of the text that raises
    ``argparse.ArgumentTypeError``: the command line's error; the dataclass should check the value
    too, for ``--config FILE``); choices / metavar as in argparse (a tuple metavar names each value of
    a tuple field: ``("H", "W")``).
    """
    meta = {"help": help, "flag": flag, "metavar": metavar, "choices": choices, "positional": positional,
            "store_false": store_false, "store_true": store_true, "append": append, "nargs": nargs,
            "hidden": hidden, "parse": parse}
    return dataclasses.field(default=default, default_factory=default_factory, metadata={"option": meta})


def overwrite_option():
    """The ``--overwrite`` field of every command that writes an output folder (``depthpe.files.output_folder``):
    write into ``--out`` although it holds another command's outputs, outputs of other settings or
    files no depthpe command recorded; only files this command wrote there are deleted."""
    return option(False, store_true=True, help="write into --out although it holds other outputs or outputs of "
                  "other settings (only files this command wrote there are deleted; others are kept)")


def flag_of(cls, name: str) -> str:
    """How field ``name`` of ``cls`` is spelled on the command line (``--scenes``; a positional one
    by its metavar or upper-case name: ``RUN_DIR``, ``DATASET``)."""
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    meta = field.metadata.get("option", {})
    if meta.get("positional"):
        return meta.get("metavar") or name.upper()
    return meta.get("flag") or "--" + name.replace("_", "-")


def _default(field: dataclasses.Field):
    """The field's default value (its ``default_factory()`` for a list)."""
    return field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default


def _help_text(field: dataclasses.Field) -> str:
    """The field's help with its default: ``(required)``, ``(default: 8)``; None or an empty list is
    ``(default: none)``, left out when the help explains ``none:`` itself."""
    text = field.metadata["option"]["help"]
    value = _default(field)
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


def _value_kwargs(meta: dict, kind) -> dict:
    """argparse ``type``, ``nargs`` / ``action``, ``metavar`` and ``choices`` of a field of type
    ``kind``: a list takes ``nargs`` values (or ``append``), a tuple as many as it has items."""
    kwargs: dict = {}
    if typing.get_origin(kind) is list:
        kind = typing.get_args(kind)[0]
        kwargs.update({"action": "append"} if meta["append"] else {"nargs": meta["nargs"] or "*"})
    elif typing.get_origin(kind) is tuple:
        items = typing.get_args(kind)
        kind, kwargs["nargs"] = items[0], meta["nargs"] or len(items)
    kwargs["type"] = meta["parse"] or kind
    for key in ("metavar", "choices"):
        if meta[key] is not None:
            kwargs[key] = meta[key]
    return kwargs


def _argparse_kwargs(field: dataclasses.Field, hint, plain: bool = False) -> dict:
    """argparse keyword arguments for one field: its value, or nothing when not given (a positional
    one: None); ``plain``: the field's default when not given, a required field required."""
    meta = field.metadata["option"]
    default = _default(field)
    kwargs: dict = {"default": default if plain else argparse.SUPPRESS,
                    "help": argparse.SUPPRESS if meta["hidden"] else _help_text(field)}
    if plain and default is REQUIRED:
        del kwargs["default"]
        kwargs.update({} if meta["positional"] else {"required": True})
    if meta["store_false"] or meta["store_true"]:
        return {**kwargs, "action": "store_false" if meta["store_false"] else "store_true",
                "help": argparse.SUPPRESS if meta["hidden"] else meta["help"]}
    kind = _plain_type(hint)
    if kind is bool:
        return {**kwargs, "action": argparse.BooleanOptionalAction}
    kwargs.update(_value_kwargs(meta, kind))
    if meta["positional"] and plain:
        kwargs["metavar"] = meta["metavar"] or field.name.upper()
        if default is not REQUIRED and "nargs" not in kwargs and "action" not in kwargs:
            kwargs["nargs"] = "?"
    elif meta["positional"]:  # optional here (it may come from --config); None = not given. Its choices
        kwargs.update(nargs=kwargs.get("nargs", "?"), default=None)  # are checked by the dataclass:
        kwargs.pop("choices", None)  # argparse would read key=value
        kwargs["metavar"] = ("{" + ",".join(meta["choices"]) + "}" if meta["choices"]
                             else meta["metavar"] or field.name.upper())
    return kwargs


def _add_fields(parser: argparse.ArgumentParser, cls, plain: bool) -> None:
    """One argparse option per ``option(...)`` field of ``cls``, required fields first."""
    hints = typing.get_type_hints(cls)
    for field in sorted(dataclasses.fields(cls), key=lambda f: f.default is not REQUIRED):  # required first
        if "option" not in field.metadata:
            continue
        kwargs = _argparse_kwargs(field, hints[field.name], plain)
        if field.metadata["option"]["positional"]:
            parser.add_argument(field.name, **kwargs)
        else:
            parser.add_argument(flag_of(cls, field.name), dest=field.name, **kwargs)


def add_options(parser: argparse.ArgumentParser, cls) -> None:
    """Add one option per ``option(...)`` field of dataclass ``cls``, then ``--config FILE`` and the
    ``key=value`` overrides. Options not given are absent from the parsed namespace (a positional
    one is None); required fields come first in the help."""
    _add_fields(parser, cls, plain=False)
    name, value = _example(cls)
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="YAML file of these settings (keys = the option names with underscores, "
                             f"e.g. '{name}: {value}'); options and key=value given here win")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help=f"settings as key=value (values parsed as YAML), e.g. {name}={value}")


def add_plain_options(parser: argparse.ArgumentParser, cls) -> None:
    """Add one option per ``option(...)`` field of dataclass ``cls`` and nothing else (no ``--config
    FILE``, no ``key=value``: the command may name fields so itself). argparse's defaults are the
    fields' defaults, so the parsed namespace holds every field; a ``REQUIRED`` field is a required
    option; required fields come first in the help. The namespace is read like the dataclass
    (``args.views``); a tuple field's value given on the command line is a list."""
    _add_fields(parser, cls, plain=True)


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
