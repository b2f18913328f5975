"""``depthpe study correspondence``: can the global attention learn to find the true match, per encoding?

A tiny model (frozen random DINOv2-S backbone of one block, ``num_blocks`` frame/global block pairs,
global encoding ``--pe``) is trained on the synthetic scenes of ``--data`` with the correspondence
loss alone (``depthpe.run.correspondence``: every view queries the next with all its patches; with
``--depth-weight`` > 0 also with the depth loss through the DPT head), on the CPU, one run per
seed. At a few steps (the curve) it is evaluated on held-out scenes in every setting
(``correspondence_eval``): per global layer top-1 and within-1 accuracy and the probe's lift and
same-position control. Results: ``OUT/results.json`` (atomic) and ``OUT/summary.md``, the table
printed (docs/correspondence.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from pathlib import Path

from depthpe.studies.correspondence.config import CorrespondenceConfig

DESCRIPTION = """\
Train only the global attention path of a tiny model (frozen random backbone, the aggregator's
blocks, the encoding --pe) with the correspondence loss: the cross-entropy of each global layer's
attention scores of a query patch over the patches of the next view against its true patch (from
GT depth and cameras, occlusion-tested). Data: ROOT/<dataset>/train (--train-draws view subsets per
scene) and ROOT/<dataset>/val (held out), as written by `depthpe synth --out ROOT`. At --eval-steps
(default 0, 1/4, 1/2, 3/4 and all of --steps) every global layer is scored on the held-out scenes:
top1 and within1 (the head-averaged attention's best patch of the other view is the true one / within
one patch of it), lift and lift minus the same-position lift (docs/probe.md), in the base setting and
with --eval-views (more views than trained), --eval-zooms (zoomed in: other focal lengths),
--eval-rotation-noise / --eval-translation-noise (noisy input cameras). One run per --seeds.
Writes OUT/results.json and OUT/summary.md and prints the table (docs/correspondence.md)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from depthpe.config.command_line import add_config_arguments

    add_config_arguments(parser, CorrespondenceConfig)


def run(args: argparse.Namespace) -> int:
    from depthpe.config.command_line import run_config_command

    return run_config_command(args, CorrespondenceConfig, run_correspondence)


def build_model(cfg: CorrespondenceConfig, seed: int):
    """The tiny model of ``cfg`` (the ``tiny`` preset, random backbone), initialised from ``seed``."""
    import torch

    from depthpe.model import DepthModel, DepthModelConfig

    n = cfg.num_blocks
    config = DepthModelConfig.from_preset(
        "tiny", global_pe=cfg.pe, pe_options=cfg.pe_options(), plucker=cfg.plucker, embed_dim=cfg.embed_dim,
        num_blocks=n, num_heads=cfg.num_heads,
        layerscale_init=cfg.layerscale_init, head_layers=[round(i * (n - 1) / 3) for i in range(4)])
    torch.manual_seed(seed)
    return DepthModel(config, load_backbone_weights=False)


def train_steps(model, optimizer, pool: list[dict], cfg: CorrespondenceConfig, steps: range, generator) -> list[float]:
    """Run optimizer ``steps`` on batches drawn from ``pool`` with ``generator``; returns the losses."""
    import torch

    from depthpe.geometry import cyclic_pairs
    from depthpe.run.correspondence import forward_with_correspondence
    from depthpe.run.losses import depth_loss
    from depthpe.studies.correspondence.evaluation import batches

    patch = model.config.patch_size
    out = []
    for _ in steps:
        picked = torch.randint(len(pool), (cfg.batch_size,), generator=generator).tolist()
        images, K, w2c, depth, valid = batches([pool[i] for i in picked], cfg.batch_size)[0]
        grid = (images.shape[-2] // patch, images.shape[-1] // patch)
        forward = (lambda: model(images, K, w2c)) if cfg.depth_weight > 0 else (lambda: model.aggregator(images, K, w2c))
        pred, loss = forward_with_correspondence(model, forward, depth, valid, K, w2c, grid,
                                                 pairs=cyclic_pairs(images.shape[1]), depth_tolerance=cfg.depth_tolerance)
        if cfg.depth_weight > 0:
            loss = loss + cfg.depth_weight * depth_loss(pred["depth"], depth, valid)["total"]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g["params"]], 1.0)
        optimizer.step()
        out.append(float(loss.detach()))
    return out


def run_seed(cfg: CorrespondenceConfig, seed: int, pool: list[dict], held_out: dict[int, list[dict]], settings) -> dict:
    """One training run: {"seed", "curve": [{"step", "train_loss" (mean since the last point), "settings":
    {name: [layer rows]}}], "seconds"}."""
    import torch

    from depthpe.studies.correspondence.evaluation import evaluate_setting

    start = time.perf_counter()
    model = build_model(cfg, seed).train()
    head = set() if cfg.depth_weight > 0 else {id(p) for p in model.depth_head.parameters()}
    params = [p for p in model.parameters() if p.requires_grad and id(p) not in head]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    generator = torch.Generator().manual_seed(seed)
    curve, done = [], 0
    for point in cfg.checkpoints():
        losses = train_steps(model, optimizer, pool, cfg, range(done, point), generator)
        done = point
        model.eval()
        rows = {s.name: evaluate_setting(model, held_out[s.views], s, radii=cfg.radii,
                                         depth_tolerance=cfg.depth_tolerance, seed=seed) for s in settings}
        model.train()
        curve.append({"step": point, "train_loss": sum(losses) / len(losses) if losses else None, "settings": rows})
        base = _mean_row(rows["base"])
        loss = math.nan if curve[-1]["train_loss"] is None else curve[-1]["train_loss"]
        print(f"seed {seed} step {point}: train loss {loss:.4f}, base top1 "
              f"{base['top1']:.3f}, within1 {base['within1']:.3f}", flush=True)
    return {"seed": seed, "curve": curve, "seconds": time.perf_counter() - start}


def _mean_row(rows: list[dict]) -> dict:
    """The mean over layers of every number in ``rows`` (NaN left out)."""
    keys = [k for k in rows[0] if _is_number_key(k)] if rows else []
    return {k: _nanmean([r[k] for r in rows]) for k in keys}


def _is_number_key(key: str) -> bool:
    """Whether a layer row's ``key`` is a number averaged over layers or seeds (not the layer, the
    match count or a per-scene list)."""
    return key not in ("layer", "matches") and not key.startswith("scene_")


def _nanmean(values) -> float:
    finite = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    return sum(finite) / len(finite) if finite else math.nan


def summarize(runs: list[dict]) -> dict:
    """{setting: [layer rows averaged over seeds]} at the last step of every run."""
    out = {}
    for name in runs[0]["curve"][-1]["settings"]:
        per_seed = [run["curve"][-1]["settings"][name] for run in runs]
        out[name] = [{"layer": rows[0]["layer"], "matches": rows[0]["matches"],
                      **{k: _nanmean([r[k] for r in rows]) for k in rows[0] if _is_number_key(k)}}
                     for rows in zip(*per_seed)]
    return out


def format_summary(result: dict) -> str:
    """Markdown: the final table (setting x layer, mean over seeds) and the base curve (mean over layers)."""
    r0 = min(result["meta"]["radii"])
    lines = [f"# Correspondence task: {result['meta']['pe']} ({len(result['runs'])} seed(s), "
             f"{result['meta']['steps']} steps; chance top1 {result['meta']['chance_top1']:.3f})", "",
             f"| setting | layer | matches | top1 | within1 | lift r{r0} | lift - same r{r0} |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, rows in result["summary"].items():
        for row in rows:
            lines.append(f"| {name} | {row['layer']} | {row['matches']} | {row['top1']:.3f} | {row['within1']:.3f} | "
                         f"{row[f'lift_r{r0}']:.2f} | {row[f'lift_minus_same_r{r0}']:.2f} |")
    lines += ["", "| step | train loss | base top1 | base within1 |", "|---:|---:|---:|---:|"]
    for i, point in enumerate(result["runs"][0]["curve"]):
        means = [_mean_row(run["curve"][i]["settings"]["base"]) for run in result["runs"]]
        loss = _nanmean([run["curve"][i]["train_loss"] for run in result["runs"]])
        lines.append(f"| {point['step']} | {loss:.4f} | {_nanmean([m['top1'] for m in means]):.3f} | "
                     f"{_nanmean([m['within1'] for m in means]):.3f} |")
    return "\n".join(lines) + "\n"


def run_correspondence(cfg: CorrespondenceConfig) -> dict:
    """The whole benchmark (module docstring); returns the result written to ``cfg.out``/results.json.
    Raises ``ConfigError`` for missing data or data without usable scenes, and for a ``cfg.out`` that
    holds other outputs (``depthpe.files.output_folder``, before anything runs; ``--overwrite``)."""
    from depthpe.files.output_folder import owned_output_folder, settings_fingerprint

    fingerprint = settings_fingerprint(cfg, leave_out=("threads",))
    with owned_output_folder(cfg.out, "depthpe study correspondence", fingerprint, replace=cfg.overwrite):
        return _run_correspondence(cfg)


def _run_correspondence(cfg: CorrespondenceConfig) -> dict:
    """``run_correspondence`` in the owned ``cfg.out``."""
    import torch

    from depthpe.config import ConfigError
    from depthpe.files import atomic_write_bytes
    from depthpe.studies.correspondence.evaluation import load_samples, settings_of

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    start = time.perf_counter()
    settings = settings_of(cfg)
    try:
        pool = load_samples(cfg.data, cfg.dataset, "train", cfg.views, cfg.image_width,
                            seeds=range(cfg.train_draws), max_scenes=cfg.train_scenes)
        held_out = {v: load_samples(cfg.data, cfg.dataset, "val", v, cfg.image_width, seeds=[0],
                                    max_scenes=cfg.eval_scenes) for v in sorted({s.views for s in settings})}
    except FileNotFoundError as err:
        raise ConfigError(str(err)) from None
    empty = [f"train ({cfg.views} views)"] * (not pool) + [f"val ({v} views)" for v, s in held_out.items() if not s]
    if empty:
        raise ConfigError(f"no usable scene in {cfg.data}/{cfg.dataset} for {', '.join(empty)}: generate more "
                          "frames per scene with `depthpe synth --views N` or lower --views / --eval-views")
    print(f"correspondence bench: {cfg.pe}, {len(pool)} training samples, "
          f"{len(held_out[cfg.views])} held-out scenes, {len(settings)} settings", flush=True)
    runs = [run_seed(cfg, seed, pool, held_out, settings) for seed in cfg.seeds]
    grid = cfg.image_width // 14
    meta = {**dataclasses.asdict(cfg), "grid": [grid, grid],
            "chance_top1": 1 / grid**2, "train_samples": len(pool),
            "eval_samples": {str(v): len(s) for v, s in held_out.items()},
            "eval_scenes_of": {str(v): [x["scene"] for x in s] for v, s in held_out.items()},
            "settings": [vars(s) for s in settings], "seconds": time.perf_counter() - start}
    result = {"meta": meta, "runs": runs, "summary": summarize(runs)}
    out = Path(cfg.out)
    atomic_write_bytes(out / "results.json", json.dumps(_strict(result), indent=1, allow_nan=False).encode())
    text = format_summary(result)
    atomic_write_bytes(out / "summary.md", text.encode())
    print("\n" + text + f"\nwrote {out}/results.json and summary.md ({meta['seconds']:.0f} s)")
    return result


def _strict(value):
    """``value`` with NaN / inf numbers as None (strict JSON) and tuples as lists."""
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
