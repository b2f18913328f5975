"""Settings of ``depthpe check`` and ``depthpe index``: ``CheckThresholds`` (what ``check_scene``
judges a scene by), ``CheckConfig`` (``depthpe check``'s whole command line) and ``IndexConfig``
(``depthpe index``'s). Each default and help text is written here once; the commands' options are
generated from them (``depthpe.config.options``) and ``check_scene``'s keyword defaults are
``CheckThresholds``'. Light module: no torch, OpenCV or h5py import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...config import require

from ...config.options import REQUIRED, check_required, option

__all__ = ["CheckThresholds", "CheckConfig", "IndexConfig", "workers_option", "WORKER_LIMIT"]

WORKER_LIMIT = 8  # processes of check and index with --workers 0 (one per core, at most this many)


def workers_option(doing: str):
    """The ``--workers K`` field of ``check`` and ``index``: processes ``doing`` the work (0 = one per
    core, at most ``WORKER_LIMIT``; 1 = in this process)."""
    return option(0, metavar="K", help=f"processes {doing} in parallel; 0 = one per available CPU core, at most "
                  f"{WORKER_LIMIT} (fewer when there is too little work to share); 1 = in this process")




@dataclass
class CheckThresholds:
    """What a scene is judged by (``check_scene``). max_rel_error: the largest median reprojection
    disagreement (a fraction); min_valid_fraction: the least mean fraction of valid depth pixels;
    min_overlap: the co-visible fraction that makes a view pair overlap; occlusion_margin: how far
    behind the other view's surface (a fraction) a point is occluded rather than wrong;
    allow_no_overlap: no overlapping pair is a warning, not a failure; max_pairs / max_points: view
    pairs examined per scene and pixels reprojected per pair."""

    max_rel_error: float = option(0.05, metavar="X", help="fail a scene whose median reprojection disagreement "
                                  "exceeds this fraction (0.05 = 5%%)")
    min_valid_fraction: float = option(0.01, metavar="X", help="fail a scene whose mean fraction of valid depth "
                                       "pixels is below this")
    min_overlap: float = option(0.1, metavar="X", help="a view pair counts as overlapping when at least this "
                                "fraction of the reprojected points are co-visible (land on valid depth, not occluded)")
    occlusion_margin: float = option(0.1, metavar="X", help="a reprojected point lying more than this fraction "
                                     "behind the other view's surface is occluded, not an error (0.1 = 10%%)")
    allow_no_overlap: bool = option(False, help="do not fail scenes where no view pair overlaps (only for datasets "
                                    "whose views are truly disjoint; usually no overlap means broken cameras)")
    max_pairs: int = option(24, flag="--pairs", metavar="N", help="view pairs examined per scene (all pairs of "
                            "small scenes)")
    max_points: int = option(4096, flag="--points", metavar="N", help="pixels reprojected per pair")

    def _check_thresholds(self) -> None:
        require(self.max_rel_error > 0, f"--max-rel-error must be positive, got {self.max_rel_error}")
        for name in ("min_valid_fraction", "min_overlap", "occlusion_margin"):
            value = getattr(self, name)
            require(0 <= value <= 1, f"--{name.replace('_', '-')} must be in [0, 1], got {value}")
        require(self.max_pairs >= 1 and self.max_points >= 1,
                 f"--pairs and --points must be at least 1, got {self.max_pairs} and {self.max_points}")


@dataclass
class CheckConfig(CheckThresholds):
    """``depthpe check``: every scene listed under ``root`` judged by the ``CheckThresholds``. limit:
    scenes per split (None = all); json: a file for the per-scene reports; show: table rows printed
    (failed scenes always are); workers: ``workers_option``; progress: a progress bar."""

    root: str = option(REQUIRED, positional=True, help="data root (e.g. data) or one dataset/split folder")
    limit: Optional[int] = option(None, metavar="K", help="check at most this many scenes per split (none: all)")
    json: Optional[str] = option(None, metavar="FILE", help="also write the per-scene reports to this JSON file")
    show: int = option(50, metavar="N", help="table rows to print; failed scenes are always printed")
    workers: int = workers_option("checking scenes")
    progress: bool = option(True, flag="--quiet", store_false=True, help="no progress bar")

    def __post_init__(self) -> None:
        check_required(self)
        self._check_thresholds()
        require(self.limit is None or self.limit >= 0, f"--limit must be >= 0, got {self.limit}")
        require(self.show >= 0, f"--show must be >= 0, got {self.show}")
        require(self.workers >= 0, f"--workers must be >= 0 (0 = one per CPU core), got {self.workers}")

    def thresholds(self) -> dict:
        """The ``CheckThresholds`` fields as ``check_scene`` keyword arguments."""
        from dataclasses import fields

        return {f.name: getattr(self, f.name) for f in fields(CheckThresholds)}


@dataclass
class IndexConfig:
    """``depthpe index``: rebuild the ``index.json`` of every folder of scene files under ``root``
    (``reindex.rebuild_indexes``). dry_run: report only; workers: ``workers_option``; progress: a
    progress bar."""

    root: str = option(REQUIRED, positional=True, help="data root, a dataset folder or one split folder")
    dry_run: bool = option(False, help="report what would be listed and skipped; write nothing")
    workers: int = workers_option("opening scene files")
    progress: bool = option(True, flag="--quiet", store_false=True, help="no progress bar")

    def __post_init__(self) -> None:
        check_required(self)
        require(self.workers >= 0, f"--workers must be >= 0 (0 = one per CPU core), got {self.workers}")
