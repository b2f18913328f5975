"""Batches of samples: the collate functions of the training and evaluation loaders.

``collate`` stacks B samples into (B, S, ...) tensors, ``scale`` into (B,) float32, names into lists,
sums ``redraws`` and ``skipped_files`` and concatenates ``bad_files`` over the batch: the training
loop adds these to its counters (this works with any number of DataLoader workers because the
counts travel with the batch).

A batch tensor is allocated in shared memory inside a DataLoader worker (``batch_tensor``), and
samples whose images and depth were already written into one batch tensor
(``MultiViewDataset.__getitems__``) are handed on without stacking.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

__all__ = ["collate", "collate_eval", "batch_tensor"]

_TENSOR_KEYS = ("images", "depth", "valid", "K", "w2c", "frames")


def collate(samples: Sequence[dict]) -> dict:
    """Stack samples sharing (S, H, W) into a batch.

    Returns images (B, S, 3, H, W) float32, depth (B, S, H, W) float32, valid (B, S, H, W) bool,
    K (B, S, 3, 3) float32, w2c (B, S, 4, 4) float32, frames (B, S) int64, scale (B,) float32,
    dataset / scene: lists of B str, redraws / skipped_files: int sums over the batch, bad_files:
    the samples' (path, reason) lists concatenated.
    """
    if not samples:
        raise ValueError("cannot collate an empty batch")
    shapes = {tuple(s["images"].shape) for s in samples}
    if len(shapes) != 1:
        raise ValueError(f"all samples of a batch must share (S, 3, H, W); got shapes {sorted(shapes)}")
    out = {k: _stack([s[k] for s in samples]) for k in _TENSOR_KEYS}
    out["scale"] = torch.tensor([s["scale"] for s in samples], dtype=torch.float32)
    out["dataset"] = [s["dataset"] for s in samples]
    out["scene"] = [s["scene"] for s in samples]
    out["redraws"] = int(sum(s["redraws"] for s in samples))
    out["skipped_files"] = int(sum(s["skipped_files"] for s in samples))
    out["bad_files"] = [b for s in samples for b in s.get("bad_files", ())]
    return out


def batch_tensor(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialized contiguous tensor of ``shape``; inside a DataLoader worker in shared memory
    (as torch's ``default_collate`` allocates), so that sending the batch to the main process copies
    nothing (pickling would copy it into shared memory: about 1.4 ms per 518-px image)."""
    if torch.utils.data.get_worker_info() is None:
        return torch.empty(shape, dtype=dtype)
    numel = int(np.prod(shape))
    storage = torch.UntypedStorage._new_shared(numel * torch.empty((), dtype=dtype).element_size())
    return torch.empty(0, dtype=dtype).set_(storage).view(shape)


def _stack(tensors: list[torch.Tensor]) -> torch.Tensor:
    """``torch.stack(tensors)`` into a ``batch_tensor``; when the B > 1 tensors already are the
    consecutive slices [0], [1], ... of one whole batch tensor (``MultiViewDataset.__getitems__``),
    that tensor itself, without a copy."""
    first = tensors[0]
    if len(tensors) > 1 and _slices_of_one_tensor(tensors):
        return first.new_empty(0).set_(first.untyped_storage()).view(len(tensors), *first.shape)
    return torch.stack(tensors, out=batch_tensor((len(tensors), *first.shape), first.dtype))


def _slices_of_one_tensor(tensors: list[torch.Tensor]) -> bool:
    """Whether ``tensors`` (equal shapes and dtypes) are the contiguous slices 0..B-1, in order, of one
    storage that holds exactly them."""
    first = tensors[0]
    storage, n = first.untyped_storage(), first.numel()
    if storage.nbytes() != len(tensors) * n * first.element_size():
        return False
    return all(t.untyped_storage().data_ptr() == storage.data_ptr() and t.storage_offset() == i * n
               and t.is_contiguous() and t.shape == first.shape and t.dtype == first.dtype
               for i, t in enumerate(tensors))


def collate_eval(samples: Sequence[dict]) -> dict:
    """Collate for ``SceneEvalDataset`` with batch size 1: the ``collate`` batch (B = 1) plus
    ``error: None``, or the item itself (``error`` set, no tensors) for an unusable scene."""
    if len(samples) != 1:
        raise ValueError("evaluation batches hold one scene (batch_size=1)")
    item = samples[0]
    if item["error"] is not None:
        return dict(item)
    return {**collate(samples), "error": None}
