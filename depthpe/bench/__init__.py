"""Benchmarks run by ``depthpe bench NAME``: one module per benchmark with ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``. They print tables with ratios."""
