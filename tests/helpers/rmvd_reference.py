"""Pickles shaped like the reference RMVD code's official sample lists, built without its code:
stand-in classes with the reference's module and class names are registered in ``sys.modules``
only while the pickle is written (``reference_pickle``)."""

from __future__ import annotations

import pickle
import sys
import types

REFERENCE_NAMES = {"kitti": ("rmvd.data.kitti", "KITTI"), "dtu": ("rmvd.data.dtu", "DTU"),
                   "scannet": ("rmvd.data.scannet", "ScanNet"), "eth3d": ("rmvd.data.eth3d", "ETH3D"),
                   "tanks_and_temples": ("rmvd.data.tanks_and_temples", "TanksAndTemples")}


def reference_pickle(dataset: str, samples: list[dict]) -> bytes:
    """The pickle bytes of a list of reference-style samples: each dict has ``name``, optionally
    ``base``, and ``data`` with ``images`` (paths, or (path, height, width) for ScanNet-style
    records), ``depth`` (a path), ``intrinsics``, ``poses`` (numpy arrays), ``keyview_idx`` and
    optionally ``depth_range``."""
    module_name, prefix = REFERENCE_NAMES[dataset]
    names = ["rmvd", "rmvd.data", module_name]
    saved = {n: sys.modules.get(n) for n in names}
    module = types.ModuleType(module_name)
    classes = {kind: type(prefix + kind, (), {"__module__": module_name}) for kind in ("Sample", "Image", "Depth")}
    for cls in classes.values():
        setattr(module, cls.__name__, cls)
    try:
        for name in names[:2]:
            sys.modules[name] = types.ModuleType(name)
        sys.modules[module_name] = module
        return pickle.dumps([_sample(classes, s) for s in samples], protocol=4)
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old


def _record(cls, **attrs):
    obj = cls()
    obj.__dict__.update(attrs)
    return obj


def _sample(classes: dict, spec: dict):
    data = dict(spec["data"])
    data["images"] = [_record(classes["Image"], path=i) if isinstance(i, str)
                      else _record(classes["Image"], path=i[0], height=i[1], width=i[2]) for i in data["images"]]
    data["depth"] = _record(classes["Depth"], path=data["depth"])
    extra = {"base": spec["base"]} if "base" in spec else {}
    return _record(classes["Sample"], name=spec["name"], data=data, **extra)
