"""The training step ``depthpe bench memory`` accounts (see ``depthpe.bench.memory`` for what is
predicted and how): the question (``Setting``), the model, batch and AdamW as a run builds them, the
step itself under the CUDA or CPU autocast rules, the storage tracker and ``predict``; also the real
measurement of the same step on this CPU (``measure_here``)."""

from __future__ import annotations

import contextlib
import os
import warnings
import weakref

import torch

PRECISIONS = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}
CUDA_ALLOC_ROUND = 512
FRAGMENTATION = 0.10  # margin for the caching allocator's reserved-but-unused memory
CONTEXT_GIB = 1.0  # CUDA context, cuBLAS / cuDNN workspaces
CAPACITIES_GB = (24, 48, 80)  # GPU sizes the report answers for (taken as GiB)
GIB = 2**30
MIB = 2**20


def table_unit(peak: float) -> tuple[int, str]:
    """The unit a memory table with the largest entry ``peak`` (bytes) is printed in: (GIB, "GiB")
    from 1 GiB up, else (MIB, "MiB")."""
    return (GIB, "GiB") if peak >= GIB else (MIB, "MiB")


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
        model = self.cfg.model_config()
        return {"views": self.views, "batch": self.batch, "height": self.height, "width": self.width,
                "precision": self.precision, "checkpointing": self.checkpointing, "target": self.target,
                "global_pe": model.global_pe, "pe_options": model.pe_options, "ddp": self.ddp}


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
