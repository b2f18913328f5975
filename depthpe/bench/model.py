"""``depthpe bench model``: time and peak memory of the model alone, forward + backward.

One step is ``model(images, K, w2c)["depth"].mean().backward()`` on fixed random images and the
camera ring of ``depthpe bench attention`` (no data loading, no loss, no optimizer): the protocol
of the side-by-side comparison with the official VGGT code in docs/benchmarks.md, so that
depthpe's side of that table can be repeated for any config. The model is the ``model`` section of
a run config (a YAML file or a shipped name) with dotted overrides, in training mode (frozen
backbone, ``model.gradient_checkpointing`` as configured).

Reported: the median and the spread ((max - min) / median) over ``--repeats`` timed steps after
``--warmup`` untimed ones, both as wall time and, on CPU, as process CPU time (less sensitive to
other jobs on a shared machine; equal to wall time x threads when nothing else runs), and the
extra peak memory of one step: on CUDA ``max_memory_allocated`` minus the memory before the step,
on CPU the peak resident set (``VmHWM``, reset through ``/proc/self/clear_refs``) minus the
resident set before it. ``--compile blocks`` compiles the aggregator blocks as ``train.compile``
does; ``--compile model`` compiles the whole ``forward`` (one graph).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from typing import Optional

import torch

from ..config.options import add_plain_options, option
from ..files import atomic_write_json
from .settings import JSON_HELP, BenchedRun


@dataclass
class ModelSettings(BenchedRun):
    """``depthpe bench model``: ``repeats`` timed forward + backward steps (after ``warmup``) of the
    model of the run ``config`` (with ``overrides``) on ``batch`` samples of ``views`` views of
    ``height`` x ``width`` pixels on ``device`` with ``threads`` CPU threads, ``compile``: none,
    blocks or model."""

    views: int = option(8, help="views S per sample")
    height: int = option(224, help="image height in pixels")
    width: int = option(224, help="image width in pixels")
    batch: int = option(1, help="samples per step")
    repeats: int = option(7, help="timed steps")
    warmup: int = option(1, help="untimed steps first (they compile)")
    threads: Optional[int] = option(None, help="torch CPU threads (none: torch's)")
    compile: str = option("none", choices=("none", "blocks", "model"),
                          help="compile the aggregator blocks (as train.compile) or the whole forward")
    device: str = option("cpu", help="cpu or cuda")
    json: Optional[str] = option(None, help=JSON_HELP)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_plain_options(parser, ModelSettings)


def _check_args(args) -> None:
    """Raise ``ConfigError`` (one line, exit status 2 on the command line) for unusable arguments."""
    from ..config import ConfigError

    patch = 14
    if args.views < 2:
        raise ConfigError(f"--views must be >= 2 (the model needs a second view), got {args.views}")
    if args.height % patch or args.width % patch or args.height <= 0 or args.width <= 0:
        raise ConfigError(f"--height and --width must be positive multiples of {patch}, got "
                         f"{args.height}x{args.width}")
    if args.repeats < 1 or args.warmup < 0 or args.batch < 1:
        raise ConfigError("--repeats and --batch must be >= 1 and --warmup >= 0")


def make_inputs(batch: int, views: int, height: int, width: int, device) -> tuple:
    """images (B,S,3,H,W) in [0,1], K (B,S,3,3) pixels, w2c (B,S,4,4) OpenCV world-to-camera, float32."""
    from .attention import make_cameras

    g = torch.Generator().manual_seed(0)
    images = torch.rand(batch, views, 3, height, width, generator=g)
    K, w2c = make_cameras(batch, views, (height, width), "cpu")
    return images.to(device), K.float().to(device), w2c.float().to(device)


def build(cfg, compile_mode: str, device):
    """The config's model on ``device`` in training mode, and the callable one step runs."""
    from ..run.building import build_model, compile_blocks, view_counts

    torch.manual_seed(cfg.seed)
    model = build_model(cfg).to(device).train()
    forward = model
    if compile_mode == "blocks":
        compile_blocks(model, view_counts=view_counts(cfg))
    elif compile_mode == "model":
        forward = torch.compile(model)
    return model, forward


def time_steps(model, forward, inputs, repeats: int, warmup: int) -> dict:
    """Wall and process-CPU seconds of ``repeats`` steps after ``warmup`` untimed ones."""
    from .train import _sync
    device = inputs[0].device

    def step():
        model.zero_grad(set_to_none=True)
        forward(*inputs)["depth"].mean().backward()
        _sync(device)

    warm = []
    for _ in range(warmup):
        t0 = time.perf_counter()
        step()
        warm.append(time.perf_counter() - t0)
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {"wall_s": wall, "cpu_s": cpu, "warmup_s": warm, "step": step}


def peak_step_mib(step, device) -> tuple[float, str]:
    """Extra peak memory (MiB) of one step beyond what is resident before it, and how it was measured."""
    from .attention import _reset_peak_rss, _status_mib

    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        return (torch.cuda.max_memory_allocated(device) - before) / 2**20, "cuda max_memory_allocated"
    if not _reset_peak_rss():
        return float("nan"), "unavailable (/proc/self/clear_refs not writable)"
    before = _status_mib("VmRSS")
    step()
    return _status_mib("VmHWM") - before, "cpu VmHWM - VmRSS"


def _stats(values: list[float]) -> tuple[float, float]:
    med = statistics.median(values)
    return med, (max(values) - min(values)) / med if med > 0 else 0.0


def run(args: argparse.Namespace) -> int:
    from ..run import load_run_config

    _check_args(args)
    cfg = load_run_config(args.config, args.overrides)
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    model, forward = build(cfg, args.compile, device)
    inputs = make_inputs(args.batch, args.views, args.height, args.width, device)
    timing = time_steps(model, forward, inputs, args.repeats, args.warmup)
    peak, kind = peak_step_mib(timing.pop("step"), device)
    mc = cfg.model_config()
    wall, wall_spread = _stats(timing["wall_s"])
    cpu, cpu_spread = _stats(timing["cpu_s"])
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"model forward+backward: {args.config} (global_pe {mc.global_pe}, width {mc.embed_dim}, "
          f"{mc.num_blocks}+{mc.num_blocks} blocks, checkpointing {mc.gradient_checkpointing}), "
          f"B={args.batch} S={args.views} {args.height}x{args.width}, {device}, "
          f"{torch.get_num_threads()} threads, compile {args.compile}, median of {args.repeats}")
    print("| step wall ms | spread | step CPU ms | spread | images/s | peak MiB | trainable params |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {wall * 1e3:.1f} | {wall_spread:.2f} | {cpu * 1e3:.1f} | {cpu_spread:.2f} | "
          f"{args.batch * args.views / wall:.2f} | {peak:.0f} | {trainable / 1e6:.2f} M |")
    print(f"warm-up steps (s): {[round(t, 2) for t in timing['warmup_s']]}; peak memory: {kind}")
    if args.json:
        atomic_write_json(args.json, {
            "config": args.config, "overrides": list(args.overrides), "device": str(device), "views": args.views,
            "height": args.height, "width": args.width, "batch": args.batch, "compile": args.compile,
            "threads": torch.get_num_threads(), "peak_mib": peak, "peak_kind": kind, **timing})
    return 0
