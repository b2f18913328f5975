"""``depthpe bench NAME``: speed and memory benchmarks that print tables with ratios."""

from __future__ import annotations

import argparse

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
    "cameras-only": ("depthpe.bench.cameras_only", "how well the cameras alone predict the depth scale: a ridge "
                     "regression against the constant baselines (geometry-only scenes: docs/data.md)"),
    "data-scale": ("depthpe.bench.data_scale", "the data tools at 1k/10k/100k scenes: index memory per loader "
                   "worker, the 2000 + 2000 validation draw, `depthpe index` / `depthpe check` throughput per worker"),
    "correspondence": ("depthpe.bench.correspondence", "train the global attention of a tiny model on true cross-view "
                       "matches (correspondence loss) per encoding; per layer top-1 / within-1 accuracy and lift, "
                       "with more views, zoom and pose noise"),
    "camera-noise": ("depthpe.bench.camera_noise", "evaluate models at a list of input-camera noise levels (rotation, "
                     "translation, focal): per-level table with paired intervals, metric-vs-noise figure"),
    "rehearsal": ("depthpe.bench.rehearsal", "a recipe end to end on the CPU at true size: train, SIGKILL, resume, "
                  "bf16 step, export, reload, eval, predict, push; memory prediction vs measured"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_lazy_subcommands(parser, BENCHMARKS, dest="benchmark", run_key="_bench_run", metavar="BENCHMARK")


def run(args: argparse.Namespace) -> int:
    from .errors import USAGE_ERROR_STATUS, report_errors

    with report_errors():
        return int(args._bench_run(args) or 0)
    return USAGE_ERROR_STATUS
