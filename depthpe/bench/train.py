"""``depthpe bench train``: seconds per training step split into data / forward / backward /
optimizer, images/s and peak memory, for a config (single process, no Accelerate)."""

from __future__ import annotations

import argparse
import resource
import time

import torch

HELP = "training step time split into data/forward/backward/optimizer, images/s and peak memory"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="quickstart", help="run config: a YAML file or a shipped config name")
    parser.add_argument("--steps", type=int, default=20, help="steps timed after 3 warm-up steps")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--num-workers", type=int, default=1, help="data loader workers (default 1)")
    parser.add_argument("overrides", nargs="*", help="dotted config overrides, e.g. model.global_pe=prope")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run(args: argparse.Namespace) -> int:
    from ..data.dataset import build_train_loader
    from ..losses import depth_loss
    from ..run import load_run_config
    from ..run.building import build_model, default_cpu_threads

    cfg = load_run_config(args.config, args.overrides)
    device = torch.device(args.device)
    if device.type == "cpu":  # same choice as the training loop: no more threads than free cores
        torch.set_num_threads(cfg.train.torch_threads or default_cpu_threads(args.num_workers, 1))
    torch.manual_seed(cfg.seed)
    model = build_model(cfg).to(device).train()
    opt = torch.optim.AdamW(model.param_groups(cfg.optim.weight_decay), lr=cfg.optim.lr)
    warmup = 3
    it = iter(build_train_loader(cfg.data, seed=cfg.seed, num_workers=args.num_workers,
                                 num_steps=warmup + args.steps))
    totals = {"data": 0.0, "forward": 0.0, "backward": 0.0, "optimizer": 0.0}
    images = 0
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    for i in range(warmup + args.steps):
        t0 = time.perf_counter()
        batch = next(it)
        x = [batch[k].to(device) for k in ("images", "K", "w2c", "depth", "valid")]
        _sync(device)
        t1 = time.perf_counter()
        out = model(x[0], x[1], x[2])
        loss = depth_loss(out["depth"], x[3], x[4], gradient_weight=cfg.loss.gradient_weight)["total"]
        _sync(device)
        t2 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        _sync(device)
        t3 = time.perf_counter()
        opt.step()
        _sync(device)
        t4 = time.perf_counter()
        if i >= warmup:
            for key, dt in zip(totals, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                totals[key] += dt
            images += x[0].shape[0] * x[0].shape[1]
    step = sum(totals.values()) / args.steps
    if device.type == "cuda":
        peak = f"{torch.cuda.max_memory_allocated(device) / 2**20:.0f} MiB (CUDA max allocated)"
    else:
        peak = f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB (process peak RSS)"
    print(f"training step, {args.config} ({cfg.model_config().global_pe}), device {device}, "
          f"{args.num_workers} data worker(s), {torch.get_num_threads()} torch threads")
    print("| part | s/step | share |")
    print("|---|---|---|")
    for key, total in totals.items():
        print(f"| {key} | {total / args.steps:.4f} | {total / args.steps / step:.2f} |")
    print(f"| total | {step:.4f} | 1.00 |")
    print(f"images/s: {images / (step * args.steps):.1f}; peak memory: {peak}")
    return 0
