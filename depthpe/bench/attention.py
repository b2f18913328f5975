"""``depthpe bench attention``: time and peak memory of one global attention layer per encoding.

What is measured, per method, with the same path the model uses (``prepare_encoding`` once, then
``enc.attend(q, k, v)``):

* ``fwd+bwd ms``: median wall time of ``enc.attend(q, k, v)`` followed by ``backward`` of its output
  (q, k, v require grad), over ``--repeats`` runs after one warm-up; methods are interleaved
  round-robin so that load changes on a shared machine hit all of them alike. ``spread`` is
  (max - min) / median of those runs, a noise indicator.
* ``prepare ms``: median time of ``prepare_encoding`` (once per forward pass, shared by all global
  layers), reported separately and *not* included in fwd+bwd.
* ``peak MiB``: extra memory of one fwd+bwd on top of the inputs and the prepared encoding. On CUDA
  ``torch.cuda.max_memory_allocated`` minus the allocation before the call, in this process. On CPU each method runs
  in a fresh subprocess with ``MALLOC_MMAP_THRESHOLD_=65536`` (so freed tensors go back to the OS):
  after one warm-up fwd+bwd the peak-RSS counter is reset (``/proc/self/clear_refs``), and the
  figure is ``VmHWM`` after a second fwd+bwd minus ``VmRSS`` before it (torch's CPU allocator does
  not cache, so RSS follows live tensors; ``ru_maxrss`` is useless here because Linux carries it
  over from the parent process across exec).

Ratios are against ``rope`` (VGGT 2D RoPE around the same SDPA call). ``--compile`` adds, per method,
a row ``METHOD+compile``: the same attention call compiled with ``torch.compile`` (inductor; prepared
and compiled once, warm-up excluded), its ratios against ``rope+compile``, and a summary of compiled
over eager time per method. The reference method
``rope-per-view`` is RoPE computed with one SDPA call per query view, as URoPE must: its ratio is the
cost of that split alone.

``--methods`` takes preset names and pairs written ``qk=A,vo=B`` (``depthpe.pe.spec``);
more ``key=value`` items set encoding options, e.g. ``qk=KRtAdd2d,vo=KRtAdd2d,softmax=blockwise``
(the DPPE paper's appendix-A tAdd) or ``dppe_tadd,softmax=blockwise``.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F

from ..config.options import add_plain_options, option
from ..files import atomic_write_json
from ..pe import camera
from .attention_check import check_methods, format_check
from .methods import parse_method
from .settings import JSON_HELP

DESCRIPTION = __doc__

DEFAULT_METHODS = ("none", "rope", "prope", "dppe_dual", "dppe_tadd", "gta", "urope")
DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
          "float16": torch.float16}


@dataclass
class AttentionSettings:
    """``depthpe bench attention``: one global attention layer of ``batch`` samples of each S in
    ``views`` views of ``tokens_per_view`` tokens (``special`` of them not patches), ``heads`` heads
    of ``head_dim`` channels in ``dtype`` on ``device``, per method of ``methods``, the median of
    ``repeats`` runs on ``clock``; ``memory_child``: the method one child process measures."""

    views: list[int] = option(default_factory=lambda: [8], nargs="+", help="views S; several values measure a "
                              "scaling curve, one table each and a summary of the time ratios per S")
    tokens_per_view: int = option(261, help="tokens per view T = special + h*w , e.g. 261 = 5 + 16x16")
    special: int = option(5, help="special tokens per view")
    heads: int = option(16, help="attention heads")
    head_dim: int = option(64, help="channels per head")
    batch: int = option(1, help="samples B")
    methods: list[str] = option(default_factory=lambda: list(DEFAULT_METHODS), nargs="+",
                                help="presets, pairs qk=A,vo=B[,option=value] and the reference rope-per-view")
    device: str = option("cpu", choices=("cpu", "cuda"), help="torch device")
    dtype: str = option("float32", choices=tuple(sorted(DTYPES)), help="dtype of q, k and v")
    repeats: int = option(7, help="timed runs per method (after one warm-up)")
    threads: Optional[int] = option(None, help="torch CPU threads (none: torch's default); 1 is far less noisy "
                                    "on a shared, oversubscribed machine")
    clock: str = option("wall", choices=("wall", "cpu"), help="wall time or process CPU time, which on a shared "
                        "machine does not count the time other jobs hold the core (use with --threads 1)")
    no_memory: bool = option(False, store_true=True, help="skip the peak-memory runs")
    compile: bool = option(False, store_true=True, help="also measure every method compiled (torch.compile of the "
                           "attention call, inductor): rows METHOD+compile, compared with rope+compile")
    backend: str = option("inductor", help="torch.compile backend of --compile (aot_eager: tracing only, quick)")
    check_fused: bool = option(False, store_true=True, help="instead of timing, compare each method's fused attention "
                               "function with its plain path (output and gradients; exit status 1 above the "
                               "dtype's tolerance): the check of the fused kernels on a new device")
    head_chunks: Optional[int] = option(None, help="head slices the fused attention functions work on (none: "
                                        "depthpe.pe.camera.HEAD_CHUNKS of the device: 8 on CPU, 1 on CUDA; URoPE "
                                        "on CPU always works one head at a time); a tuning knob for a device")
    json: Optional[str] = option(None, help=JSON_HELP)
    memory_child: Optional[str] = option(None, flag="--_memory-child", hidden=True,
                                         help="the method whose peak memory this child process measures")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_plain_options(parser, AttentionSettings)


def grid_for(tokens_per_view: int, special: int) -> tuple[int, int]:
    """Most square (h, w) with h * w = tokens_per_view - special."""
    n = tokens_per_view - special
    if n < 1:
        raise ValueError(f"--tokens-per-view {tokens_per_view} leaves no patch tokens after "
                         f"{special} special tokens")
    h = max(d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0)
    return h, n // h


def make_cameras(batch: int, views: int, image_size, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalized random cameras: view 0 identity, others small rotations and unit-ish baselines."""
    g = torch.Generator().manual_seed(0)
    H, W = image_size
    skew = 0.15 * torch.randn(batch, views, 3, 3, generator=g, dtype=torch.float64)
    w2c = torch.eye(4, dtype=torch.float64).repeat(batch, views, 1, 1)
    w2c[..., :3, :3] = torch.linalg.matrix_exp(skew - skew.mT)
    w2c[..., :3, 3] = torch.randn(batch, views, 3, generator=g, dtype=torch.float64)
    w2c[:, 0] = torch.eye(4, dtype=torch.float64)
    K = torch.tensor([[0.9 * W, 0, (W - 1) / 2], [0, 0.9 * W, (H - 1) / 2], [0, 0, 1]],
                     dtype=torch.float64).expand(batch, views, 3, 3)
    return K.to(device), w2c.to(device)


PER_VIEW_REFERENCE = "rope-per-view"
COMPILED = "+compile"


class Compiled:
    """``enc.attend`` compiled with ``torch.compile`` (inductor), for one prepared encoding."""

    def __init__(self, enc, backend: str = "inductor"):
        self.enc = enc
        self.fn = torch.compile(lambda q, k, v: enc.attend(q, k, v), backend=backend)

    def attend(self, q, k, v):
        """q, k, v: (B, heads, S*T, head_dim) -> (B, heads, S*T, head_dim)."""
        return self.fn(q, k, v)


class RopePerView:
    """Benchmark reference, not an encoding: RoPE attention computed with one SDPA call per query
    view (queries of one view against all keys), as URoPE must (its keys are rotated differently for
    every query view). Same result as ``rope``; its time over ``rope``'s is the cost of splitting the
    attention by query view alone, the floor of any exact per-query-view encoding on this kernel."""

    def __init__(self, rope, tokens_per_view: int):
        self.rope, self.T = rope, tokens_per_view

    def attend(self, q, k, v, *, dropout_p: float = 0.0):
        """q, k, v: (B, heads, S*T, head_dim) -> (B, heads, S*T, head_dim)."""
        qr, kr = self.rope.transform_q(q), self.rope.transform_k(k)
        outs = [F.scaled_dot_product_attention(qc, kr, v, dropout_p=dropout_p) for qc in qr.split(self.T, dim=2)]
        return torch.cat(outs, dim=2)


class Setup:
    """Inputs of one benchmark configuration."""

    def __init__(self, args):
        self.grid = grid_for(args.tokens_per_view, args.special)
        self.image_size = (14 * self.grid[0], 14 * self.grid[1])
        self.device = torch.device(args.device)
        self.dtype = DTYPES[args.dtype]
        views = args.views[0] if isinstance(args.views, list) else args.views  # the first S of a curve
        self.K, self.w2c = make_cameras(args.batch, views, self.image_size, self.device)
        shape = (args.batch, args.heads, views * args.tokens_per_view, args.head_dim)
        g = torch.Generator(device=self.device).manual_seed(1)
        self.qkv = [torch.randn(shape, generator=g, device=self.device, dtype=self.dtype)
                    .requires_grad_() for _ in range(3)]
        self.grad = torch.randn(shape, generator=g, device=self.device, dtype=self.dtype)
        self.special = args.special
        self.backend = getattr(args, "backend", "inductor")

    def prepare(self, method: str):
        """Prepare ``method`` (a preset, ``qk=A,vo=B[,option=value...]`` (see ``parse_method``), or
        the reference ``rope-per-view``)."""
        from depthpe.pe import prepare_encoding

        if method.endswith(COMPILED):
            return Compiled(self.prepare(method[: -len(COMPILED)]), self.backend)
        if method == PER_VIEW_REFERENCE:
            return RopePerView(self.prepare("rope"), self.special + self.grid[0] * self.grid[1])
        spec, options = parse_method(method)
        return prepare_encoding(spec, K=self.K, w2c=self.w2c, image_size=self.image_size,
                                grid=self.grid, num_special=self.special, patch_offset=1, **options)

    def step(self, enc) -> None:
        for x in self.qkv:
            x.grad = None
        out = enc.attend(*self.qkv)
        out.backward(self.grad)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()


def _timed(fn, setup: Setup, clock=time.perf_counter) -> tuple[float, object]:
    """(milliseconds of ``fn()`` on ``clock``, its result); CUDA work is waited for."""
    setup.sync()
    t0 = clock()
    res = fn()
    setup.sync()
    return (clock() - t0) * 1e3, res


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def time_methods(setup: Setup, methods, repeats: int, clock: str = "wall") -> dict:
    encs = {m: setup.prepare(m) for m in methods}
    for m in methods:  # warm-up
        setup.step(encs[m])
    fb = {m: [] for m in methods}
    prep = {m: [] for m in methods}
    for _ in range(repeats):
        for m in methods:
            if m.endswith(COMPILED):  # prepared and compiled once (a new encoding would recompile)
                prep[m].append(float("nan"))
            else:
                ms, encs[m] = _timed(lambda: setup.prepare(m), setup, CLOCKS[clock])  # noqa: B023
                prep[m].append(ms)
            ms, _ = _timed(lambda: setup.step(encs[m]), setup, CLOCKS[clock])  # noqa: B023
            fb[m].append(ms)
    return {m: {"fwd_bwd_ms": statistics.median(fb[m]), "prepare_ms": statistics.median(prep[m]),
                "spread": (max(fb[m]) - min(fb[m])) / statistics.median(fb[m]),
                "runs_ms": fb[m]} for m in methods}


def _status_mib(field: str) -> float:
    """VmRSS / VmHWM of this process from /proc (Linux), in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"{field} not found in /proc/self/status (CPU memory needs Linux)")


def _reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False if not permitted."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_memory_mib(setup: Setup, method: str) -> float:
    """Extra peak memory (MiB) of one fwd+bwd in this process (see module docstring)."""
    enc = setup.prepare(method)
    if setup.device.type == "cuda":
        setup.step(enc)  # warm-up: the kernels' workspaces, the encoding's memoized tables
        for x in setup.qkv:
            x.grad = None
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        setup.step(enc)
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - before) / 2**20
    setup.step(enc)  # warm-up: one-time allocations (thread pools, caches) happen here
    for x in setup.qkv:
        x.grad = None
    if not _reset_peak_rss():  # fall back to measuring the first (cold) call
        enc = setup.prepare(method)
    before = _status_mib("VmRSS")
    setup.step(enc)
    return _status_mib("VmHWM") - before


def _child_argv(args, method: str) -> list[str]:
    argv = [sys.executable, "-m", "depthpe.bench.attention", "--_memory-child", method]
    views = args.views[0] if isinstance(args.views, list) else args.views
    for flag, val in (("--views", views), ("--tokens-per-view", args.tokens_per_view),
                      ("--special", args.special), ("--heads", args.heads),
                      ("--head-dim", args.head_dim), ("--batch", args.batch),
                      ("--device", args.device), ("--dtype", args.dtype),
                      ("--threads", args.threads or torch.get_num_threads()), ("--backend", args.backend)):
        argv += [flag, str(val)]
    return argv + (["--head-chunks", str(args.head_chunks)] if args.head_chunks else [])


def memory_methods(args, methods) -> dict:
    """Peak MiB per method: on CUDA in this process (``max_memory_allocated`` is reset per method),
    on CPU in a fresh child process per method (see module docstring)."""
    if args.device == "cuda":
        setup = Setup(args)
        return {m: peak_memory_mib(setup, m) for m in methods}
    out = {}
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    for m in methods:
        proc = subprocess.run(_child_argv(args, m), capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"memory run for {m} failed:\n{proc.stderr}")
        out[m] = float(proc.stdout.strip().splitlines()[-1])
    return out


def format_table(results: dict, base: str = "rope") -> str:
    """The results as a text table with time and memory ratios to ``base`` (``base+compile`` for the
    compiled rows)."""
    width = max(10, *(len(m) for m in results))
    head = f"{'method':<{width}} {'fwd+bwd ms':>11} {'x rope':>7} {'spread':>7} {'prepare ms':>11}"
    has_mem = any("peak_mib" in r for r in results.values())
    if has_mem:
        head += f" {'peak MiB':>9} {'x rope':>7}"
    lines = [head, "-" * len(head)]
    for m, r in results.items():
        b = results.get(base + COMPILED if m.endswith(COMPILED) else base)
        ratio = r["fwd_bwd_ms"] / b["fwd_bwd_ms"] if b else float("nan")
        line = (f"{m:<{width}} {r['fwd_bwd_ms']:>11.1f} {ratio:>7.3f} {r['spread']:>7.2f} "
                f"{r['prepare_ms']:>11.2f}")
        if has_mem:
            mr = r["peak_mib"] / b["peak_mib"] if b and b.get("peak_mib") else float("nan")
            line += f" {r['peak_mib']:>9.1f} {mr:>7.3f}"
        lines.append(line)
    return "\n".join(lines)


def _check_methods(args) -> None:
    for m in args.methods:
        if m == PER_VIEW_REFERENCE:
            continue
        try:
            parse_method(m)
        except ValueError as err:
            raise SystemExit(f"unknown method {m!r}: {err}") from None
    if args.compile and PER_VIEW_REFERENCE in args.methods:
        raise SystemExit(f"--compile does not apply to the reference {PER_VIEW_REFERENCE}; leave one of them out")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda requested but CUDA is not available")
    if any(s < 1 for s in args.views):
        raise SystemExit(f"--views must be >= 1, got {args.views}")
    if args.head_chunks is not None and args.head_chunks < 1:
        raise SystemExit(f"--head-chunks must be >= 1, got {args.head_chunks}")
    for name in ("repeats", "heads", "head_dim", "batch"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")


def _probe_methods(args) -> None:
    """Prepare and run every method once, without gradients, on 2 views of the configuration, so that
    one a method cannot take (heads that URoPE's anchors do not divide, a head dim that 2D RoPE
    cannot split, tokens with no patch left) is a one-line error before anything is timed, not a
    traceback in the middle of a table."""
    probe = argparse.Namespace(**{**vars(args), "views": 2, "batch": 1})
    try:
        setup = Setup(probe)
    except ValueError as err:
        raise SystemExit(str(err)) from None
    with torch.no_grad():
        for m in (m for m in measured_methods(args) if not m.endswith(COMPILED)):
            try:
                setup.prepare(m).attend(*setup.qkv)
            except ValueError as err:
                raise SystemExit(f"method {m!r} cannot run this configuration: {err}") from None


def measured_methods(args) -> list[str]:
    """The rows of one S: rope (always, the base of the ratios), the named methods, then with
    ``--compile`` each of them again as ``METHOD+compile``."""
    methods = list(dict.fromkeys((["rope"] if "rope" not in args.methods else []) + args.methods))
    return methods + [m + COMPILED for m in methods] if args.compile else methods


def measure_views(args, views: int) -> dict:
    """Time (and unless ``--no-memory`` peak memory) of every method at ``views`` views."""
    one = argparse.Namespace(**{**vars(args), "views": views})
    methods = measured_methods(args)
    results = time_methods(Setup(one), methods, args.repeats, args.clock)
    if not args.no_memory:
        for m, mib in memory_methods(one, methods).items():
            results[m]["peak_mib"] = mib
    return results


def format_curve(by_views: dict, base: str = "rope", key: str = "fwd_bwd_ms") -> str:
    """Markdown table: per method, the ratio of ``key`` (``fwd_bwd_ms`` or ``peak_mib``) to ``base``
    (``base+compile`` for compiled rows) at every S, with half the run spread for times."""
    views = list(by_views)
    lines = ["| method | " + " | ".join(f"S={s}" for s in views) + " |", "|---" * (len(views) + 1) + "|"]
    for m in by_views[views[0]]:
        b = base + COMPILED if m.endswith(COMPILED) else base
        cells = [f"{_ratio(r[m][key], r[b][key]):.2f}" + (f" (±{r[m]['spread'] / 2:.2f})" if key == "fwd_bwd_ms" else "")
                 for r in by_views.values()]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _ratio(a: float, b: float) -> float:
    """a / b, NaN for b = 0 (the peak memory of tiny configurations can measure 0)."""
    return a / b if b else float("nan")


def format_compiled(by_views: dict) -> str:
    """Markdown table: per method, compiled over eager fwd+bwd time (and peak memory) at every S."""
    views = list(by_views)
    lines = ["| method | " + " | ".join(f"S={s} time" for s in views)
             + "".join(f" | S={s} memory" for s in views if "peak_mib" in by_views[s].get("rope", {})) + " |"]
    lines.append("|---" * (len(lines[0].split("|")) - 2) + "|")
    for m in (m for m in by_views[views[0]] if not m.endswith(COMPILED)):
        cells = [f"{_ratio(r[m + COMPILED]['fwd_bwd_ms'], r[m]['fwd_bwd_ms']):.2f}" for r in by_views.values()]
        cells += [f"{_ratio(r[m + COMPILED]['peak_mib'], r[m]['peak_mib']):.2f}" for r in by_views.values()
                  if "peak_mib" in r[m]]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    args.views = args.views if isinstance(args.views, list) else [args.views]
    _check_methods(args)
    if not args.memory_child:  # the parent probed them
        _probe_methods(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    previous = dict(camera.HEAD_CHUNKS)
    if args.head_chunks:
        camera.HEAD_CHUNKS[args.device] = args.head_chunks
    try:
        with _dynamo_settings(args):
            return _run(args)
    finally:
        camera.HEAD_CHUNKS.clear()
        camera.HEAD_CHUNKS.update(previous)


def _dynamo_settings(args):
    """Dynamo settings under which every ``METHOD+compile`` row really runs compiled code.

    Every ``Compiled`` shares one code object, so dynamo keeps one cache entry per (method, S) for
    it; past ``recompile_limit`` (8 by default) it would silently run the rest eagerly. The limit is
    raised to the number of compiled rows (never lowered), and hitting it anyway is an error, not a
    quiet fallback."""
    if not args.compile:
        return contextlib.nullcontext()
    rows = len(measured_methods(args)) * len(args.views)
    limit = max(torch._dynamo.config.recompile_limit, rows)
    return torch._dynamo.config.patch(recompile_limit=limit, fail_on_recompile_limit_hit=True)


def _run(args: argparse.Namespace) -> int:
    if args.check_fused:
        return _check_fused(args)
    if args.memory_child:
        print(peak_memory_mib(Setup(args), args.memory_child))
        return 0
    by_views = {}
    for views in args.views:
        by_views[views] = results = measure_views(args, views)
        grid = grid_for(args.tokens_per_view, args.special)
        print(f"one global attention layer: B={args.batch} S={views} T={args.tokens_per_view} "
              f"(grid {grid[0]}x{grid[1]} + {args.special} special) heads={args.heads} "
              f"head_dim={args.head_dim} {args.dtype} on {args.device}, torch {torch.__version__}, "
              f"{torch.get_num_threads()} threads, {args.clock} clock, median of {args.repeats}")
        print(format_table(results), flush=True)
    if len(by_views) > 1:
        print("\ntime ratio to rope per number of views (± half the run spread):")
        print(format_curve(by_views))
        if not args.no_memory:
            print("\npeak memory ratio to rope per number of views:")
            print(format_curve(by_views, key="peak_mib"))
    if args.compile:
        print("\ncompiled / eager, per method:")
        print(format_compiled(by_views))
    if args.json:
        meta = {k: v for k, v in vars(args).items()
                if k not in ("json", "memory_child") and not k.startswith("_")}  # CLI callbacks
        atomic_write_json(args.json, {"config": meta, "torch": torch.__version__, "threads": torch.get_num_threads(),
                                      "results": by_views[args.views[0]], "by_views": by_views}, indent=2)
    return 0


def _check_fused(args) -> int:
    """``--check-fused``: the check of ``attention_check`` at every S; 1 if a method failed."""
    by_views = {}
    for views in args.views:
        setup = Setup(argparse.Namespace(**{**vars(args), "views": views}))
        by_views[views] = results = check_methods(setup, args.methods)
        print(f"fused attention functions against the plain path: S={views} T={args.tokens_per_view} "
              f"heads={args.heads} head_dim={args.head_dim} {args.dtype} on {args.device}, torch {torch.__version__}")
        print(format_check(results), flush=True)
    if args.json:
        atomic_write_json(args.json, {"check_fused": by_views, "torch": torch.__version__}, indent=2)
    failed = sorted({m for r in by_views.values() for m, x in r.items() if not x["ok"]})
    if failed:
        print(f"FAILED: {', '.join(failed)} differ from their plain path beyond the tolerance", file=sys.stderr)
    return 1 if failed else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="depthpe bench attention", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
