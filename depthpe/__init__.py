"""depthpe: fine-tune and evaluate VGGT-style multi-view depth models with a choice of
camera positional encoding in the cross-view attention. Importing it has no side effects."""

__version__ = "0.1.0"

# Heavy objects are imported on first access so that `import depthpe` stays light (no torch).
_LAZY = {"DepthModel": "depthpe.model", "DepthModelConfig": "depthpe.model.config", "predict": "depthpe.prediction.api"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'depthpe' has no attribute {name!r}")
