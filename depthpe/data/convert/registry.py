"""The dataset layouts ``depthpe convert`` reads: name -> converter module (imported when used)."""

from __future__ import annotations

__all__ = ["CONVERTERS", "OWN_CAPTURES", "converter_module"]

CONVERTERS = {
    "co3d": "depthpe.data.convert.co3d",
    "wildrgbd": "depthpe.data.convert.wildrgbd",
    "arkitscenes": "depthpe.data.convert.arkitscenes",
    "megasynth": "depthpe.data.convert.megasynth",
    "folder": "depthpe.data.convert.folder",
    "colmap": "depthpe.data.convert.colmap",
    "wai": "depthpe.data.convert.wai",
}
#: Layouts of data processed by the user; ``depthpe convert`` checks them afterwards by default.
OWN_CAPTURES = ("folder", "colmap", "wai")


def converter_module(dataset: str) -> str:
    """Module name of the converter for ``dataset``; raises ValueError listing the known datasets."""
    try:
        return CONVERTERS[dataset]
    except KeyError:
        raise ValueError(f"unknown dataset {dataset!r}; expected one of {sorted(CONVERTERS)}") from None
