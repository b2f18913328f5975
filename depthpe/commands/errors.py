"""One-line errors for the command line: ``error: <what> (<how to fix>)`` and exit status 2."""

from __future__ import annotations

import contextlib
import sys

from ..config import ConfigError

__all__ = ["report_errors", "require_output_folder", "USAGE_ERROR_STATUS"]

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
