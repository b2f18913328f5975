"""One-line errors for the command line: ``error: <what> (<how to fix>)`` and exit status 2."""

from __future__ import annotations

import contextlib
import sys

from ..config import ConfigError

__all__ = ["report_errors", "require_output_folder", "require_output_file", "add_config_arguments", "run_config_command", "USAGE_ERROR_STATUS"]

USAGE_ERROR_STATUS = 2


@contextlib.contextmanager
def report_errors(debug: bool = False):
    """Print a ``ConfigError`` as one ``error:`` line on stderr and swallow it (the caller then returns
    status 2); with ``debug`` let it propagate with its traceback."""
    try:
        yield
    except ConfigError as err:
        if debug:
            raise
        print(f"error: {err}", file=sys.stderr, flush=True)


def require_output_folder(path, label: str) -> None:
    """Raise ``ConfigError`` (one line) unless ``path`` can be a command's output folder: not a
    file, on a writable disk (``depthpe.files.output_folder_problem``)."""
    from ..files import output_folder_problem

    problem = output_folder_problem(path, label)
    if problem:
        raise ConfigError(problem)


def require_output_file(path, label: str) -> None:
    """Raise ``ConfigError`` (one line) unless ``path`` can be written as a command's output file
    (``depthpe.files.output_file_problem``: not a folder, its folder possible and writable)."""
    from ..files import output_file_problem

    problem = output_file_problem(path, label)
    if problem:
        raise ConfigError(problem)


def add_config_arguments(parser, cls) -> None:
    """The options of a command whose settings are the dataclass ``cls`` (``config.options.add_options``:
    its fields, ``--config FILE``, ``key=value``), and ``--debug``."""
    from ..config.options import add_options

    add_options(parser, cls)
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")


def run_config_command(args, cls, run) -> int:
    """Build ``cls`` from the parsed ``args``, check its ``out`` folder and call ``run(cfg)``; a
    ``ConfigError`` anywhere is one ``error:`` line and status 2 (``report_errors``)."""
    from ..config.options import config_from_args

    with report_errors(args.debug):
        cfg = config_from_args(cls, args)
        require_output_folder(cfg.out, "--out")
        run(cfg)
        return 0
    return USAGE_ERROR_STATUS
