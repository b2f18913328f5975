"""Typed settings of ``depthpe view`` (light module: no torch, no viser)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..config import require
from ..config.choices import DTYPES
from ..config.options import option

__all__ = ["ViewConfig"]


@dataclass
class ViewConfig:
    """``depthpe view``: what to show (a predict or eval output folder, or --model with --data and
    --scene), where to serve it (host, port), and the starting values of the controls."""

    source: Optional[str] = option(None, positional=True, help="a `depthpe predict` output folder, or a "
                                   "`depthpe eval` output folder (with --scene)")
    model: Optional[str] = option(None, help="exported model folder or Hub repo id (with --data)")
    data: Optional[str] = option(None, help="data root holding <dataset>/<split>/index.json (with --model)")
    scene: Optional[str] = option(None, help="held-out scene to show, <dataset>/<scene_id> or the id "
                                  "(none: the first one)")
    split: Optional[str] = option(None, help="split of --data (none: the evaluation's, else val)")
    views: Optional[int] = option(None, help="views of the scene (none: the evaluation's, else 8)")
    seed: Optional[int] = option(None, help="seed of the view draw (none: the evaluation's, else 0)")
    image_width: Optional[int] = option(None, metavar="PX", help="input width (none: the model's training width)")
    revision: Optional[str] = option(None, help="Hub revision of --model")
    dtype: Optional[str] = option(None, choices=DTYPES, help="fp32 or bf16 (autocast; none: the evaluation's, "
                                  "else fp32)")
    min_valid_fraction: Optional[float] = option(None, metavar="X", help="valid depth a view needs to be scored, "
                                                 "as `depthpe eval --min-valid-fraction` (none: the evaluation's, "
                                                 "else 0.01)")
    device: Optional[str] = option(None, help="torch device for --model (none: cuda if available, else cpu)")
    host: str = option("127.0.0.1", help="address to serve on (0.0.0.0: reachable from other machines)")
    port: int = option(8080, help="port to serve on")
    max_points: int = option(300_000, help="most points drawn at once (a uniform subsample; 0: no limit)")
    conf_threshold: Optional[float] = option(None, help="starting confidence threshold (none: keep all)")
    save: Optional[str] = option(None, metavar="FILE", help="where the 'save PLY' button writes (none: "
                                 "points_filtered.ply in the predict folder, else view_<dataset>_<scene>.ply here)")

    def __post_init__(self) -> None:
        has_model = self.model is not None or self.data is not None
        require(self.source is not None or has_model,
                 "nothing to show: pass a predict/eval output folder, or --model M --data ROOT [--scene NAME]")
        require(self.source is None or self.data is None,
                 "pass either an output folder or --data ROOT, not both")
        require(self.source is not None or (self.model is not None and self.data is not None),
                 "--model and --data go together (a model and the data root of the scene)")
        require(0 <= self.port <= 65535, f"--port must be in 0..65535, got {self.port}")
        require(self.max_points >= 0, f"--max-points must be >= 0, got {self.max_points}")
        require(self.views is None or self.views >= 2, f"--views must be at least 2, got {self.views}")
        require(self.min_valid_fraction is None or 0 <= self.min_valid_fraction <= 1,
                 f"--min-valid-fraction must be in [0, 1], got {self.min_valid_fraction}")
        require(self.image_width is None or (self.image_width > 0 and self.image_width % 14 == 0),
                 f"--image-width must be a positive multiple of 14, got {self.image_width}")
