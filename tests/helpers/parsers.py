"""The parser of one command or benchmark as the CLI builds it, and a dataclass field's default:
what the tests of generated options (tests/commands/test_command_configs.py, test_bench_configs.py) share."""

from __future__ import annotations

import argparse
import dataclasses


def command_parser(table: dict, name: str, prog: str) -> argparse.ArgumentParser:
    """The parser of entry ``name`` of a lazy command table (``depthpe.cli.COMMANDS`` or
    ``depthpe.commands.bench.BENCHMARKS``: name -> (module, help)), as ``prog``."""
    from depthpe.commands.subcommands import configure_parser

    module, help_text = table[name]
    parser = argparse.ArgumentParser(prog=prog)
    configure_parser(parser, module, help_text, "_run")
    return parser


def field_default(field: dataclasses.Field):
    """A dataclass field's default value (its factory called)."""
    return field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
