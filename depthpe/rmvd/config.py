"""Typed settings of ``depthpe rmvd`` (``RmvdConfig``). Light module: no torch, no numpy."""

from __future__ import annotations

from dataclasses import dataclass

from ..config.options import REQUIRED, check_required, option

__all__ = ["RmvdConfig", "SETTING_CHOICES", "ORDERING_CHOICES"]

SETTING_CHOICES = ("known_poses", "intrinsics_only", "single_view")  # = metrics.SETTINGS
ORDERING_CHOICES = ("index_distance", "nearest", "quasi-optimal")  # = orderings.ORDERINGS


@dataclass
class RmvdConfig:
    """``depthpe rmvd``: score the depth maps under ``predictions`` on the RMVD sample lists
    ``samples`` (files or folders of ``*.json``) in each of ``settings``, with the source views of
    ``ordering`` (up to ``max_source_views``), and write the tables to ``out`` (docs/rmvd.md); a
    list's paths are relative to ``data_roots`` (``DATASET=DIR``) where given."""

    samples: list[str] = option(default_factory=list, metavar="FILE_OR_DIR",
                                help="sample-list JSON files, or folders of them (one or more); official:all or "
                                     "official:NAME for the shipped official lists")
    predictions: str = option(REQUIRED, metavar="DIR",
                              help="folder of predicted depth maps: DIR/<dataset>/<sample>.npy in metres")
    settings: list[str] = option(default_factory=lambda: ["known_poses"], flag="--setting", choices=SETTING_CHOICES,
                                 help="one or more of known_poses (no alignment), intrinsics_only, single_view "
                                      "(median-aligned); with several, each reads DIR/<setting>/")
    ordering: str = option("index_distance", choices=ORDERING_CHOICES,
                           help="source views: index_distance (headline) or the oracle orderings nearest, "
                                "quasi-optimal (best of 1..N source views per sample, uses the GT)")
    max_source_views: int = option(7, metavar="N", help="at most N source views per keyview")
    out: str = option(REQUIRED, metavar="DIR", help="output folder (summary.md, summary.json, per_sample.csv)")
    data_roots: list[str] = option(default_factory=list, flag="--data-root", append=True, metavar="DATASET=DIR",
                                   help="the folder a dataset's sample-list paths are relative to (its native root "
                                        "for the official lists); repeat per dataset")

    def __post_init__(self) -> None:
        check_required(self)
        if not self.samples:
            raise ValueError("--samples is required: one or more sample-list JSON files or folders")
        bad = [s for s in self.settings if s not in SETTING_CHOICES]
        if bad or not self.settings or len(set(self.settings)) != len(self.settings):
            raise ValueError(f"--setting must be one or more different values of {', '.join(SETTING_CHOICES)}, "
                             f"got {self.settings}")
        if self.ordering not in ORDERING_CHOICES:
            raise ValueError(f"--ordering must be one of {', '.join(ORDERING_CHOICES)}, got {self.ordering!r}")
        if self.max_source_views < 0:
            raise ValueError(f"--max-source-views must be >= 0, got {self.max_source_views}")
