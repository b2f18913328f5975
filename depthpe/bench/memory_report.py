"""What ``depthpe bench memory`` answers from its predictions: whether a step fits a GPU size, the
largest batch or number of views that fits (``largest``), and the printed report."""

from __future__ import annotations

import math
import sys
import time

from .memory_step import CAPACITIES_GB, CONTEXT_GIB, FRAGMENTATION, GIB, MIB, Setting, predict, table_unit



def fits(peak_bytes: int, capacity_gib: float) -> bool:
    """Whether a predicted allocated peak fits a GPU of ``capacity_gib``: peak * (1 + FRAGMENTATION)
    + CONTEXT_GIB (CUDA context, cuBLAS/cuDNN workspaces) must not exceed the capacity."""
    return peak_bytes / GIB * (1 + FRAGMENTATION) + CONTEXT_GIB <= capacity_gib


def breakdown_rows(result: dict, unit: int = GIB) -> list[tuple[str, float]]:
    """(part, size in ``unit`` bytes) rows of the breakdown table of one ``predict`` result."""
    r = {k: v / unit for k, v in result.items() if isinstance(v, int)}
    return [
        ("parameters, trainable (fp32)", r["params_trainable"]),
        ("parameters, frozen backbone", r["params_frozen"] + r["buffers"]),
        ("gradients (trainable)", r["grads"]),
        ("AdamW state (trainable)", r["optimizer"]),
        ("batch (images, depth, mask, cameras)", r["batch"]),
        *([("DDP gradient buckets", r["ddp_buckets"])] if r["ddp_buckets"] else []),
        ("activations saved for backward", r["saved"]),
        ("  live when the depth head starts (with autocast's low-precision weight copies)", r["saved_before_head"]),
        ("  added by the depth head and loss (net of those copies, freed when autocast ends)",
         r["saved"] - r["saved_before_head"]),
        (f"activations + grads + temporaries at the peak ({result['peak_phase']})", r["extra"]),
        ("peak (allocated)", r["peak"]),
    ]


def format_report(setting: Setting, result: dict, measured: dict | None = None,
                  fit: tuple[str, dict] | None = None) -> str:
    """The printed report: setting, breakdown table (GiB, or MiB below 1 GiB), which GPU sizes the
    setting fits, the largest sizes (``fit``: ("batch" | "views", {GB: value})) and the CPU
    measurement, when given."""
    d = setting.describe()
    unit, name = table_unit(result["peak"])
    lines = [f"training-step memory per GPU ({d['target']}): {setting.cfg.model.preset} "
             f"global_pe={d['global_pe']}, B={d['batch']} x S={d['views']} views of {d['height']}x{d['width']} px, "
             f"{d['precision']}, checkpointing {'on' if d['checkpointing'] else 'off'}",
             f"| part | {name} |", "|---|---|"]
    lines += [f"| {part} | {size:.3f} |" for part, size in breakdown_rows(result, unit)]
    margin = f"with {FRAGMENTATION:.0%} fragmentation + {CONTEXT_GIB:g} GiB CUDA context"
    if setting.target == "cuda":
        verdict = ", ".join(f"{c} GB: {'fits' if fits(result['peak'], c) else 'does not fit'}" for c in CAPACITIES_GB)
        lines.append(f"{margin}: {verdict}")
    if fit:
        field, found = fit
        lines.append(f"largest {'B' if field == 'batch' else 'S'} that fits ({margin}): "
                     + ", ".join(f"{c} GB: {_fit_text(field, n, d)}" for c, n in found.items()))
    if measured is not None:
        pred = result["extra"] / MIB
        lines.append(f"CPU check, extra memory of the step: predicted {pred:.1f} MiB, measured "
                     f"{measured['extra_mib']:.1f} MiB ({pred / measured['extra_mib'] - 1:+.1%})")
    return "\n".join(lines)


def _fit_text(field: str, n: int, d: dict) -> str:
    """"B=2 x S=24 (48 images)" for a ``largest`` answer ``n`` of ``field``; "none" for 0."""
    if not n:
        return "none"
    b, s = (n, d["views"]) if field == "batch" else (d["batch"], n)
    return f"B={b} x S={s} ({b * s} images)"


def largest(setting: Setting, field: str, progress=None, known: dict | None = None,
            capacities=CAPACITIES_GB) -> dict[int, int]:
    """{capacity GB: largest value of ``field`` ("batch" B, or "views" S) that ``fits``}, the other
    sizes as in ``setting``; 0 when not even the smallest value (B = 1, S = 2) fits. The
    forward/backward peak grows linearly in B and in S (attention memory is linear in tokens), so two
    predictions give a line (B = 1 and 2, or S and 2 S); each answer is then confirmed by predicting
    it and the next value (and moved until the first fits and the second does not).
    ``known``: {value: ``predict`` result} already computed."""
    say = progress or (lambda msg: None)
    cache: dict[int, dict] = dict(known or {})
    lo = 1 if field == "batch" else 2
    first = 1 if field == "batch" else setting.views

    def at(n: int) -> dict:
        if n not in cache:
            say(f"fit: predicting {field}={n}")
            sizes = {"views": setting.views, "batch": setting.batch, field: n}
            cache[n] = predict(setting.with_sizes(sizes["views"], sizes["batch"]))
        return cache[n]

    def activation_peak(n: int) -> int:
        return max(at(n)["phase_peaks"]["forward"], at(n)["phase_peaks"]["backward"])

    slope = (activation_peak(2 * first) - activation_peak(first)) / first
    out = {}
    for cap in capacities:
        limit = ((cap - CONTEXT_GIB) / (1 + FRAGMENTATION)) * GIB
        n = max(lo, first + math.floor((limit - activation_peak(first)) / slope)) if slope > 0 else lo
        while n > lo and not fits(at(n)["peak"], cap):
            n -= 1
        if not fits(at(n)["peak"], cap):
            out[cap] = 0
            continue
        while fits(at(n + 1)["peak"], cap):
            n += 1
        out[cap] = n
    return out


def progress_lines(quiet: bool):
    """A ``progress(message)`` that prints ``[  1.2 s] message`` lines on stderr (nothing if ``quiet``)."""
    t0 = time.perf_counter()

    def progress(message: str) -> None:
        if not quiet:
            print(f"[{time.perf_counter() - t0:5.1f} s] {message}", file=sys.stderr, flush=True)

    return progress
