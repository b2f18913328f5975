"""Converters from raw dataset downloads to depthpe scene files (``depthpe convert DATASET``).

One module per dataset (co3d, wildrgbd, arkitscenes, megasynth) reads the native layout and camera
conventions (docs/data.md); ``folder`` and ``colmap`` read a user's own captures (images + depth +
cameras, or a COLMAP dense workspace); the shared machinery is one module per job (``contract``,
``readers``, ``frames``, ``splits``, ``scene``, ``runner``, ``summary``), gathered by ``common``. Tiny fake datasets in each native layout, for tests and ``depthpe bench convert``,
live in ``depthpe.testing.fake_datasets``.
"""

from __future__ import annotations

__all__ = ["CONVERTERS", "OWN_CAPTURES", "converter_module", "convert"]

from .registry import CONVERTERS, OWN_CAPTURES, converter_module


def convert(dataset: str, src, out, options=None) -> dict:
    """Convert the raw download ``src`` of ``dataset`` into ``out/<dataset>/<split>/``; returns the
    summary dict of ``common.convert_dataset``."""
    from .common import convert_dataset

    return convert_dataset(converter_module(dataset), src, out, options)
