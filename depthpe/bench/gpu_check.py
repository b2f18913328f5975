"""``depthpe bench gpu-check --out DIR``: the recipe check for a machine with one GPU, in one command.

Four parts, each run as its own ``depthpe`` subprocess with a time limit (a part that fails or
times out is reported and the next one runs), written to ``DIR/report.json`` and ``DIR/report.md``:

0. ``fused``: ``depthpe bench attention --check-fused`` at S=8 views of 261 tokens in bfloat16: the
   camera encodings' and URoPE's fused attention functions (on the GPU, around FlashAttention)
   against their plain path, output and gradients.
1. ``attention``: ``depthpe bench attention`` at S=24 views, T=1374 tokens per view (5 special +
   37x37 patches of a 518 px image), 16 heads of 64 channels, bfloat16, every preset encoding on its
   default path and ``prope`` and ``urope`` also with ``fused_attention=on`` (time and peak-memory
   ratios to RoPE).
2. ``train``: ``depthpe bench train`` of the ``vggt1b_rope`` recipe (VGGT-1B sizes, bfloat16,
   gradient checkpointing, random backbone: nothing is downloaded) at S=24 views of 518x518 on
   synthetic scenes: images/s and peak CUDA memory.
3. ``recipe``: 200 steps of a reduced recipe (``vggt1b_rope`` at 224 px, 2-8 views) on the
   synthetic scenes; passes when the mean training loss over the last quarter of the logged steps
   is below the mean over the first quarter (``loss/total`` from the run's TensorBoard events).

It aims at under 10 minutes on one recent GPU. ``--tiny`` shrinks every part to a CPU-sized
check of the plumbing (the tests use it); its numbers mean nothing, and its loss check is only
reported (40 CPU steps of the tiny model are too noisy to gate on).

``--scale PX`` rehearses the GPU check on a CPU at the true model size: the same ``vggt1b_rope``
model (embed_dim 1024, 24 frame + 24 global blocks, 16 heads of 64, the ViT-L backbone), bfloat16
autocast and gradient checkpointing, through every part's real code path, but at 2 views of PX x PX
px (a multiple of 14; 28 is the smallest that keeps several patches per view) and 1-2 steps per
part; the attention part keeps its 16 heads of 64 channels. Its loss check is only reported. It
then prints what the GPU run would measure and an **estimate** of how long it should take: the
FLOPs of one training step at the GPU sizes and at the rehearsal's sizes are counted on fake tensors
(``torch.utils.flop_counter``; checkpointing's recomputation included), the rehearsal's measured
forward+backward time gives this CPU's rate, and the GPU time is FLOPs / ``--gpu-tflops`` (an
assumed sustained bf16 rate, default 300 TFLOP/s), next to what this CPU would need at its rate.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..config.options import REQUIRED, add_plain_options, option, overwrite_option

DESCRIPTION = __doc__


PART_TIMEOUT_S = 420.0  # seconds per part (a GPU run aims at under 10 minutes in all)
SCALED_PART_TIMEOUT_S = 1800.0  # with --scale, whose CPU steps take minutes


@dataclass
class GpuCheckSettings:
    """``depthpe bench gpu-check``: the three parts on ``device`` written to ``out``; ``tiny``: the
    CPU-sized plumbing check; ``scale``: the CPU rehearsal at ``scale`` px with a GPU time estimate at
    ``gpu_tflops``; ``part_timeout``: seconds per part (None: ``PART_TIMEOUT_S``, with ``scale``
    ``SCALED_PART_TIMEOUT_S``)."""

    out: str = option(REQUIRED, help="report folder (synthetic scenes and runs go there too)")
    overwrite: bool = overwrite_option()
    device: str = option("cuda", choices=("cuda", "cpu"), help="torch device of the parts")
    tiny: bool = option(False, store_true=True, help="CPU-sized plumbing check (numbers mean nothing)")
    scale: Optional[int] = option(None, metavar="PX", help="rehearse on CPU at the true model size with 2 views "
                                  "of PX x PX px (a multiple of 14, e.g. 28) and 1-2 steps per part; prints a GPU "
                                  "time estimate (none: the GPU check itself)")
    gpu_tflops: float = option(300.0, help="assumed sustained bf16 TFLOP/s of the GPU for the --scale estimate")
    part_timeout: Optional[float] = option(None, help=f"seconds per part (none: {PART_TIMEOUT_S:g}; "
                                           f"{SCALED_PART_TIMEOUT_S:g} with --scale, whose CPU steps take minutes)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_plain_options(parser, GpuCheckSettings)


GPU_SIZES = {"train": (24, 1, 518), "recipe": (5, 3, 224)}  # (S, B, px) of a step; recipe: S 2-8, mid
GPU_STEPS = {"train": 3 + 10, "recipe": 200}  # bench train's 3 warm-up + 10 timed steps; the recipe's
GPU_ATTENTION = (24, 1374, 5)  # views, tokens per view, repeats of the attention part on the GPU
SCALED_TRAIN_STEPS = 1  # timed steps of the rehearsal's train part
FUSED_METHODS = ("prope", "gta", "dppe_dual", "dppe_tadd", "urope")  # the methods with fused attention functions
# the attention part on the GPU: every preset on its default path (plain on CUDA) and two with the fused functions
GPU_ATTENTION_METHODS = ("none", "rope", *FUSED_METHODS, "prope,fused_attention=on", "urope,fused_attention=on")


def _scaled_args(scale: int) -> tuple[list[str], list[str], list[str]]:
    """(attention, train, recipe) arguments of the ``--scale`` rehearsal: true model sizes, 2 views of
    ``scale`` px, 1-2 steps."""
    shape = [f"data.image_width={scale}", "data.views=[2,2]", "data.aspect=[1.0,1.0]", "data.max_images_per_batch=2"]
    att = ["--views", "2", "--tokens-per-view", str(5 + (scale // 14) ** 2), "--heads", "16", "--head-dim", "64",
           "--dtype", "bfloat16", "--repeats", "1", "--no-memory"]
    train = ["--config", "vggt1b_rope", "--steps", str(SCALED_TRAIN_STEPS), "--warmup", "1", "--num-workers", "0",
             "model.pretrained=false", "model.gradient_checkpointing=true", "train.mixed_precision=bf16", *shape]
    recipe = ["--config", "vggt1b_rope", "model.pretrained=false", "model.gradient_checkpointing=true",
              "train.mixed_precision=bf16", "train.steps=2", "optim.warmup_steps=1", *shape, "train.log_every=1",
              "train.num_workers=0", "train.checkpoint_every=0", "val.sources=[]", "train.report_to=[tensorboard]"]
    return att, train, recipe


def _plan(out: Path, device: str, tiny: bool, scale: int | None = None) -> dict[str, list[str]]:
    """The ``depthpe`` argument lists of the parts (``scale``: the true-size rehearsal's)."""
    data, att = out / "data", ["--views", "24", "--tokens-per-view", "1374", "--dtype", "bfloat16", "--repeats", "5",
                               "--methods", *GPU_ATTENTION_METHODS]
    train = ["--config", "vggt1b_rope", "--steps", "10", "--num-workers", "8", "model.pretrained=false",
             "model.gradient_checkpointing=true", "train.mixed_precision=bf16", "data.views=[24,24]",
             "data.aspect=[1.0,1.0]", "data.max_images_per_batch=24"]
    recipe = ["--config", "vggt1b_rope", "model.pretrained=false", "train.steps=200", "optim.warmup_steps=20",
              "data.image_width=224", "data.views=[2,8]", "data.max_images_per_batch=16", "train.log_every=10",
              "train.num_workers=8", "train.checkpoint_every=0", "val.sources=[]", "train.report_to=[tensorboard]"]
    if tiny:
        att = ["--views", "2", "--tokens-per-view", "21", "--heads", "4", "--head-dim", "32", "--repeats", "2",
               "--no-memory"]
        train = ["--config", "quickstart", "--steps", "2", "--num-workers", "0", "data.image_width=42"]
        recipe = ["--config", "quickstart", "train.steps=40", "optim.warmup_steps=5", "data.image_width=42",
                  "train.log_every=5", "train.num_workers=0", "train.checkpoint_every=0", "val.sources=[]",
                  "train.report_to=[tensorboard]"]
    if scale:
        att, train, recipe = _scaled_args(scale)
    source = f"data.sources=[{{name: synth, root: {data}, split: train}}]"
    cpu = ["train.cpu=true"] if device == "cpu" else []
    fused = ["--views", "2", "--tokens-per-view", "21", "--heads", "4", "--head-dim", "32"] if tiny or scale else \
        ["--views", "8", "--tokens-per-view", "261"]
    return {
        "fused": ["bench", "attention", "--device", device, "--check-fused", *fused, "--dtype", "bfloat16",
                  "--methods", *FUSED_METHODS, "--json", str(out / "fused.json")],
        "attention": ["bench", "attention", "--device", device, *att, "--json", str(out / "attention.json")],
        "train": ["bench", "train", "--device", device, *train, source, "--json", str(out / "train.json")],
        "recipe": ["train", *recipe, source, f"output_dir={out / 'recipe'}", *cpu],
    }


def _run_part(name: str, argv: list[str], timeout: float, out: Path) -> dict:
    """Run one part; returns {"ok", "seconds", "log", "error"?}."""
    log = out / f"{name}.log"
    started = time.perf_counter()
    try:
        with open(log, "w") as f:
            done = subprocess.run([sys.executable, "-m", "depthpe.cli", *argv], stdout=f, stderr=subprocess.STDOUT,
                                  timeout=timeout)
        ok, error = done.returncode == 0, None if done.returncode == 0 else f"exit status {done.returncode}"
    except subprocess.TimeoutExpired:
        ok, error = False, f"timed out after {timeout:.0f} s"
    result = {"ok": ok, "seconds": round(time.perf_counter() - started, 1), "log": str(log)}
    return result if ok else {**result, "error": error}


def loss_trend(run_dir: Path, tag: str = "loss/total") -> tuple[float, float] | None:
    """(mean of the first quarter, mean of the last quarter) of the values of ``tag`` logged in a
    run's TensorBoard events, in step order; None with fewer than 4 points."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    points = []
    for events in sorted((run_dir / "logs").rglob("events.out.tfevents*")):
        acc = EventAccumulator(str(events))
        acc.Reload()
        if tag in acc.Tags().get("scalars", []):
            points += [(e.step, e.value) for e in acc.Scalars(tag)]
    points.sort()
    if len(points) < 4:
        return None
    quarter = len(points) // 4
    values = [v for _, v in points]
    return sum(values[:quarter]) / quarter, sum(values[-quarter:]) / quarter


def _summaries(out: Path, parts: dict, gate_loss: bool) -> None:
    """Add the measured numbers of each finished part to ``parts``; the recipe passes only if its
    loss falls when ``gate_loss``."""
    if (out / "fused.json").is_file():  # written also when the check fails
        parts["fused"]["results"] = json.loads((out / "fused.json").read_text())["check_fused"]
    if parts["attention"]["ok"]:
        results = json.loads((out / "attention.json").read_text())["results"]
        parts["attention"]["results"] = results
    if parts["train"]["ok"]:
        doc = json.loads((out / "train.json").read_text())
        parts["train"].update({k: doc[k] for k in ("images_per_s", "step_s", "peak_mib", "peak_kind")})
        parts["train"]["seconds_per_part"] = doc["seconds"]
    if parts["recipe"]["ok"]:
        trend = loss_trend(out / "recipe")
        parts["recipe"]["loss_first_last"] = trend
        parts["recipe"]["loss_falls"] = bool(trend and trend[1] < trend[0])
        parts["recipe"]["ok"] = parts["recipe"]["loss_falls"] or not gate_loss


def _markdown(report: dict) -> str:
    """The report as Markdown: one line per part, then the attention table."""
    lines = [f"# depthpe GPU check ({report['device']})", ""]
    for name, part in report["parts"].items():
        status = "ok" if part["ok"] else f"FAILED ({part.get('error', 'check failed')})"
        extra = ""
        if name == "train" and part["ok"]:
            extra = f": {part['images_per_s']:.3g} images/s, peak {part['peak_mib']:.0f} MiB ({part['peak_kind']})"
        if name == "recipe" and part.get("loss_first_last"):
            first, last = part["loss_first_last"]
            extra = f": mean loss first quarter {first:.4f}, last quarter {last:.4f}"
        lines.append(f"- {name}: {status} in {part['seconds']} s{extra}")
    for views, check in report["parts"]["fused"].get("results", {}).items():
        from .attention_check import format_check

        lines += ["", f"fused attention functions against the plain path (S={views}, bfloat16):", "",
                  format_check(check)]
    results = report["parts"]["attention"].get("results")
    if results:
        from .attention import format_table

        lines += ["", format_table(results)]
    if report.get("estimate"):
        lines += _estimate_markdown(report["estimate"])
    return "\n".join(lines) + "\n"


def step_flops(sizes: list[tuple[int, int, int]]) -> list[int]:
    """FLOPs of one ``vggt1b_rope`` training step (bf16 autocast, gradient checkpointing: forward,
    loss, backward with recomputation, clipping, AdamW) for each (views S, samples B, width px) of
    ``sizes`` (square views), counted by ``torch.utils.flop_counter`` on fake tensors (nothing is
    computed; the model is built once)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode

    from ..run import load_run_config
    from .memory import Setting, build_training, cuda_rules, make_cameras_real, rules_in_recomputation, train_step

    cfg = load_run_config("vggt1b_rope", ["model.pretrained=false"])
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    model, opt = build_training(Setting(cfg, 2, 1, 518, 518, "bf16", True, "cuda"), fake)
    counts = []
    for views, batch, width in sizes:
        setting = Setting(cfg, views, batch, width, width, "bf16", True, "cuda")
        K, w2c = make_cameras_real(setting)
        with fake:
            inputs = {"images": torch.empty(batch, views, 3, width, width), "K": K, "w2c": w2c,
                      "depth": torch.empty(batch, views, width, width),
                      "valid": torch.empty(batch, views, width, width, dtype=torch.bool)}
        with fake, rules_in_recomputation(model, cuda_rules(setting)), FlopCounterMode(display=False) as counter:
            train_step(model, opt, inputs, setting)
        counts.append(int(counter.get_total_flops()))
    return counts


def attention_flops(views: int, tokens: int, heads: int = 16, head_dim: int = 64) -> int:
    """FLOPs of one global attention (scores and weighted sum, 2 matmuls of 2 FLOPs per multiply-add)
    over ``views`` x ``tokens`` tokens."""
    n = views * tokens
    return 4 * n * n * heads * head_dim


def gpu_estimate(scale: int, parts: dict, gpu_tflops: float) -> dict | None:
    """Estimated seconds of each part at the GPU sizes: counted FLOPs / ``gpu_tflops``, and at this
    CPU's rate measured by the rehearsal's train part (forward + backward seconds of its step of
    ``scale`` px, whose FLOPs are counted likewise). None when the train part failed."""
    if not parts["train"]["ok"]:
        return None
    seconds = parts["train"]["seconds_per_part"]
    names = list(GPU_SIZES)
    scaled, *full = step_flops([(2, 1, scale), *(GPU_SIZES[name] for name in names)])
    cpu_rate = SCALED_TRAIN_STEPS * scaled / (seconds["forward"] + seconds["backward"])
    flops = {name: GPU_STEPS[name] * f for name, f in zip(names, full)}
    views, tokens, repeats = GPU_ATTENTION
    methods = len(parts["attention"].get("results") or []) or 1
    flops["attention"] = repeats * methods * attention_flops(views, tokens)
    return {"gpu_tflops": gpu_tflops, "cpu_gflops": cpu_rate / 1e9,
            "parts": {name: {"tflop": f / 1e12, "gpu_s": f / (gpu_tflops * 1e12), "cpu_h": f / cpu_rate / 3600}
                      for name, f in flops.items()}}


WOULD_MEASURE = {
    "attention": "time and peak memory of each encoding relative to RoPE, S=24 x 1374 tokens, bf16",
    "train": "images/s and peak CUDA memory of vggt1b_rope at S=24 views of 518 px, bf16, checkpointing",
    "recipe": "200 steps at 224 px, 2-8 views: the training loss must fall",
}


def _estimate_markdown(estimate: dict) -> list[str]:
    """The ESTIMATE table of a ``--scale`` report."""
    lines = ["", f"## ESTIMATE for the GPU run (assumed {estimate['gpu_tflops']:g} TFLOP/s sustained bf16; "
             f"this CPU ran at {estimate['cpu_gflops']:.1f} GFLOP/s)", "",
             "| part | what it measures on the GPU | TFLOP | est. GPU s | this CPU, h |", "|---|---|---|---|---|"]
    for name, e in estimate["parts"].items():
        lines.append(f"| {name} | {WOULD_MEASURE[name]} | {e['tflop']:.1f} | {e['gpu_s']:.0f} | {e['cpu_h']:.1f} |")
    total = sum(e["gpu_s"] for e in estimate["parts"].values())
    lines += ["", f"Estimated GPU compute: {total:.0f} s, plus model builds, data loading and the synthetic "
              "scenes (FLOPs only; an estimate, not a measurement)."]
    return lines


def run(args: argparse.Namespace) -> int:
    if args.scale is not None and (args.tiny or args.scale < 14 or args.scale % 14):
        raise SystemExit(f"--scale must be a positive multiple of 14 (the patch size) and not used with --tiny, "
                         f"got {args.scale}")
    from ..files.output_folder import owned_output_folder, settings_fingerprint

    with owned_output_folder(args.out, "depthpe bench gpu-check", settings_fingerprint(args, leave_out=("part_timeout",)),
                             replace=args.overwrite):
        return _check_into(args)


def _check_into(args: argparse.Namespace) -> int:
    """``run`` in the owned ``args.out``."""
    from ..files import atomic_write_bytes

    timeout = args.part_timeout or (SCALED_PART_TIMEOUT_S if args.scale else PART_TIMEOUT_S)
    out = Path(args.out)
    size = ["--height", "532", "--width", "532"]
    if args.tiny or args.scale:
        px = str(2 * args.scale) if args.scale else "56"
        size = ["--height", px, "--width", px, "--train-scenes", "6"]
    prepare = _run_part("synth", ["synth", "--out", str(out / "data"), "--val-scenes", "1", *size], timeout, out)
    parts = {name: _run_part(name, argv, timeout, out) if prepare["ok"] else dict(prepare)
             for name, argv in _plan(out, args.device, args.tiny, args.scale).items()}
    _summaries(out, parts, gate_loss=not (args.tiny or args.scale))
    report = {"device": args.device, "tiny": args.tiny, "scale": args.scale, "synth": prepare, "parts": parts}
    if args.scale:
        report["estimate"] = gpu_estimate(args.scale, parts, args.gpu_tflops)
    atomic_write_bytes(out / "report.json", json.dumps(report, indent=1, default=float).encode())
    text = _markdown(report)
    atomic_write_bytes(out / "report.md", text.encode())
    print(text, end="")
    return 0 if all(p["ok"] for p in parts.values()) else 1
