"""One optimizer step: the learning-rate schedule, micro-batches, non-finite handling, clipping.

``run_step`` is the whole update of one optimizer step on every process: set the learning rate of
the step, accumulate gradients over ``train.grad_accum`` micro-batches (the gradient all-reduce
happens on the last one), agree across processes on the loss terms, data counters and whether any
loss was non-finite, then clip and step, or skip the step and count it. Its inputs are the
prepared model and optimizer, the batch iterator and the ``TrainState`` it updates.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field

import torch

from ..geometry import cyclic_pairs, query_patches
from . import losses
from .correspondence import forward_with_correspondence
from .schema import OptimConfig, RunConfig
from .state import TrainState

__all__ = ["lr_at", "StepResult", "batch_to_device", "run_step", "NonFiniteError"]


class NonFiniteError(RuntimeError):
    """Too many optimizer steps in a row had a non-finite loss or gradient."""


def lr_at(step: int, cfg: OptimConfig, total_steps: int) -> float:
    """Learning rate of optimizer step ``step`` (0-based): linear warm-up from ``min_lr`` to ``lr``
    over ``warmup_steps``, then constant or cosine decay to ``min_lr`` at ``total_steps``."""
    if cfg.warmup_steps > 0 and step < cfg.warmup_steps:
        return cfg.min_lr + (cfg.lr - cfg.min_lr) * (step + 1) / cfg.warmup_steps
    if cfg.schedule == "constant":
        return cfg.lr
    span = max(1, total_steps - cfg.warmup_steps)
    progress = min(1.0, (step - cfg.warmup_steps) / span)
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * progress))


@dataclass
class StepResult:
    """What one step did: mean loss terms over processes, learning rate, gradient norm before
    clipping (NaN when skipped), images of this process, seconds spent waiting for data and in total,
    whether it was skipped, and the (path, reason) of unusable files met by any process for the first time."""

    terms: dict[str, float]
    lr: float
    grad_norm: float
    images: int
    data_time: float
    seconds: float = 0.0
    skipped: bool = False
    new_bad_files: list = field(default_factory=list)


def _zero_loss(trainable, depth: torch.Tensor) -> torch.Tensor:
    """A zero loss reaching every trainable parameter and the model output, back-propagated instead of
    a non-finite one so that this process joins the gradient all-reduce (DDP) or reduce-scatters (FSDP)
    of the others. A sharded (DTensor, FSDP2) parameter enters through its local shard: arithmetic on
    the DTensor itself starts collectives on this process only, which the others never join (a hang)."""
    local = [p.to_local() if hasattr(p, "to_local") else p for p in trainable]
    return sum((p * 0).sum() for p in local) + 0 * depth.sum().nan_to_num()


MODEL_INPUTS = ("images", "K", "w2c", "depth", "valid")


def batch_to_device(batch: dict, device: torch.device) -> list[torch.Tensor]:
    """``batch``'s images, K, w2c, depth and valid on ``device``. On CUDA the copies are
    asynchronous (``non_blocking``; the loader pins its batches there, ``loader_options``), so the
    copy of the next tensor starts while the previous one is in flight; on CPU they are the batch's
    own tensors (no copy)."""
    non_blocking = torch.device(device).type == "cuda"
    return [batch[key].to(device, non_blocking=non_blocking) for key in MODEL_INPUTS]


def _forward(model, inputs: list[torch.Tensor], cfg: RunConfig, step: int) -> tuple[dict, torch.Tensor | None]:
    """The model's output on ``inputs`` (images, K, w2c, depth, valid) and, with
    ``loss.correspondence_weight > 0``, the correspondence term of its global attention (every view
    queries the next one with at most ``loss.correspondence_queries`` patches, chosen by ``step``;
    ``depthpe.run.correspondence``), else None."""
    images, K, w2c, depth, valid = inputs
    if cfg.loss.correspondence_weight <= 0:
        return model(images, K, w2c), None
    patch = cfg.model.patch_size
    grid = (images.shape[-2] // patch, images.shape[-1] // patch)
    patches = query_patches(grid[0] * grid[1], cfg.loss.correspondence_queries, step)
    return forward_with_correspondence(model, lambda: model(images, K, w2c), depth, valid, K, w2c, grid,
                                       pairs=cyclic_pairs(images.shape[1]), patches=patches)


def _micro_batch(model, batch: dict, cfg: RunConfig, accelerator, trainable, step: int = 0) -> tuple[dict, bool]:
    """Forward and backward of one micro-batch of optimizer step ``step``; returns (detached loss
    terms, loss was finite). A non-finite loss back-propagates a zero instead, so every process joins
    the gradient all-reduce."""
    inputs = batch_to_device(batch, accelerator.device)
    depth, valid = inputs[3], inputs[4]
    with accelerator.autocast():
        out, correspondence = _forward(model, inputs, cfg, step)
    terms = losses.depth_loss(
        out["depth"], depth, valid, out.get("conf"),
        l1_weight=cfg.loss.l1_weight, gradient_weight=cfg.loss.gradient_weight,
        gradient_scales=cfg.loss.gradient_scales, conf_weight=cfg.loss.conf_weight, conf_alpha=cfg.loss.conf_alpha,
    )
    if correspondence is not None:
        terms["correspondence"] = correspondence
        terms["total"] = terms["total"] + cfg.loss.correspondence_weight * correspondence
    loss = terms["total"] / cfg.train.grad_accum
    finite = bool(torch.isfinite(loss))
    if not finite:
        loss = _zero_loss(trainable, out["depth"])
    accelerator.backward(loss)
    return {k: v.detach().double() / cfg.train.grad_accum for k, v in terms.items()}, finite


def _reduce(accelerator, local_bad: bool, redraws: int, skipped: int, terms: dict) -> tuple[bool, int, int, dict]:
    """One all-reduce per step: (any process bad, redraws, skipped draws, mean loss terms)."""
    stats = accelerator.reduce(torch.stack([
        torch.tensor(float(local_bad), dtype=torch.float64), torch.tensor(float(redraws), dtype=torch.float64),
        torch.tensor(float(skipped), dtype=torch.float64), *[v.cpu() for v in terms.values()],
    ]).to(accelerator.device), reduction="sum").tolist()
    world = accelerator.num_processes
    return stats[0] > 0, int(stats[1]), int(stats[2]), {k: v / world for k, v in zip(terms, stats[3:])}


def _gather_new_bad_files(accelerator, new_bad: list, known: dict) -> list:
    """The (path, reason) pairs met by any process this step that are not in ``known`` yet."""
    from accelerate.utils import gather_object

    found = gather_object(new_bad) if accelerator.num_processes > 1 else new_bad
    fresh: dict[str, str] = {}
    for path, reason in found:
        if path not in known:
            fresh.setdefault(path, reason)
    return list(fresh.items())


def _clip_or_skip(accelerator, optimizer, model, bad: bool, cfg: RunConfig, state: TrainState) -> float:
    """Clip and step, or skip a non-finite step (counted); returns the gradient norm before clipping.

    The norm is taken over all of the prepared ``model``'s parameters (the frozen ones have no
    gradient and add nothing): under FSDP Accelerate recognises the model's own parameter list and
    unscales fp16 gradients once, whereas for any other list it unscales them a second time, which
    the gradient scaler refuses."""
    from accelerate.utils import DistributedType

    grad_norm = math.nan
    if not bad:
        norm = accelerator.clip_grad_norm_(list(model.parameters()), cfg.optim.grad_clip)
        grad_norm = math.nan if norm is None else float(norm)
        # DeepSpeed clips and steps inside backward() (its norm, if any, is only logged)
        bad = not math.isfinite(grad_norm) and accelerator.distributed_type != DistributedType.DEEPSPEED
    if bad:
        state.counters["nonfinite_steps"] += 1
        state.nonfinite_in_row += 1
        optimizer.zero_grad(set_to_none=True)
        if state.nonfinite_in_row >= cfg.train.max_nonfinite_in_row:
            raise NonFiniteError(
                f"{state.nonfinite_in_row} optimizer steps in a row had a non-finite loss or gradient (step "
                f"{state.step}); training stopped. Lower optim.lr, use mixed_precision=bf16 instead of fp16, "
                "or run `depthpe check` on the data.")
        return math.nan
    state.nonfinite_in_row = 0
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return grad_norm


def run_step(model, optimizer, batches, cfg: RunConfig, state: TrainState, accelerator) -> StepResult:
    """One optimizer step over ``cfg.train.grad_accum`` micro-batches from ``batches``; updates
    ``state`` (step, counters, bad files, non-finite streak). Call on every process."""
    started = time.perf_counter()
    lr = lr_at(state.step, cfg.optim, cfg.train.steps)
    for group in optimizer.param_groups:
        group["lr"] = lr
    trainable = [p for p in model.parameters() if p.requires_grad]
    terms: dict[str, torch.Tensor] = {}
    local_bad, redraws, skipped, images, data_time, new_bad = False, 0, 0, 0, 0.0, []
    for micro in range(cfg.train.grad_accum):
        t0 = time.perf_counter()
        batch = next(batches)
        data_time += time.perf_counter() - t0
        redraws, skipped = redraws + batch["redraws"], skipped + batch["skipped_files"]
        new_bad += [(p, r) for p, r in batch["bad_files"] if p not in state.bad_files]
        images += batch["images"].shape[0] * batch["images"].shape[1]
        last = micro == cfg.train.grad_accum - 1
        with contextlib.nullcontext() if last else accelerator.no_sync(model):
            micro_terms, finite = _micro_batch(model, batch, cfg, accelerator, trainable, state.step)
        local_bad |= not finite
        for k, v in micro_terms.items():
            terms[k] = terms.get(k, 0.0) + v
    bad, redraws, skipped, mean_terms = _reduce(accelerator, local_bad, redraws, skipped, terms)
    state.counters["redraws"] += redraws
    state.counters["skipped_files"] += skipped
    fresh = _gather_new_bad_files(accelerator, new_bad, state.bad_files) if skipped else []
    state.bad_files.update(fresh)
    state.counters["bad_files"] = len(state.bad_files)
    grad_norm = _clip_or_skip(accelerator, optimizer, model, bad, cfg, state)
    state.step += 1
    state.counters["images"] += images * accelerator.num_processes
    return StepResult(mean_terms, lr, grad_norm, images, data_time, time.perf_counter() - started,
                      skipped=state.nonfinite_in_row > 0, new_bad_files=fresh)
