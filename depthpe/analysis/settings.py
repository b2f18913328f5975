"""Settings of ``depthpe compare`` (``CompareConfig``: ``compare.run_compare``) and ``depthpe plot``
(``PlotConfig``: ``plotting.run_plot``). Each default and help text is written here once (the
library functions' keyword defaults are these); the commands' options are generated from them
(``depthpe.config.options``). Light module: no numpy, torch or matplotlib import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..config.options import REQUIRED, check_required, option, overwrite_option

__all__ = ["CompareConfig", "PlotConfig", "GROUP_BY", "BOOTSTRAP", "PLOT_METRICS", "PLOT_ROWS"]

GROUP_BY = "model.global_pe"  # the run-config key that names a run's group
BOOTSTRAP = 10_000  # bootstrap resamples of the paired intervals
PLOT_METRICS = ("abs_rel", "delta1", "loss")  # depthpe plot's panels
PLOT_ROWS = ("native",)  # ... of these table rows


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


@dataclass
class CompareConfig:
    """``depthpe compare``: the evaluations ``inputs`` (eval folders, or run folders with one eval*/)
    grouped by the run-config key ``group_by``; reference: the group the others are paired with
    (None = the first); dataset: only these datasets (None = every dataset all evaluations have);
    out: a folder for compare.md, compare.json and report.html (None = print only);
    allow_different_manifests: pair on the common scenes; bootstrap / seed: the paired intervals'
    resamples and their seed."""

    inputs: list[str] = option(REQUIRED, positional=True, metavar="RUN_OR_EVAL_DIR", help="evaluation folders "
                               "(summary.json) or run folders (config.yaml + one eval*/ folder)")
    group_by: str = option(GROUP_BY, help="dotted run-config key whose value names the group")
    reference: Optional[str] = option(None, help="group the others are paired with (none: the first group)")
    dataset: Optional[list[str]] = option(None, append=True, metavar="D", help="compare only this dataset "
                                          "(repeatable; none: every dataset all evaluations have)")
    out: Optional[str] = option(None, help="folder for compare.md and compare.json")
    overwrite: bool = overwrite_option()
    allow_different_manifests: bool = option(False, help="compare evaluations made on different manifests "
                                             "(paired on the common scenes)")
    bootstrap: int = option(BOOTSTRAP, metavar="N", help="bootstrap resamples")
    seed: int = option(0, help="seed of the bootstrap")

    def __post_init__(self) -> None:
        check_required(self)
        _require(len(self.inputs) >= 1, "RUN_OR_EVAL_DIR: give at least one evaluation or run folder")


@dataclass
class PlotConfig:
    """``depthpe plot``: the validation curves of the run folders ``runs`` into ``out``, one colour
    per group of ``group_by``, one panel per metric of ``metrics`` and table row of ``rows``."""

    runs: list[str] = option(REQUIRED, positional=True, metavar="RUN_DIR",
                             help="run folders (config.yaml and val_history.jsonl), or camera-noise sweep folders")
    group_by: str = option(GROUP_BY, help="dotted run-config key that names the group (colour) of a run")
    metrics: list[str] = option(default_factory=lambda: list(PLOT_METRICS), help="metrics, one panel each")
    rows: list[str] = option(default_factory=lambda: list(PLOT_ROWS),
                             help="table rows of the metrics (e.g. native scene_aligned)")
    out: str = option(REQUIRED, help="output folder")
    overwrite: bool = overwrite_option()

    def __post_init__(self) -> None:
        check_required(self)
        _require(len(self.runs) >= 1, "RUN_DIR: give at least one run folder")
        _require(len(self.metrics) >= 1 and len(self.rows) >= 1, "--metrics and --rows need at least one name each")
