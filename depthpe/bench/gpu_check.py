"""``depthpe bench gpu-check --out DIR``: the recipe check for a machine with one GPU, in one command.

Three parts, each run as its own ``depthpe`` subprocess with a time limit (a part that fails or
times out is reported and the next one runs), written to ``DIR/report.json`` and ``DIR/report.md``:

1. ``attention``: ``depthpe bench attention`` at S=24 views, T=1374 tokens per view (5 special +
   37x37 patches of a 518 px image), 16 heads of 64 channels, bfloat16, every preset encoding
   (time and peak-memory ratios to RoPE).
2. ``train``: ``depthpe bench train`` of the ``vggt1b_rope`` recipe (VGGT-1B sizes, bfloat16,
   gradient checkpointing, random backbone: nothing is downloaded) at S=24 views of 518x518 on
   synthetic scenes: images/s and peak CUDA memory.
3. ``recipe``: 200 steps of a reduced recipe (``vggt1b_rope`` at 224 px, 2-8 views) on the
   synthetic scenes; passes when the mean training loss over the last quarter of the logged steps
   is below the mean over the first quarter (``loss/total`` from the run's TensorBoard events).

It aims at under 10 minutes on one recent GPU. ``--tiny`` shrinks every part to a CPU-sized
check of the plumbing (the tests use it); its numbers mean nothing, and its loss check is only
reported (40 CPU steps of the tiny model are too noisy to gate on).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

DESCRIPTION = __doc__


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="report folder (synthetic scenes and runs go there too)")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--tiny", action="store_true", help="CPU-sized plumbing check (numbers mean nothing)")
    parser.add_argument("--part-timeout", type=float, default=420.0, help="seconds per part (default 420)")


def _plan(out: Path, device: str, tiny: bool) -> dict[str, list[str]]:
    """The ``depthpe`` argument lists of the parts."""
    data, att = out / "data", ["--views", "24", "--tokens-per-view", "1374", "--dtype", "bfloat16", "--repeats", "5"]
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
    source = f"data.sources=[{{name: synth, root: {data}, split: train}}]"
    cpu = ["train.cpu=true"] if device == "cpu" else []
    return {
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
    if parts["attention"]["ok"]:
        results = json.loads((out / "attention.json").read_text())["results"]
        parts["attention"]["results"] = results
    if parts["train"]["ok"]:
        doc = json.loads((out / "train.json").read_text())
        parts["train"].update({k: doc[k] for k in ("images_per_s", "step_s", "peak_mib", "peak_kind")})
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
            extra = f": {part['images_per_s']:.1f} images/s, peak {part['peak_mib']:.0f} MiB ({part['peak_kind']})"
        if name == "recipe" and part.get("loss_first_last"):
            first, last = part["loss_first_last"]
            extra = f": mean loss first quarter {first:.4f}, last quarter {last:.4f}"
        lines.append(f"- {name}: {status} in {part['seconds']} s{extra}")
    results = report["parts"]["attention"].get("results")
    if results:
        from .attention import format_table

        lines += ["", format_table(results)]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from ..files import atomic_write_bytes

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    size = ["--height", "56", "--width", "56", "--train-scenes", "6"] if args.tiny else ["--height", "532", "--width", "532"]
    prepare = _run_part("synth", ["synth", "--out", str(out / "data"), "--val-scenes", "1", *size],
                        args.part_timeout, out)
    parts = {name: _run_part(name, argv, args.part_timeout, out) if prepare["ok"] else dict(prepare)
             for name, argv in _plan(out, args.device, args.tiny).items()}
    _summaries(out, parts, gate_loss=not args.tiny)
    report = {"device": args.device, "tiny": args.tiny, "synth": prepare, "parts": parts}
    atomic_write_bytes(out / "report.json", json.dumps(report, indent=1, default=float).encode())
    text = _markdown(report)
    atomic_write_bytes(out / "report.md", text.encode())
    print(text, end="")
    return 0 if all(p["ok"] for p in parts.values()) else 1
