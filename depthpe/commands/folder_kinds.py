"""What kind of output folder a ``depthpe compare`` or ``depthpe plot`` input is, and the one-line
refusal of a mix: one rule for both commands."""

from __future__ import annotations

from typing import Sequence

__all__ = ["KIND_NAMES", "folder_kind", "one_kind"]

# kind -> how an error names a folder of it ("evaluation": anything else, an eval or run folder)
KIND_NAMES = {"rmvd": "a depthpe rmvd output", "sweep": "a camera-noise sweep (depthpe study camera-noise)",
              "correspondence": "a depthpe study correspondence output", "evaluation": "an evaluation or run folder"}


def folder_kind(path: str) -> str:
    """``rmvd`` (``summary.json`` of ``depthpe rmvd``), ``sweep`` (``sweep.json`` of ``depthpe bench
    camera-noise``), ``correspondence`` (``results.json`` of ``depthpe study correspondence``) or
    ``evaluation`` (anything else: an evaluation or a run folder)."""
    from depthpe.studies.correspondence.compare import is_correspondence_folder
    from depthpe.studies.camera_noise.sweep import is_sweep_folder
    from ..analysis.rmvd_compare import is_rmvd_folder

    return ("rmvd" if is_rmvd_folder(path) else "sweep" if is_sweep_folder(path) else
            "correspondence" if is_correspondence_folder(path) else "evaluation")


def one_kind(paths: Sequence[str]) -> str:
    """The kind of every folder of ``paths``; a ``ConfigError`` (one line naming the first folder of
    another kind) when they are not all of one kind."""
    from ..config import ConfigError

    kinds = [folder_kind(p) for p in paths]
    for path, kind in zip(paths, kinds):
        if kind != kinds[0]:
            raise ConfigError(f"{path} is {KIND_NAMES[kind]} and {paths[0]} is {KIND_NAMES[kinds[0]]}: give folders "
                              "of one kind (evaluations, RMVD outputs, sweeps or correspondence runs) at a time")
    return kinds[0]
