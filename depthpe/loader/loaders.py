"""The training DataLoader and the DataLoader settings every loader of the package shares.

Loader workers are forked and set up by ``depthpe.loader.workers.worker_init_fn``: they leave SIGTERM
and SIGINT to the main process (which checkpoints on pre-emption) and never inherit a live OpenCV
thread pool (a fork hook settles it first), so a loader started after ``predict`` does not hang.
"""

from __future__ import annotations

from torch.utils.data import DataLoader

from depthpe.loader.batching import collate
from depthpe.loader.config import DataConfig
from depthpe.loader.datasets import MultiViewDataset
from depthpe.loader.sampling import DynamicBatchSampler
from depthpe.loader.workers import worker_init_fn

__all__ = ["loader_kwargs", "build_train_loader"]


def loader_kwargs(num_workers: int, pin_memory: bool = False, prefetch_factor: int | None = 2) -> dict:
    """DataLoader keyword arguments shared by the package's loaders: workers, pinning,
    ``worker_init_fn``, and persistent workers + prefetch when ``num_workers`` > 0."""
    kw = {"num_workers": num_workers, "pin_memory": pin_memory, "worker_init_fn": worker_init_fn}
    if num_workers > 0:
        kw.update(persistent_workers=True, prefetch_factor=prefetch_factor or 2)
    return kw


def build_train_loader(
    data_cfg: DataConfig,
    *,
    seed: int,
    rank: int = 0,
    world_size: int = 1,
    start_step: int = 0,
    num_workers: int = 4,
    num_steps: int | None = None,
    pin_memory: bool = False,
    prefetch_factor: int | None = 2,
    grad_accum: int = 1,
) -> DataLoader:
    """Training DataLoader: ``MultiViewDataset`` + ``DynamicBatchSampler`` + ``collate``.

    The iterator yields ``grad_accum`` micro-batches per optimizer step, starting at optimizer step
    ``start_step`` (so resume passes the next step); infinite unless ``num_steps`` (exclusive end
    step). Each process passes its own ``rank``; all processes must pass the same ``seed``, config
    and ``grad_accum``: together they draw one global batch per step (see ``depthpe.loader.sampling``).
    Persistent workers when num_workers > 0. Do not wrap it with ``accelerator.prepare`` (it is
    already sharded by rank).
    """
    dataset = MultiViewDataset(data_cfg, train=True)
    sampler = DynamicBatchSampler(
        data_cfg, dataset.scene_counts, seed=seed, rank=rank, world_size=world_size,
        start_step=start_step, num_steps=num_steps, grad_accum=grad_accum,
    )
    return DataLoader(
        dataset, batch_sampler=sampler, collate_fn=collate,
        **loader_kwargs(num_workers, pin_memory, prefetch_factor),
    )
