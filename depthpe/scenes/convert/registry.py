"""The dataset layouts ``depthpe convert`` reads: name -> converter module (imported when used)."""

from __future__ import annotations

__all__ = ["CONVERTERS", "OWN_CAPTURES", "converter_module"]

CONVERTERS = {
    "co3d": "depthpe.scenes.convert.co3d",
    "wildrgbd": "depthpe.scenes.convert.wildrgbd",
    "arkitscenes": "depthpe.scenes.convert.arkitscenes",
    "megasynth": "depthpe.scenes.convert.megasynth",
    "folder": "depthpe.scenes.convert.folder",
    "colmap": "depthpe.scenes.convert.colmap",
    "wai": "depthpe.scenes.convert.wai",
}
#: Layouts of data processed by the user; ``depthpe convert`` checks them afterwards by default.
OWN_CAPTURES = ("folder", "colmap", "wai")


def converter_module(dataset: str) -> str:
    """Module name of the converter for ``dataset``; raises ValueError listing the known datasets."""
    try:
        return CONVERTERS[dataset]
    except KeyError:
        raise ValueError(f"unknown dataset {dataset!r}; expected one of {sorted(CONVERTERS)}") from None
