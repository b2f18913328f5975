"""Benchmarks run by ``depthpe bench NAME``: one module per benchmark with its settings dataclass
(``SynthSettings``, ...: the fields are its options, ``add_plain_options``; shared pieces in
``settings.py``), ``add_arguments(parser)``, ``run(args) -> int`` and optionally ``DESCRIPTION``; the
one-line helps are in ``depthpe.commands.bench.BENCHMARKS``. They print tables with ratios."""
