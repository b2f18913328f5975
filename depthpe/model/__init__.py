"""The depth model: frozen timm DINOv2 backbone, VGGT-style aggregator, DPT depth head.

``DepthModelConfig`` / ``PRESETS`` import without torch; ``DepthModel`` (and the torch modules)
are imported on first access.
"""

from .config import PRESETS, ConfigError, DepthModelConfig

__all__ = ["DepthModel", "DepthModelConfig", "PRESETS", "ConfigError", "CheckpointMismatchError"]

_LAZY = {"DepthModel": "depth_model", "CheckpointMismatchError": "depth_model"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
