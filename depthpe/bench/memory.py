"""``depthpe bench memory``: predicted peak training memory per GPU, computed without a GPU.

What is predicted: the peak of the bytes held by live tensors during one steady-state training step
of a run config (the number ``torch.cuda.max_memory_allocated`` reports), split into parameters
(trainable and frozen backbone), gradients (trainable only), AdamW state (trainable only), the batch,
the activations saved for backward and the peak with temporaries, for a chosen number of views S,
batch B, image width, precision and activation checkpointing.

How: the model is built on the meta device and moved to fake tensors
(``torch._subclasses.fake_tensor.FakeTensorMode``: shapes, dtypes and strides but no data, so a
1.2B-parameter model costs nothing). The AdamW state is created (an AdamW step on zero gradients),
then one training step runs as the training loop runs it: forward under autocast,
``depthpe.run.losses.depth_loss``, backward (recomputing blocks with checkpointing), gradient clipping,
``AdamW.step`` and ``zero_grad(set_to_none=True)``. A ``TorchDispatchMode`` sees every operator's
outputs; an output that aliases no input (no alias annotation in the operator's schema) is a new
storage, counted until a ``weakref.finalize`` on that storage sees it freed. The largest total during
the step is the peak. Hand-written because no library does this accounting for a training step
(``torch.cuda.memory`` needs a GPU; ``torch.utils.flop_counter`` counts FLOPs, not bytes).

Assumptions for the GPU prediction (``--target cuda``, the default):

* Attention runs in a fused SDPA kernel (FlashAttention for bf16/fp16, memory-efficient for fp32),
  which keeps the output and a per-row log-sum-exp, never the (S*T) x (S*T) score matrix. The fake
  run uses PyTorch's CPU flash kernel, whose saved tensors have the same sizes. An encoding that
  computes scores itself (outside SDPA) shows its score matrix here as it would on a GPU.
* Autocast follows CUDA's rules: besides the matmul-like ops CPU autocast already casts down, the
  ops CUDA autocast runs in float32 (layer_norm, softmax, exp, log, pow, sum, ...; ``CUDA_FP32_OPS``)
  get float32 inputs here too, which is what makes the q/k-norm outputs float32 on a GPU.
* AdamW and gradient clipping use their multi-tensor (``foreach``) kernels, the CUDA default; AdamW's
  ``foreach`` update holds one float32 temporary the size of the trainable parameters.
* Every allocation is rounded up to 512 bytes (the CUDA caching allocator's granularity). Not
  included: the CUDA context and cuBLAS/cuDNN workspaces (about 0.5-1 GiB), allocator fragmentation
  (``memory_reserved`` is typically 5-15 % above the allocated peak), DDP gradient buckets (about
  one more copy of the trainable gradients, in 25 MB buckets) and the fp16 ``GradScaler``'s small
  buffers. ``fits`` keeps a margin for the first two; ``--fit`` searches the largest B or S that fits.

``--target cpu`` models a CPU run instead (CPU autocast rules, single-tensor AdamW, no rounding);
``--measure`` also runs two real steps on this CPU in a fresh subprocess and compares the extra
memory of the second step (peak minus what was live before it) with the prediction: ``VmHWM``
after resetting it through ``/proc/self/clear_refs`` minus ``VmRSS`` before the step, with
``MALLOC_MMAP_THRESHOLD_=65536`` so that freed tensors go back to the OS (the helpers of
``depthpe bench attention``).

Nothing in the model is patched: the model's ``forward`` reads no tensor values on the host (the
value checks happen where data enters, ``DepthModel.check_inputs``), and the CUDA autocast rules
reach the blocks that checkpointing recomputes through forward hooks on those blocks
(``rules_in_recomputation``).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Optional

import torch

from ..config.options import add_plain_options, option
from ..files import atomic_write_json
from .memory_encodings import compare_encodings, format_comparison, run_comparison
from .memory_report import breakdown_rows, fits, format_report, largest, progress_lines
from .methods import is_method_text
from .memory_step import (CAPACITIES_GB, PRECISIONS, Setting, build_training, cuda_rules, make_batch,
                          make_cameras_real, measure_here, predict, rules_in_recomputation, setting_from_args,
                          train_step)
from .settings import JSON_HELP, BenchedRun

DESCRIPTION = __doc__
__all__ = ["MemorySettings", "add_arguments", "run", "Setting", "setting_from_args", "predict", "fits", "largest",
           "format_report", "breakdown_rows", "take_overrides_from_encodings", "compare_encodings",
           "format_comparison", "measure_cpu",
           "build_training", "cuda_rules", "make_batch", "make_cameras_real", "rules_in_recomputation", "train_step"]


@dataclass
class MemorySettings(BenchedRun):
    """``depthpe bench memory``: the peak memory of one training step of the run ``config`` (with
    ``overrides``); every size left None is the config's worst case (see ``setting_from_args``).
    ``target``: whose autocast rules and kernels; ``measure``: also measure it on this CPU (in a
    child process, ``measure_child``, with ``threads`` threads); ``fit``: search the largest batch
    or views that fit ``CAPACITIES_GB``."""

    views: Optional[int] = option(None, help="views S per sample (none: the largest of the config's data.views)")
    batch: Optional[int] = option(None, help="samples B per GPU (none: the config's max_images_per_batch // S, "
                                  "at least 1)")
    precision: Optional[str] = option(None, choices=tuple(sorted(PRECISIONS)),
                                      help="autocast precision (none: the config's train.mixed_precision)")
    checkpointing: Optional[str] = option(None, choices=("on", "off"), help="activation checkpointing of the "
                                          "aggregator blocks (none: the config's)")
    image_width: Optional[int] = option(None, help="image width in px (none: the config's)")
    aspect: Optional[float] = option(None, help="height / width (none: the largest of the config's data.aspect, "
                                     "the worst case)")
    target: str = option("cuda", choices=("cuda", "cpu"),
                         help="which device's autocast rules and optimizer kernels to model")
    measure: bool = option(False, store_true=True,
                           help="also measure the real peak of the same step on this CPU (forces --target cpu)")
    ddp: bool = option(False, store_true=True,
                       help="multi-GPU DDP: add its gradient buckets (one more copy of the trainable gradients)")
    fit: Optional[str] = option(None, choices=("batch", "views"), help="also find the largest batch B at these "
                                "views (batch), or the largest S at this batch (views), that fits "
                                f"{', '.join(map(str, CAPACITIES_GB[:-1]))} and {CAPACITIES_GB[-1]} GB "
                                "(about 5-8 more predictions)")
    threads: int = option(1, help="torch CPU threads of the --measure run")
    encodings: Optional[list[str]] = option(None, nargs="+", help="compare these global_pe presets (rope is added "
                                            "first): one prediction each, a table of peaks and ratios to rope "
                                            "(with --fit views: the largest S per GPU size for each); options of "
                                            "one encoding after commas (urope,num_anchors=2), a pair as "
                                            "qk=A,vo=B[,option=value]")
    json: Optional[str] = option(None, help=JSON_HELP)
    quiet: bool = option(False, store_true=True, help="no progress lines on stderr")
    measure_child: bool = option(False, flag="--_measure-child", store_true=True, hidden=True,
                                 help="this process is the --measure run")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``depthpe bench memory`` (sizes default to the run config's worst case)."""
    add_plain_options(parser, MemorySettings)


def child_argv(args, setting: Setting) -> list[str]:
    """Command line of the ``--measure`` subprocess: the same question with every size spelled out."""
    argv = [sys.executable, "-c", "import sys; from depthpe.cli import main; sys.exit(main(sys.argv[1:]))",
            "bench", "memory", "--_measure-child", "--config", args.config,
            "--views", str(setting.views), "--batch", str(setting.batch),
            "--image-width", str(setting.width), "--aspect", repr(setting.height / setting.width),
            "--precision", setting.precision, "--checkpointing", "on" if setting.checkpointing else "off",
            "--threads", str(args.threads)]
    return argv + list(args.overrides)


def measure_cpu(args, setting: Setting) -> dict:
    """Run ``measure_here`` in a fresh subprocess with ``MALLOC_MMAP_THRESHOLD_=65536`` (freed tensors
    go back to the OS, so resident memory follows live tensors); returns its result dict."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    proc = subprocess.run(child_argv(args, setting), capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"the CPU measurement failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def take_overrides_from_encodings(args: argparse.Namespace) -> None:
    """Move ``KEY=VALUE`` words that ``--encodings`` (a list option) took from after it back to the
    config overrides, in place: ``--encodings prope urope model.x=1`` means what it looks like
    (``urope,num_anchors=2`` stays an encoding: ``methods.is_method_text``)."""
    if args.encodings:
        args.overrides = [*args.overrides, *(w for w in args.encodings if not is_method_text(w))]
        args.encodings = [w for w in args.encodings if is_method_text(w)]
        if not args.encodings:
            raise SystemExit("--encodings needs at least one global_pe preset, e.g. --encodings prope urope")


def run(args: argparse.Namespace) -> int:
    """Predict (and with ``--fit`` / ``--measure`` also search / measure), print the report; exit status."""
    take_overrides_from_encodings(args)
    if args.encodings and not args.measure_child:
        return run_comparison(args)
    setting = setting_from_args(args)
    if args.measure_child:
        torch.set_num_threads(args.threads)
        print(json.dumps(measure_here(setting)))
        return 0
    progress = progress_lines(args.quiet)
    result = predict(setting, progress)
    fit = None
    if args.fit:
        known = {getattr(setting, args.fit): result} if args.fit == "views" or setting.batch == 1 else {}
        fit = (args.fit, largest(setting, args.fit, progress, known))
    measured = None
    if args.measure:
        progress("measuring the same step on this CPU (fresh subprocess)")
        measured = measure_cpu(args, setting)
    print(format_report(setting, result, measured, fit))
    if args.json:
        atomic_write_json(args.json, {
            "config": args.config, "overrides": list(args.overrides), "setting": setting.describe(),
            "torch": torch.__version__, "predicted_bytes": result, "measured": measured,
            "largest": None if fit is None else {"field": fit[0], "by_capacity_gb": fit[1]}})
    return 0
