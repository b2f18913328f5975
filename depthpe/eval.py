"""``python -m depthpe.eval`` (and ``accelerate launch -m depthpe.eval``): the same command as
``depthpe eval``, as a module that Accelerate can launch once per process."""

import sys

from .cli import run_command


def main(argv: list[str] | None = None) -> int:
    """``depthpe eval`` with ``argv``; returns the exit status."""
    return run_command("eval", argv)


if __name__ == "__main__":
    sys.exit(main())
