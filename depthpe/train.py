"""``python -m depthpe.train`` (and ``accelerate launch -m depthpe.train``): the same command as
``depthpe train``, as a module that Accelerate can launch once per process."""

import sys

from .cli import run_command


def main(argv: list[str] | None = None) -> int:
    """``depthpe train`` with ``argv``; returns the exit status."""
    return run_command("train", argv)


if __name__ == "__main__":
    sys.exit(main())
