"""Arguments of ``depthpe bench attention`` for the tests: a tiny layer and a parser."""

from __future__ import annotations

import argparse

from depthpe.bench import attention

# S=2 views of 7 tokens (1 special + 2x3 patches), 4 heads of 16 channels, 1 thread: milliseconds per run
TINY = ["--views", "2", "--tokens-per-view", "7", "--special", "1", "--heads", "4", "--head-dim", "16",
        "--threads", "1"]


def attention_args(*argv: str) -> argparse.Namespace:
    """``argv`` parsed as ``depthpe bench attention`` parses it."""
    parser = argparse.ArgumentParser()
    attention.add_arguments(parser)
    return parser.parse_args(list(argv))
