"""``depthpe bench NAME``: speed and memory benchmarks that print tables with ratios."""

from __future__ import annotations

import argparse
import importlib

HELP = "run a benchmark (synth, convert, attention, ...) and print a table"

BENCHMARKS = {
    "synth": "depthpe.bench.synth",
    "convert": "depthpe.bench.convert",
    "attention": "depthpe.bench.attention",
    "train": "depthpe.bench.train",
    "data": "depthpe.bench.data",
    "gpu-check": "depthpe.bench.gpu_check",
    "memory": "depthpe.bench.memory",
    "model": "depthpe.bench.model",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK")
    sub.required = True
    for name, module_name in BENCHMARKS.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=module.HELP, description=getattr(module, "DESCRIPTION", module.HELP))
        module.add_arguments(p)
        p.set_defaults(_bench_run=module.run)


def run(args: argparse.Namespace) -> int:
    from .errors import USAGE_ERROR_STATUS, report_errors

    with report_errors():
        return int(args._bench_run(args) or 0)
    return USAGE_ERROR_STATUS
