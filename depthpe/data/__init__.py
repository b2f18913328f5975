"""Old home of the scene files and the loader, kept for one release: ``depthpe.data.X`` still imports,
with a ``DeprecationWarning`` naming the new module.

The package was split (CHANGELOG.md): the scene files and everything that writes or checks them are
``depthpe.scenes`` (``format``, ``convert``, ``synth``, ``synth_config``, ``cameras``,
``transforms_json``, ``parallel``); the loader that training and evaluation read through is
``depthpe.loader`` (``augment``, ``batching``, ``config``, ``datasets``, ``loaders``, ``samples``,
``sampling``, ``scenes``, ``workers``). Nothing in depthpe imports this package. The aliasing is an
import hook because Python has no declarative way to alias a whole package tree.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__all__: list[str] = []

MOVED = {**{name: "depthpe.scenes." + name for name in
            ("format", "convert", "synth", "synth_config", "cameras", "transforms_json", "parallel")},
         **{name: "depthpe.loader." + name for name in
            ("augment", "batching", "config", "datasets", "loaders", "samples", "sampling", "scenes", "workers")}}


def new_name(old: str) -> str | None:
    """The module that ``depthpe.data.X[.Y]`` moved to, or None if ``old`` is not one of them."""
    parts = old.split(".")
    if parts[:2] != ["depthpe", "data"] or len(parts) < 3 or parts[2] not in MOVED:
        return None
    return ".".join([MOVED[parts[2]], *parts[3:]])


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves ``depthpe.data.X`` to the moved module object itself (one module, two names)."""

    def find_spec(self, fullname, path=None, target=None):
        return importlib.util.spec_from_loader(fullname, self) if new_name(fullname) else None

    def create_module(self, spec):
        target = new_name(spec.name)
        warnings.warn(f"{spec.name} moved to {target}; the old name goes away in the next release",
                      DeprecationWarning, stacklevel=2)
        module = importlib.import_module(target)
        spec.loader_state = module.__spec__  # the import system now sets module.__spec__ = spec
        return module

    def exec_module(self, module) -> None:
        """Nothing to run (``create_module`` returned the moved module, already executed); puts
        back the module's own ``__spec__``, which the import system replaced with the old name's
        (``importlib.reload`` of the moved module would otherwise reload nothing)."""
        module.__spec__ = module.__spec__.loader_state


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())
