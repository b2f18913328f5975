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
    "train": "depthpe.commands.train",
    "eval": "depthpe.commands.eval",
    "synth": "depthpe.commands.synth",
    "check": "depthpe.commands.check",
    "convert": "depthpe.commands.convert",
    "bench": "depthpe.commands.bench",
    "push": "depthpe.commands.push",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="depthpe",
        description="Multi-view depth with camera positional encodings: train and evaluate models, make and "
                    "check data, push to the Hub, benchmark. `depthpe COMMAND --help` for each; docs/index.md "
                    "for the documentation.",
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
    """``depthpe COMMAND ...``; returns the exit status."""
    args = build_parser().parse_args(argv)
    return int(args._run(args) or 0)


def run_command(name: str, argv: list[str] | None = None) -> int:
    """Run one command with its own parser (``python -m depthpe.train`` = ``depthpe train``)."""
    module = importlib.import_module(COMMANDS[name])
    parser = argparse.ArgumentParser(prog=f"depthpe {name}", description=getattr(module, "DESCRIPTION", module.HELP),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    module.add_arguments(parser)
    return int(module.run(parser.parse_args(argv)) or 0)


if __name__ == "__main__":
    sys.exit(main())
