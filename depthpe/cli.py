"""The ``depthpe`` command line.

Each sub-command lives in its own module under ``depthpe.commands`` (``depthpe.bench`` for
``depthpe bench NAME``) exposing ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``. Modules are imported only when their command runs, so ``depthpe --help``
stays fast and a missing optional dependency only affects its own command.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = {
    "synth": "depthpe.commands.synth",
    "check": "depthpe.commands.check",
    "convert": "depthpe.commands.convert",
    "bench": "depthpe.commands.bench",
    "push": "depthpe.commands.push",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="depthpe",
        description="Multi-view depth with camera positional encodings: data tools, benchmarks.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(
            name,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.HELP),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args._run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
