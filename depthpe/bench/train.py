"""``depthpe bench train``: seconds per training step split into data / forward / backward /
optimizer, images/s and peak memory, for a config (single process, no Accelerate).

The model runs under ``torch.autocast`` with bfloat16 or float16 when the config's
``train.mixed_precision`` says so (as training does), and recomputes blocks when
``model.gradient_checkpointing`` is set. ``--compile`` compiles the aggregator blocks as
``train.compile=true`` does; the warm-up steps (which then include the compilation) are timed
separately."""

from __future__ import annotations

import argparse
import resource
import time
from dataclasses import dataclass
from typing import Optional

import torch

from ..config.options import add_plain_options, option
from ..files import atomic_write_json
from .settings import JSON_HELP, BenchedRun

PARTS = ("data", "forward", "backward", "optimizer")
WARMUP_STEPS = 3  # untimed steps before the timed ones (default of --warmup)


@dataclass
class TrainSettings(BenchedRun):
    """``depthpe bench train``: ``steps`` timed training steps of the run ``config`` (with
    ``overrides``) after ``warmup`` untimed ones on ``device``, ``num_workers`` loader workers;
    ``compile``: the aggregator blocks compiled (as ``train.compile=true``)."""

    steps: int = option(20, help="steps timed after the warm-up steps")
    warmup: int = option(WARMUP_STEPS, help="warm-up steps before the timed ones")
    compile: bool = option(False, store_true=True, help="compile the aggregator blocks (as train.compile=true)")
    device: str = option("cpu", help="cpu or cuda")
    num_workers: int = option(1, help="data loader workers")
    json: Optional[str] = option(None, help=JSON_HELP)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_plain_options(parser, TrainSettings)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _autocast(device: torch.device, mixed_precision: str):
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(mixed_precision)
    return torch.autocast(device_type=device.type, dtype=dtype or torch.float32, enabled=dtype is not None)


def measure(cfg, device: torch.device, steps: int, num_workers: int, *, warmup: int = WARMUP_STEPS,
            compile: bool = False) -> dict:
    """Time ``steps`` training steps of ``cfg`` after ``warmup`` untimed ones (with ``compile`` the
    aggregator blocks are compiled first, as ``train.compile`` does). Returns {"seconds": {part: total
    s}, "images", "step_s", "images_per_s", "warmup_s": [s per warm-up step], "peak_mib", "peak_kind"}."""
    from depthpe.loader.loaders import build_train_loader
    from ..run.losses import depth_loss
    from ..run.building import build_model, compile_blocks, view_counts

    torch.manual_seed(cfg.seed)
    model = build_model(cfg).to(device).train()
    if compile:
        compile_blocks(model, view_counts=view_counts(cfg))
    opt = torch.optim.AdamW(model.param_groups(cfg.optim.weight_decay), lr=cfg.optim.lr)
    it = iter(build_train_loader(cfg.data, seed=cfg.seed, num_workers=num_workers, num_steps=warmup + steps))
    totals, images, warmup_s = dict.fromkeys(PARTS, 0.0), 0, []
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    for i in range(warmup + steps):
        marks = [time.perf_counter()]

        def mark() -> None:
            _sync(device)
            marks.append(time.perf_counter())

        batch = next(it)
        x = [batch[k].to(device) for k in ("images", "K", "w2c", "depth", "valid")]
        mark()
        with _autocast(device, cfg.train.mixed_precision):
            out = model(x[0], x[1], x[2])
        loss = depth_loss(out["depth"].float(), x[3], x[4], gradient_weight=cfg.loss.gradient_weight)["total"]
        mark()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        mark()
        opt.step()
        mark()
        if i < warmup:
            warmup_s.append(marks[-1] - marks[0])
        else:
            for key, a, b in zip(PARTS, marks, marks[1:]):
                totals[key] += b - a
            images += x[0].shape[0] * x[0].shape[1]
    step = sum(totals.values()) / steps
    if device.type == "cuda":
        peak, kind = torch.cuda.max_memory_allocated(device) / 2**20, "CUDA max allocated"
    else:
        peak, kind = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "process peak RSS"
    return {"seconds": totals, "images": images, "step_s": step, "images_per_s": images / (step * steps),
            "warmup_s": warmup_s, "peak_mib": peak, "peak_kind": kind}


def run(args: argparse.Namespace) -> int:
    from ..run import load_run_config
    from ..run.building import default_cpu_threads
    from ..run.preflight import check_data_sources

    cfg = load_run_config(args.config, args.overrides)
    check_data_sources(cfg, validation=False)
    device = torch.device(args.device)
    if device.type == "cpu":  # same choice as the training loop: no more threads than free cores
        torch.set_num_threads(cfg.train.torch_threads or default_cpu_threads(args.num_workers, 1))
    compiled = args.compile or cfg.train.compile
    result = measure(cfg, device, args.steps, args.num_workers, warmup=args.warmup, compile=compiled)
    print(f"training step, {args.config} ({cfg.model_config().global_pe}), device {device}, "
          f"{cfg.train.mixed_precision} mixed precision, {args.num_workers} data worker(s), "
          f"{torch.get_num_threads()} torch threads, {'compiled' if compiled else 'eager'} aggregator blocks")
    print("| part | s/step | share |")
    print("|---|---|---|")
    for key, total in result["seconds"].items():
        print(f"| {key} | {total / args.steps:.4f} | {total / args.steps / result['step_s']:.2f} |")
    print(f"| total | {result['step_s']:.4f} | 1.00 |")
    print(f"warm-up steps (s, incl. compilation when compiled): {[round(t, 2) for t in result['warmup_s']]}")
    print(f"images/s: {result['images_per_s']:.1f}; peak memory: {result['peak_mib']:.0f} MiB ({result['peak_kind']})")
    if args.json:
        atomic_write_json(args.json, {"config": args.config, "overrides": list(args.overrides), "device": str(device),
                                      **result})
    return 0
