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
import contextlib
import json
import math
import os
import subprocess
import sys
import time
import warnings
import weakref
from dataclasses import dataclass
from typing import Optional

import torch

from ..config.options import add_plain_options, option
from .settings import JSON_HELP, BenchedRun

DESCRIPTION = __doc__
PRECISIONS = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}
CUDA_ALLOC_ROUND = 512
FRAGMENTATION = 0.10  # margin for the caching allocator's reserved-but-unused memory
CONTEXT_GIB = 1.0  # CUDA context, cuBLAS / cuDNN workspaces
CAPACITIES_GB = (24, 48, 80)  # GPU sizes the report answers for (taken as GiB)
GIB = 2**30
MIB = 2**20
# Names of the functions CUDA autocast runs in float32 (torch.amp documentation, "CUDA Ops that can
# autocast to float32"); matched against torch.*, torch.Tensor.* and torch.nn.functional.* callables.
CUDA_FP32_OPS = frozenset({
    "__pow__", "__rpow__", "__rdiv__", "__rtruediv__", "acos", "asin", "cosh", "erfinv", "exp",
    "expm1", "log", "log10", "log1p", "log2", "pow", "reciprocal", "rsqrt", "sinh", "tan", "softplus",
    "layer_norm", "group_norm", "norm", "normalize", "cosine_similarity", "softmax", "log_softmax",
    "softmin", "cumprod", "cumsum", "dist", "pdist", "cdist", "renorm", "logsumexp", "prod", "sum",
    "l1_loss", "mse_loss", "smooth_l1_loss", "huber_loss", "nll_loss", "kl_div", "cross_entropy",
    "binary_cross_entropy_with_logits",
})


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
                                            "(with --fit views: the largest S per GPU size for each)")
    json: Optional[str] = option(None, help=JSON_HELP)
    quiet: bool = option(False, store_true=True, help="no progress lines on stderr")
    measure_child: bool = option(False, flag="--_measure-child", store_true=True, hidden=True,
                                 help="this process is the --measure run")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``depthpe bench memory`` (sizes default to the run config's worst case)."""
    add_plain_options(parser, MemorySettings)


# ----------------------------------------------------------------------------- the step to account
class Setting:
    """One memory question: run config ``cfg`` with S views, B samples, H x W images (px),
    ``precision`` ("bf16" | "fp16" | "fp32"), ``checkpointing`` (bool) and ``target`` ("cuda" | "cpu")."""

    def __init__(self, cfg, views: int, batch: int, height: int, width: int, precision: str,
                 checkpointing: bool, target: str, ddp: bool = False):
        self.cfg, self.views, self.batch = cfg, views, batch
        self.height, self.width = height, width
        self.precision, self.checkpointing, self.target = precision, checkpointing, target
        self.ddp = ddp

    def with_sizes(self, views: int, batch: int) -> "Setting":
        """The same question at S = ``views``, B = ``batch``."""
        return Setting(self.cfg, views, batch, self.height, self.width, self.precision, self.checkpointing,
                       self.target, self.ddp)

    def model_config(self):
        """The run's ``DepthModelConfig`` with random backbone weights and the chosen checkpointing;
        ``pe_options.fused_attention`` auto is resolved for the target device (the model runs on
        fake CPU tensors, whose own default would be the CPU's)."""
        from ..pe.camera import use_fused

        config = self.cfg.model_config()
        config.pretrained, config.backbone_weights = False, None
        config.gradient_checkpointing = self.checkpointing
        fused = config.pe_options.get("fused_attention", "auto")
        if fused == "auto":
            config.pe_options["fused_attention"] = use_fused(None, self.target)
        return config

    def describe(self) -> dict:
        """JSON-friendly description (no config object)."""
        return {"views": self.views, "batch": self.batch, "height": self.height, "width": self.width,
                "precision": self.precision, "checkpointing": self.checkpointing, "target": self.target,
                "global_pe": self.cfg.model_config().global_pe, "ddp": self.ddp}


def setting_from_args(args) -> Setting:
    """Resolve the CLI options against the run config; raises ``SystemExit`` with a one-line message."""
    from depthpe.loader.sampling import target_size
    from ..run import load_run_config

    if args.config.endswith((".yaml", ".yml")) and not os.path.isfile(args.config):
        raise SystemExit(f"config file {args.config!r} does not exist")
    cfg = load_run_config(args.config, args.overrides)
    views = args.views if args.views is not None else int(cfg.data.views[1])
    if views < 2:
        raise SystemExit(f"--views must be >= 2 (the global attention needs two views), got {views}")
    batch = args.batch if args.batch is not None else max(1, cfg.data.max_images_per_batch // views)
    if batch < 1:
        raise SystemExit(f"--batch must be >= 1, got {batch}")
    width = args.image_width if args.image_width is not None else cfg.data.image_width
    patch = cfg.model_config().patch_size
    if width < patch or width % patch:
        raise SystemExit(f"--image-width must be a positive multiple of the patch size {patch}, got {width}")
    aspect = args.aspect if args.aspect is not None else float(cfg.data.aspect[1])
    if aspect <= 0:
        raise SystemExit(f"--aspect must be > 0, got {aspect}")
    height, width = target_size(aspect, width, patch)
    precision = args.precision or cfg.train.mixed_precision
    if precision not in PRECISIONS:
        precision = "fp32"  # "no" in the config
    ckpt = cfg.model.gradient_checkpointing if args.checkpointing is None else args.checkpointing == "on"
    target = "cpu" if args.measure or args.measure_child else args.target
    return Setting(cfg, views, batch, height, width, precision, bool(ckpt), target, ddp=args.ddp)


def make_cameras_real(setting: Setting) -> tuple[torch.Tensor, torch.Tensor]:
    """Real float32 K (B, S, 3, 3) and w2c (B, S, 4, 4): normalized random cameras, view 0 identity."""
    from .attention import make_cameras

    K, w2c = make_cameras(setting.batch, setting.views, (setting.height, setting.width), "cpu")
    return K.float(), w2c.float()


def make_batch(setting: Setting) -> dict:
    """A real batch as the loader gives it (for ``--measure``): images (B, S, 3, H, W) in [0, 1],
    K (B, S, 3, 3), w2c (B, S, 4, 4), depth (B, S, H, W) > 0 and an all-true valid mask (B, S, H, W)."""
    B, S, H, W = setting.batch, setting.views, setting.height, setting.width
    K, w2c = make_cameras_real(setting)
    g = torch.Generator().manual_seed(0)
    images = torch.rand(B, S, 3, H, W, generator=g)
    depth = 1.0 + torch.rand(B, S, H, W, generator=g)
    return {"images": images, "K": K, "w2c": w2c, "depth": depth, "valid": torch.ones(B, S, H, W, dtype=torch.bool)}


def build_training(setting: Setting, fake_mode=None):
    """(model in train mode, AdamW over its trainable parameters) as ``depthpe.run.building`` builds
    them, with a random backbone; AdamW uses ``foreach`` kernels for ``target="cuda"``. With
    ``fake_mode`` the model is built on the meta device (timm reads values while building) and its
    tensors are then replaced by fake CPU tensors."""
    from ..model import DepthModel

    torch.manual_seed(setting.cfg.seed)
    with torch.device("meta") if fake_mode else contextlib.nullcontext():
        model = DepthModel(setting.model_config(), load_backbone_weights=False).train()
    with fake_mode or contextlib.nullcontext():
        if fake_mode:
            model.to_empty(device="cpu")
        return model, _adamw(model, setting)


def _adamw(model, setting: Setting) -> torch.optim.AdamW:
    """AdamW as the run builds it (``foreach`` kernels, the CUDA default, for ``target="cuda"``)."""
    return torch.optim.AdamW(model.param_groups(setting.cfg.optim.weight_decay), lr=setting.cfg.optim.lr,
                             betas=setting.cfg.optim.betas, foreach=setting.target == "cuda")


def _autocast(setting: Setting):
    dtype = PRECISIONS[setting.precision]
    return torch.autocast("cpu", dtype=dtype or torch.float32, enabled=dtype is not None)


def train_step(model, opt, batch: dict, setting: Setting, mark=lambda phase: None) -> None:
    """One optimizer step as ``depthpe.run.step`` does it (one micro-batch): forward under autocast,
    ``depth_loss``, backward, gradient clipping, AdamW step, ``zero_grad(set_to_none=True)``.
    ``mark(phase)`` is called when "forward", "backward" and "optimizer" begin and with "end"."""
    # CUDA's float32 rules stay on for the whole step: checkpointing recomputes blocks in backward
    with CudaAutocastRules() if cuda_rules(setting) else contextlib.nullcontext():
        _step_body(model, opt, batch, setting, mark)


def cuda_rules(setting: Setting) -> bool:
    """Whether the step applies ``CudaAutocastRules`` (a CUDA prediction in bf16 or fp16)."""
    return setting.target == "cuda" and setting.precision != "fp32"


def _step_body(model, opt, batch: dict, setting: Setting, mark) -> None:
    from ..run.losses import depth_loss

    loss_cfg = setting.cfg.loss
    mark("forward")
    with _autocast(setting):
        out = model(batch["images"], batch["K"], batch["w2c"])
    loss = depth_loss(out["depth"], batch["depth"], batch["valid"], out.get("conf"),
                      l1_weight=loss_cfg.l1_weight, gradient_weight=loss_cfg.gradient_weight,
                      gradient_scales=loss_cfg.gradient_scales, conf_weight=loss_cfg.conf_weight,
                      conf_alpha=loss_cfg.conf_alpha)["total"]
    del out
    mark("backward")
    loss.backward()
    del loss
    mark("optimizer")
    trainable = [p for p in model.parameters() if p.requires_grad]
    torch.nn.utils.clip_grad_norm_(trainable, setting.cfg.optim.grad_clip, foreach=setting.target == "cuda")
    opt.step()
    opt.zero_grad(set_to_none=True)
    mark("end")


class CudaAutocastRules(torch.overrides.TorchFunctionMode):
    """While CPU autocast is on, give the functions CUDA autocast runs in float32 (``CUDA_FP32_OPS``)
    float32 copies of their low-precision floating-point tensor arguments, as CUDA autocast does."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", None) in CUDA_FP32_OPS and torch.is_autocast_enabled("cpu"):
            args, kwargs = torch.utils._pytree.tree_map(_to_fp32, (args, kwargs))
        return func(*args, **kwargs)


def _to_fp32(x):
    if isinstance(x, torch.Tensor) and x.dtype in (torch.bfloat16, torch.float16):
        return x.float()
    return x


# ----------------------------------------------------------------------------- storage accounting
class StorageTracker(torch.utils._python_dispatch.TorchDispatchMode):
    """Counts the bytes of live tensor storages: an operator output that does not alias an input
    (no alias annotation in the operator's schema) is a new storage, counted until it is freed
    (``weakref.finalize``). Allocations are rounded up to ``round_to`` bytes. ``peak`` is the
    largest ``current`` seen; ``phase_peaks`` the largest per phase set by ``mark``."""

    def __init__(self, round_to: int = 1):
        super().__init__()
        self.round_to = round_to
        self.live: dict[int, int] = {}
        self.current = self.peak = 0
        self.phase = "setup"
        self.phase_peaks: dict[str, int] = {}
        self.phase_start: dict[str, int] = {}

    def add(self, tensor: torch.Tensor) -> None:
        """Count ``tensor``'s storage (once) until it is freed."""
        storage = tensor.untyped_storage()
        key = id(storage)
        if key in self.live or storage.nbytes() == 0:
            return
        nbytes = -(-storage.nbytes() // self.round_to) * self.round_to
        self.live[key] = nbytes
        self.current += nbytes
        self.peak = max(self.peak, self.current)
        self.phase_peaks[self.phase] = max(self.phase_peaks.get(self.phase, 0), self.current)
        weakref.finalize(storage, self._free, key)

    def _free(self, key: int) -> None:
        self.current -= self.live.pop(key, 0)

    def mark(self, phase: str) -> None:
        """Start ``phase``: record the bytes live now as its start and reset its peak."""
        self.phase = phase
        self.phase_start[phase] = self.current
        self.phase_peaks[phase] = self.current

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        returns = func._schema.returns
        outs = out if isinstance(out, (tuple, list)) else (out,)
        for i, t in enumerate(outs):
            aliased = i < len(returns) and returns[i].alias_info is not None
            if isinstance(t, torch.Tensor) and not aliased:
                self.add(t)
            elif isinstance(t, (tuple, list)) and not aliased:  # Tensor[] outputs (foreach ops)
                for x in t:
                    if isinstance(x, torch.Tensor):
                        self.add(x)
        return out


def storage_bytes(tensors) -> int:
    """Bytes of the distinct storages of ``tensors`` (None entries skipped)."""
    seen = {}
    for t in tensors:
        if t is not None:
            s = t.untyped_storage()
            seen[id(s)] = s.nbytes()
    return sum(seen.values())


def optimizer_state_bytes(opt: torch.optim.Optimizer) -> int:
    """Bytes of the tensors in the optimizer state (AdamW: exp_avg, exp_avg_sq, step)."""
    return storage_bytes(v for state in opt.state.values() for v in state.values() if isinstance(v, torch.Tensor))


@contextlib.contextmanager
def rules_in_recomputation(model, wanted: bool):
    """Keep ``CudaAutocastRules`` on (when ``wanted``) in the aggregator blocks that checkpointing
    recomputes in backward, where the autograd engine does not see the forward's
    ``TorchFunctionMode``: a forward pre-hook on every block enters the rules when they are off,
    its forward hook (``always_call``: also when checkpointing stops a recomputation early) leaves
    them again. Hooks are removed on exit."""
    entered: list = []

    def enter(module, args):
        active = any(isinstance(m, CudaAutocastRules) for m in torch.overrides._get_current_function_mode_stack())
        rules = CudaAutocastRules() if wanted and not active else None
        if rules is not None:
            rules.__enter__()
        entered.append(rules)

    def leave(module, args, output):
        rules = entered.pop()
        if rules is not None:
            rules.__exit__(None, None, None)

    agg = model.aggregator
    handles = [h for block in [*agg.frame_blocks, *agg.global_blocks]
               for h in (block.register_forward_pre_hook(enter), block.register_forward_hook(leave, always_call=True))]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


# ----------------------------------------------------------------------------- prediction
def predict(setting: Setting, progress=None) -> dict:
    """Predicted memory (bytes) of a steady-state training step of ``setting`` on fake tensors (the
    AdamW state exists already, as from the second step on). ``progress(message)`` hears each phase.

    Returns {"params_trainable", "params_frozen", "buffers", "grads" (trainable, after backward),
    "optimizer" (AdamW state), "batch", "ddp_buckets" (with ``setting.ddp``), "persistent" (live
    before the step: parameters, buffers, AdamW state, batch, DDP buckets),
    "saved" (activations live after forward and loss), "saved_before_head" (of those, live when the
    depth head starts), "peak" (largest live total in the step),
    "peak_phase", "phase_peaks" {forward|backward|optimizer: bytes}, "extra" (peak - persistent)}."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    say = progress or (lambda msg: None)
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    K, w2c = make_cameras_real(setting)
    B, S, H, W = setting.batch, setting.views, setting.height, setting.width
    say("building the model on fake tensors")
    model, opt = build_training(setting, fake)
    with fake:
        batch = {"images": torch.empty(B, S, 3, H, W), "K": K, "w2c": w2c, "depth": torch.empty(B, S, H, W),
                 "valid": torch.empty(B, S, H, W, dtype=torch.bool)}
        # DDP (gradient_as_bucket_view=False, the default) keeps its own copy of the gradients
        buckets = [torch.empty_like(p) for p in model.parameters() if p.requires_grad and setting.ddp]
    tracker = StorageTracker(CUDA_ALLOC_ROUND if setting.target == "cuda" else 1)
    for t in [*model.parameters(), *model.buffers(), *batch.values(), *buckets]:
        tracker.add(t)
    grads = []

    def mark(phase: str) -> None:
        say(f"training step: {phase}")
        if phase == "optimizer":
            grads.append(storage_bytes(p.grad for p in model.parameters()))
        tracker.mark(phase)

    head_start = []  # live bytes when the depth head starts (aggregator activations saved by then)
    hook = model.depth_head.register_forward_pre_hook(lambda *_: head_start.append(tracker.current))
    with fake, rules_in_recomputation(model, cuda_rules(setting)), tracker, warnings.catch_warnings():
        # URoPE's saved-tensor hooks compare data pointers, which fake tensors report as 0 (shapes,
        # strides and dtypes are compared too; --measure agrees with the prediction for urope)
        warnings.filterwarnings("ignore", message="Accessing the data pointer of FakeTensor")
        say("creating the AdamW state")
        init_optimizer_state(model, opt)
        train_step(model, opt, batch, setting, mark)
    hook.remove()
    result = _summary(model, opt, batch, tracker, grads[0])
    result["saved_before_head"] = head_start[-1] - result["persistent"]
    result["ddp_buckets"] = storage_bytes(buckets)
    return result


def init_optimizer_state(model, opt: torch.optim.Optimizer) -> None:
    """Create the optimizer state as the first step does (an AdamW step on zero gradients), without
    running forward and backward; gradients are dropped again."""
    for p in model.parameters():
        if p.requires_grad:
            p.grad = torch.zeros_like(p)
    opt.step()
    opt.zero_grad(set_to_none=True)


def _summary(model, opt, batch, tracker: StorageTracker, grads: int) -> dict:
    """The numbers ``predict`` returns, from the tracker's phase marks."""
    params = list(model.parameters())
    phases = {p: tracker.phase_peaks[p] for p in ("forward", "backward", "optimizer")}
    peak_phase = max(phases, key=phases.get)
    persistent = tracker.phase_start["forward"]
    return {
        "params_trainable": storage_bytes(p for p in params if p.requires_grad),
        "params_frozen": storage_bytes(p for p in params if not p.requires_grad),
        "buffers": storage_bytes(model.buffers()),
        "grads": grads, "optimizer": optimizer_state_bytes(opt),
        "batch": storage_bytes(batch.values()), "persistent": persistent,
        "saved": tracker.phase_start["backward"] - persistent,
        "peak": phases[peak_phase], "peak_phase": peak_phase, "phase_peaks": phases,
        "extra": phases[peak_phase] - persistent,
    }


# ----------------------------------------------------------------------------- CPU measurement
def measure_here(setting: Setting) -> dict:
    """Measure, in this process, the extra resident memory (MiB) of the second of two real training
    steps of ``setting`` on the CPU: ``VmHWM`` after the step (reset just before it) minus ``VmRSS``
    before it. Meaningful only with ``MALLOC_MMAP_THRESHOLD_=65536`` (see ``measure_cpu``)."""
    import gc

    from .attention import _reset_peak_rss, _status_mib

    batch = make_batch(setting)
    model, opt = build_training(setting)
    train_step(model, opt, batch, setting)  # creates the AdamW state; one-time allocations happen here
    gc.collect()
    reset = _reset_peak_rss()
    before = _status_mib("VmRSS")
    train_step(model, opt, batch, setting)
    return {"extra_mib": _status_mib("VmHWM") - before, "rss_before_mib": before, "hwm_reset": reset}


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


# ----------------------------------------------------------------------------- report
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
    unit, name = (GIB, "GiB") if result["peak"] >= GIB else (MIB, "MiB")
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


def compare_encodings(args, progress) -> dict[str, dict]:
    """{global_pe: {"setting", "result", "largest"}} for rope and every one of ``args.encodings``: the
    run config with ``model.global_pe`` overridden, the other sizes resolved once (from the config's
    own encoding); ``largest`` (with ``--fit views``) maps GPU GB to the largest S that fits."""
    from ..run import load_run_config

    base = setting_from_args(args)
    out = {}
    for pe in dict.fromkeys(["rope", *args.encodings]):
        progress(f"encoding {pe}")
        cfg = load_run_config(args.config, [*args.overrides, f"model.global_pe={pe}"])
        setting = Setting(cfg, base.views, base.batch, base.height, base.width, base.precision,
                          base.checkpointing, base.target, base.ddp)
        result = predict(setting)
        largest_s = largest(setting, "views", None, {setting.views: result}) if args.fit == "views" else None
        out[pe] = {"setting": setting, "result": result, "largest": largest_s}
    return out


def format_comparison(compared: dict[str, dict]) -> str:
    """Markdown table of ``compare_encodings``: the whole step's peak and the activation part
    (peak minus parameters, gradients-free state, AdamW state and batch) per encoding, each with its
    ratio to rope, and the largest S per GPU size when searched."""
    first = next(iter(compared.values()))["setting"].describe()
    rope = compared["rope"]["result"]
    unit, name = (GIB, "GiB") if rope["peak"] >= GIB else (MIB, "MiB")
    lines = [f"training-step peak memory per encoding ({first['target']}): B={first['batch']} x S={first['views']} "
             f"views of {first['height']}x{first['width']} px, {first['precision']}, checkpointing "
             f"{'on' if first['checkpointing'] else 'off'}"]
    has_fit = any(c["largest"] for c in compared.values())
    head = f"| global_pe | peak {name} | x rope | activations {name} | x rope |"
    lines += [head + (" largest S (" + ", ".join(f"{c} GB" for c in CAPACITIES_GB) + ") |" if has_fit else ""),
              "|---" * (5 + has_fit) + "|"]
    for pe, c in compared.items():
        r = c["result"]
        row = (f"| {pe} | {r['peak'] / unit:.3f} | {r['peak'] / rope['peak']:.3f} | {r['extra'] / unit:.3f} | "
               f"{r['extra'] / rope['extra']:.3f} |")
        if has_fit:
            row += " " + ", ".join(str(n) for n in c["largest"].values()) + " |"
        lines.append(row)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Predict (and with ``--fit`` / ``--measure`` also search / measure), print the report; exit status."""
    if args.encodings and not args.measure_child:
        return run_comparison(args)
    setting = setting_from_args(args)
    if args.measure_child:
        torch.set_num_threads(args.threads)
        print(json.dumps(measure_here(setting)))
        return 0
    t0 = time.perf_counter()

    def progress(message: str) -> None:
        if not args.quiet:
            print(f"[{time.perf_counter() - t0:5.1f} s] {message}", file=sys.stderr, flush=True)

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
        with open(args.json, "w") as f:
            json.dump({"config": args.config, "overrides": list(args.overrides), "setting": setting.describe(),
                       "torch": torch.__version__, "predicted_bytes": result, "measured": measured,
                       "largest": None if fit is None else {"field": fit[0], "by_capacity_gb": fit[1]}}, f, indent=1)
    return 0


def run_comparison(args) -> int:
    """``--encodings``: predict every encoding, print ``format_comparison``; exit status."""
    if args.measure or (args.fit and args.fit != "views"):
        raise SystemExit("--encodings compares predictions: it takes --fit views but not --measure or --fit batch")
    t0 = time.perf_counter()

    def progress(message: str) -> None:
        if not args.quiet:
            print(f"[{time.perf_counter() - t0:5.1f} s] {message}", file=sys.stderr, flush=True)

    compared = compare_encodings(args, progress)
    print(format_comparison(compared))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": args.config, "overrides": list(args.overrides), "torch": torch.__version__,
                       "encodings": {pe: {"setting": c["setting"].describe(), "predicted_bytes": c["result"],
                                          "largest_views": c["largest"]} for pe, c in compared.items()}}, f, indent=1)
    return 0
