"""Sub-commands whose module is imported only when that sub-command is parsed.

``depthpe --help`` lists every command from a table of (module name, one-line help) and imports no
command module; ``depthpe NAME ...`` imports ``NAME``'s module just before argparse reads its
arguments. Used for ``depthpe COMMAND`` (``depthpe.cli``) and ``depthpe bench NAME``.

A command module exposes ``add_arguments(parser)``, ``run(args) -> int`` and optionally
``DESCRIPTION`` (the long ``--help`` text). argparse loads sub-parsers eagerly and has no hook for
this, so the sub-parsers action is subclassed (registered the documented way, ``action=``).
"""

from __future__ import annotations

import argparse
import importlib
from typing import Callable, Mapping

__all__ = ["add_lazy_subcommands", "configure_parser"]


def configure_parser(parser: argparse.ArgumentParser, module_name: str, help_text: str, run_key: str) -> None:
    """Import ``module_name`` and let it add its arguments to ``parser``; its ``run`` is stored in
    the parsed namespace as ``run_key``."""
    module = importlib.import_module(module_name)
    parser.description = getattr(module, "DESCRIPTION", help_text)
    module.add_arguments(parser)
    parser.set_defaults(**{run_key: module.run})


class _LazySubParsersAction(argparse._SubParsersAction):
    """Sub-parsers filled in (``loaders[name](parser)``) when their name is read from the command line."""

    loaders: dict[str, Callable[[argparse.ArgumentParser], None]]

    def __call__(self, parser, namespace, values, option_string=None):
        load = self.loaders.pop(values[0], None)
        if load is not None:
            load(self._name_parser_map[values[0]])
        super().__call__(parser, namespace, values, option_string)


def add_lazy_subcommands(parser: argparse.ArgumentParser, table: Mapping[str, tuple[str, str]], *, dest: str,
                         run_key: str, metavar: str) -> None:
    """Add the sub-commands of ``table`` (name -> (module name, one-line help)) to ``parser``; a
    module is imported only when its sub-command is chosen. ``dest`` receives the chosen name."""
    sub = parser.add_subparsers(dest=dest, metavar=metavar, action=_LazySubParsersAction)
    sub.required = True
    sub.loaders = {}
    for name, (module_name, help_text) in table.items():
        p = sub.add_parser(name, help=help_text, description=help_text,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.loaders[name] = lambda p, m=module_name, h=help_text: configure_parser(p, m, h, run_key)
