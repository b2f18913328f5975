"""What a run builds before its first step: the model (new, or from a VGGT-format checkpoint; its
aggregator blocks compiled with ``train.compile``), the AdamW optimizer with its weight-decay groups,
the data loader options of the device, and the CPU thread count."""

from __future__ import annotations

import os

import torch

from .schema import RunConfig

__all__ = ["build_model", "compile_blocks", "build_optimizer", "apply_optim_settings", "loader_options",
           "default_cpu_threads"]


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


def compile_blocks(model: torch.nn.Module) -> int:
    """Compile every aggregator block of ``model`` with ``torch.compile`` (default inductor backend,
    automatic dynamic shapes), in place (``nn.Module.compile``): parameter names and state-dict keys
    stay those of the eager model (no ``_orig_mod.`` prefix), so checkpoints of eager and compiled
    runs load into each other. All blocks share one compiled forward, which makes compiling the blocks
    much faster than compiling the whole model (docs/training.md#torchcompile). Returns the number of
    blocks compiled; raises ``ValueError`` when the model has none."""
    from ..model.blocks import AggregatorBlock

    blocks = [m for m in model.modules() if isinstance(m, AggregatorBlock)]
    if not blocks:
        raise ValueError(f"train.compile: {type(model).__name__} has no AggregatorBlock to compile "
                         "(set train.compile=false)")
    for block in blocks:
        block.compile()
    return len(blocks)


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
    Workers are persistent whenever there are any (``depthpe.data.dataset.loader_kwargs``)."""
    return {"num_workers": cfg.train.num_workers, "grad_accum": cfg.train.grad_accum,
            "pin_memory": torch.device(device).type == "cuda"}


def default_cpu_threads(num_workers: int, num_processes: int) -> int:
    """Cores of this machine per training process, minus the data workers of that process (at least 1):
    more threads than cores (workers included) makes CPU steps many times slower."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, num_processes) - num_workers)
