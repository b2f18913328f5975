"""``depthpe bench NAME``: speed and memory benchmarks that print tables with ratios."""

from __future__ import annotations

import argparse
import sys

from .subcommands import add_lazy_subcommands


# name -> (module, one-line help); a benchmark's module is imported only when it runs.
BENCHMARKS = {
    "synth": ("depthpe.bench.synth", "time `depthpe synth` (render vs write) against the 60 s quickstart target"),
    "convert": ("depthpe.bench.convert",
                "time `depthpe convert` on generated fake datasets in each native layout (frames/s per worker)"),
    "attention": ("depthpe.bench.attention",
                  "time and peak memory of one global attention layer per positional encoding"),
    "train": ("depthpe.bench.train",
              "training step time split into data/forward/backward/optimizer, images/s and peak memory"),
    "data": ("depthpe.bench.data", "data loader throughput (samples/s, images/s per worker) for a training "
             "config and several worker counts"),
    "gpu-check": ("depthpe.bench.gpu_check", "one-command GPU recipe check: attention at S=24/T=1374 bf16, "
                  "VGGT-1B train step, 200-step loss check"),
    "memory": ("depthpe.bench.memory",
               "predict peak training memory per GPU (params, grads, AdamW state, activations) without a GPU"),
    "model": ("depthpe.bench.model", "forward + backward time and peak memory of the model alone for a config"),
    "data-scale": ("depthpe.bench.data_scale", "the data tools at 1k/10k/100k scenes: index memory per loader "
                   "worker, the 2000 + 2000 validation draw, `depthpe index` / `depthpe check` throughput per worker"),
    "rehearsal": ("depthpe.bench.rehearsal", "a recipe end to end on the CPU at true size: train, SIGKILL, resume, "
                  "bf16 step, export, reload, eval, predict, push; memory prediction vs measured"),
}

# Studies that older versions ran as benchmarks: ``depthpe bench NAME`` still runs them (same options,
# same outputs) and says once that ``depthpe study NAME`` is their home now.
STUDY_ALIASES = ("correspondence", "camera-noise", "cameras-only")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .study import STUDIES

    aliases = {name: (STUDIES[name][0], f"(moved: `depthpe study {name}`) {STUDIES[name][1]}") for name in STUDY_ALIASES}
    add_lazy_subcommands(parser, {**BENCHMARKS, **aliases}, dest="benchmark", run_key="_bench_run",
                         metavar="BENCHMARK")


def run(args: argparse.Namespace) -> int:
    from ..config.command_line import USAGE_ERROR_STATUS, report_errors, require_output_file

    if args.benchmark in STUDY_ALIASES:
        print(f"note: `depthpe bench {args.benchmark}` is a study now: `depthpe study {args.benchmark}` "
              "(same options and outputs)", file=sys.stderr)
    with report_errors():
        if getattr(args, "json", None):  # every benchmark's --json FILE: refused before the benchmark runs
            require_output_file(args.json, "--json")
        return int(args._bench_run(args) or 0)
    return USAGE_ERROR_STATUS
