"""Typed settings of ``depthpe probe attention`` (``ProbeConfig``). Light module: no torch import."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..inference_config import ModelInput, ViewProtocol
from ..options import REQUIRED, check_required, flag_of, option

__all__ = ["ProbeConfig"]


@dataclass
class ProbeConfig(ViewProtocol, ModelInput):
    """``depthpe probe attention``: the correspondence lift of ``model``'s global attention on the
    held-out scenes under ``data`` (``data/<dataset>/<split>/index.json``), written to ``out``
    (docs/probe.md). Views as ``depthpe eval`` (views, seed, manifest); max_scenes: the first K
    scenes of each dataset; radii: window radii in patches around the true correspondence;
    depth_tolerance: relative depth agreement of the occlusion test; cpu: run on the CPU."""

    data: str = option(REQUIRED, help="data root holding <dataset>/<split>/index.json")
    out: str = option(REQUIRED, help="output folder")
    split: str = option("val", help="split to probe")
    datasets: Optional[list[str]] = option(None, help="dataset names (none: all with that split)")
    max_scenes: Optional[int] = option(8, flag="--scenes", metavar="K",
                                       help="probe the first K scenes of each dataset (none: all)")
    radii: list[int] = option(default_factory=lambda: [0, 1], help="window radii in patches around the "
                              "true correspondence (0 = the target patch alone)")
    depth_tolerance: float = option(0.05, help="occlusion test: the point's depth in the other view must "
                                    "agree with that view's GT depth within this fraction")
    cpu: bool = option(False, help="run on CPU even if a GPU is available")

    def _label(self, name: str) -> str:
        return flag_of(type(self), name)

    def __post_init__(self) -> None:
        check_required(self)
        self._check_model_input()
        self._check_view_protocol()
        if self.max_scenes is not None and self.max_scenes < 1:
            raise ValueError(f"--scenes must be at least 1, got {self.max_scenes}")
        if not self.radii or any(r < 0 for r in self.radii):
            raise ValueError(f"--radii must be one or more integers >= 0, got {self.radii}")
        if not self.depth_tolerance > 0:
            raise ValueError(f"--depth-tolerance must be > 0, got {self.depth_tolerance}")
