"""Comparing a model's state dict with one to load (no torch import: only ``.shape`` is read).

Shared by ``depth_model`` (depthpe checkpoints) and ``vggt_weights`` (VGGT-format checkpoints), both
of which sit above this module.
"""

from __future__ import annotations

__all__ = ["state_dict_mismatches"]


def state_dict_mismatches(own: dict, incoming: dict) -> tuple[list[str], list[str], list[str]]:
    """Compare a model's state dict with one to load: (missing keys, unexpected keys,
    "key: checkpoint shape vs model shape" lines), each sorted. Values: tensors (any device,
    ``meta`` included) or anything with a ``.shape``."""
    missing = sorted(set(own) - set(incoming))
    unexpected = sorted(set(incoming) - set(own))
    shapes = sorted(
        f"{k}: checkpoint {tuple(incoming[k].shape)} vs model {tuple(own[k].shape)}"
        for k in set(own) & set(incoming)
        if incoming[k].shape != own[k].shape
    )
    return missing, unexpected, shapes
