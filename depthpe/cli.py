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
    "predict": "depthpe.commands.predict",
    "synth": "depthpe.commands.synth",
    "check": "depthpe.commands.check",
    "convert": "depthpe.commands.convert",
    "index": "depthpe.commands.index",
    "bench": "depthpe.commands.bench",
    "push": "depthpe.commands.push",
    "compare": "depthpe.commands.compare",
    "plot": "depthpe.commands.plot",
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


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse ``argv``; ``key=value`` overrides may stand anywhere, also after options such as
    ``--resume latest`` (argparse alone takes positionals in one run only)."""
    args, extra = parser.parse_known_args(argv)
    if extra and hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
        args.overrides = [*args.overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: list[str] | None = None) -> int:
    """``depthpe COMMAND ...``; returns the exit status."""
    args = parse(build_parser(), argv)
    return int(args._run(args) or 0)


def run_command(name: str, argv: list[str] | None = None) -> int:
    """Run one command with its own parser (``python -m depthpe.train`` = ``depthpe train``)."""
    module = importlib.import_module(COMMANDS[name])
    parser = argparse.ArgumentParser(prog=f"depthpe {name}", description=getattr(module, "DESCRIPTION", module.HELP),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    module.add_arguments(parser)
    return int(module.run(parse(parser, argv)) or 0)


if __name__ == "__main__":
    sys.exit(main())
