"""``depthpe bench data``: training data loader throughput (samples/s and images/s) per worker count."""

from __future__ import annotations

import argparse
import time

HELP = "data loader throughput (samples/s) for a training config and several worker counts"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="quickstart", help="run config (its data section): a YAML file or a shipped config name")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2], help="worker counts to measure")
    parser.add_argument("--batches", type=int, default=30, help="batches timed per worker count (after warm-up)")
    parser.add_argument("overrides", nargs="*", help="dotted config overrides, e.g. data.image_width=224")


def measure_loader(data_cfg, *, num_workers: int, batches: int, seed: int = 0) -> dict:
    """Time ``batches`` batches of the training loader after a warm-up of ``max(2, num_workers)``
    batches. Returns samples/s, images/s and seconds per batch."""
    from ..data.dataset import build_train_loader

    warmup = max(2, num_workers)
    loader = build_train_loader(data_cfg, seed=seed, num_workers=num_workers, num_steps=warmup + batches)
    it = iter(loader)
    for _ in range(warmup):
        next(it)
    samples = images = 0
    t0 = time.perf_counter()
    for batch in it:
        samples += batch["images"].shape[0]
        images += batch["images"].shape[0] * batch["images"].shape[1]
    dt = time.perf_counter() - t0
    return {"samples_per_s": samples / dt, "images_per_s": images / dt, "s_per_batch": dt / batches}


def run(args: argparse.Namespace) -> int:
    from ..run import load_run_config

    cfg = load_run_config(args.config, args.overrides)
    rows = [(w, measure_loader(cfg.data, num_workers=w, batches=args.batches, seed=cfg.seed)) for w in args.workers]
    base = rows[0][1]["samples_per_s"]
    print(f"data loader, {args.config}: width {cfg.data.image_width}, views {cfg.data.views}, "
          f"{cfg.data.max_images_per_batch} images per batch")
    print("| workers | samples/s | images/s | s/batch | x first row |")
    print("|---|---|---|---|---|")
    for w, r in rows:
        print(f"| {w} | {r['samples_per_s']:.1f} | {r['images_per_s']:.1f} | {r['s_per_batch']:.3f} | "
              f"{r['samples_per_s'] / base:.2f} |")
    return 0
