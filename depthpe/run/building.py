"""What a run builds before its first step: the model (new, or from a VGGT-format checkpoint; its
aggregator blocks compiled with ``train.compile``), the AdamW optimizer with its weight-decay groups,
the data loader options of the device, the CPU thread count, and what DeepSpeed needs from the run
(process group backend without a GPU, batch size and the checks of its accelerate file)."""

from __future__ import annotations

import os

import torch

from ..config import ConfigError
from .schema import RunConfig

__all__ = ["build_model", "compile_blocks", "recompile_limit", "view_counts", "DYNAMO_RECOMPILE_LIMIT",
           "build_optimizer", "apply_optim_settings", "loader_options", "default_cpu_threads",
           "deepspeed_cpu_backend", "fit_deepspeed_config"]


def build_model(cfg: RunConfig, *, resuming: bool = False):
    """A new ``DepthModel`` for ``cfg``. With ``model.init_from`` (a VGGT-format checkpoint: a Hub id
    such as ``facebook/VGGT-1B`` or a local .safetensors/.pt file) it is ``DepthModel.from_vggt`` with
    the run's model config, so the backbone comes from that checkpoint and timm downloads nothing;
    when ``resuming`` the checkpoint file is not read (the run's own checkpoint restores every weight)."""
    from ..model import DepthModel

    config = cfg.model_config()
    if cfg.model.init_from and not resuming:
        return DepthModel.from_vggt(cfg.model.init_from, **config.to_dict())
    return DepthModel(config, load_backbone_weights=not cfg.model.init_from)


DYNAMO_RECOMPILE_LIMIT = 8  # torch._dynamo.config.recompile_limit's default


def compile_blocks(model: torch.nn.Module, *, view_counts: int = 1, backend: str = "inductor") -> int:
    """Compile every aggregator block of ``model`` with ``torch.compile`` (``backend``, automatic
    dynamic shapes), in place (``nn.Module.compile``): parameter names and state-dict keys
    stay those of the eager model (no ``_orig_mod.`` prefix), so checkpoints of eager and compiled
    runs load into each other. All blocks share one compiled forward, which makes compiling the blocks
    much faster than compiling the whole model (docs/training.md#torchcompile). Returns the number of
    blocks compiled; raises ``ValueError`` when the model has none.

    ``view_counts``: how many different numbers of views the batches will have (``data.views``
    max - min + 1). Dynamo's recompile limit is raised (process-wide, never lowered) to
    ``recompile_limit(view_counts)``: the frame and global blocks share one code object and so one
    limit, and URoPE compiles one graph per number of views (``recompile_limit``)."""
    from ..model.blocks import AggregatorBlock

    blocks = [m for m in model.modules() if isinstance(m, AggregatorBlock)]
    if not blocks:
        raise ValueError(f"train.compile: {type(model).__name__} has no AggregatorBlock to compile "
                         "(set train.compile=false)")
    limit = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = max(limit, recompile_limit(view_counts))
    for block in blocks:
        block.compile(backend=backend)
    return len(blocks)


def view_counts(cfg: RunConfig) -> int:
    """How many different numbers of views the run's batches have: ``data.views`` max - min + 1."""
    low, high = cfg.data.views
    return int(high) - int(low) + 1


def recompile_limit(view_counts: int) -> int:
    """Dynamo cache entries the compiled blocks may need when the batches have ``view_counts``
    different numbers of views: the default limit (8: the frame blocks' and the camera encodings'
    first static and then dynamic graphs take 5 of them, measured) plus one per number of views,
    because URoPE's fused attention makes one kernel call per view in a Python loop, which
    specializes the number of views (a graph per value; its token counts stay dynamic)."""
    return DYNAMO_RECOMPILE_LIMIT + max(1, int(view_counts))


def build_optimizer(model, cfg: RunConfig) -> torch.optim.AdamW:
    """AdamW over the trainable parameters: weight decay ``optim.weight_decay`` except for the
    parameters the model exempts (norms, biases, tokens; ``DepthModel.no_weight_decay_names``)."""
    return torch.optim.AdamW(model.param_groups(cfg.optim.weight_decay), lr=cfg.optim.lr, betas=cfg.optim.betas)


def apply_optim_settings(optimizer: torch.optim.Optimizer, cfg: RunConfig) -> None:
    """Write ``optim.weight_decay`` (decayed group only) and ``optim.betas`` into the param groups:
    after a resume the restored groups hold the checkpoint's values, and a changed setting must apply.
    (The learning rate is set at every step from the schedule.)"""
    for group in optimizer.param_groups:
        group["weight_decay"] = cfg.optim.weight_decay if group.get("name") == "decay" else 0.0
        group["betas"] = tuple(cfg.optim.betas)


def loader_options(cfg: RunConfig, device: torch.device | str) -> dict:
    """Keyword arguments of ``build_train_loader`` for a run on ``device``: ``train.num_workers`` and
    ``train.grad_accum``, and page-locked (pinned) batches only on CUDA, where they make the
    host-to-device copies of ``run_step`` asynchronous (on CPU pinning would only cost time).
    Workers are persistent whenever there are any (``depthpe.loader.loaders.loader_kwargs``)."""
    return {"num_workers": cfg.train.num_workers, "grad_accum": cfg.train.grad_accum,
            "pin_memory": torch.device(device).type == "cuda"}


def default_cpu_threads(num_workers: int, num_processes: int) -> int:
    """Cores of this machine per training process, minus the data workers of that process (at least 1):
    more threads than cores (workers included) makes CPU steps many times slower."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, num_processes) - num_workers)


def deepspeed_cpu_backend(cfg: RunConfig) -> str | None:
    """"gloo" when launched for DeepSpeed (``ACCELERATE_USE_DEEPSPEED=true``) on a machine without CUDA
    and without ``train.cpu``, else None (accelerate's choice). Accelerate (1.15) chooses a backend
    only for an accelerator; with none its state says 1 process on every rank although DeepSpeed's own
    init joined them all, so every rank would act as the main process (docs/distributed.md, DeepSpeed)."""
    deepspeed = os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true"
    return "gloo" if deepspeed and not cfg.train.cpu and not torch.cuda.is_available() else None


def fit_deepspeed_config(accelerator, cfg: RunConfig) -> None:
    """Before ``accelerator.prepare`` under DeepSpeed: set ``train_micro_batch_size_per_gpu``, which
    DeepSpeed requires and cannot read from depthpe's loader (not given to ``prepare``; B varies with
    S). The largest B, floor(``data.max_images_per_batch`` / min(``data.views``)), is used; DeepSpeed
    only reports throughput with it. Raises ``ConfigError`` when the accelerate file's
    ``gradient_accumulation_steps`` is not 1 or ``train.grad_accum`` is not 1 (depthpe does not pass
    its micro-batch boundaries to DeepSpeed's engine, which would step after every micro-batch), or
    its ``gradient_clipping`` differs from ``optim.grad_clip`` (DeepSpeed clips, not depthpe)."""
    from accelerate.utils import DistributedType

    if accelerator.distributed_type != DistributedType.DEEPSPEED:
        return
    ds = accelerator.state.deepspeed_plugin.deepspeed_config
    if cfg.train.grad_accum != 1 or ds.get("gradient_accumulation_steps", 1) not in (1, "auto"):
        raise ConfigError(f"DeepSpeed runs need train.grad_accum=1 and gradient_accumulation_steps: 1 in the accelerate "
                          f"file (got {cfg.train.grad_accum} and {ds.get('gradient_accumulation_steps')}); raise "
                          "data.max_images_per_batch or the number of processes instead")
    clip = ds.get("gradient_clipping", "auto")
    if clip != "auto" and float(clip) != float(cfg.optim.grad_clip):
        raise ConfigError(f"the accelerate file's gradient_clipping ({clip}) differs from optim.grad_clip "
                          f"({cfg.optim.grad_clip}): DeepSpeed clips, so set them equal")
    ds["gradient_clipping"] = float(cfg.optim.grad_clip)
    ds["gradient_accumulation_steps"] = 1
    ds["train_micro_batch_size_per_gpu"] = max(1, cfg.data.max_images_per_batch // min(cfg.data.views))
