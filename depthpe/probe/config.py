"""Typed settings of ``depthpe probe attention`` (``ProbeConfig``). Light module: no torch import."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..config.inference import HeldOutScenes
from ..config.options import option, overwrite_option

__all__ = ["ProbeConfig"]


@dataclass
class ProbeConfig(HeldOutScenes):
    """``depthpe probe attention``: the correspondence lift of ``model``'s global attention on the
    held-out scenes under ``data`` (``data/<dataset>/<split>/index.json``), written to ``out``
    (docs/probe.md). Views as ``depthpe eval`` (views, seed, manifest); max_scenes: the first K
    scenes of each dataset; radii: window radii in patches around the true correspondence;
    depth_tolerance: relative depth agreement of the occlusion test; cpu: run on the CPU."""

    max_scenes: Optional[int] = option(8, flag="--scenes", metavar="K",
                                       help="probe the first K scenes of each dataset (none: all)")
    radii: list[int] = option(default_factory=lambda: [0, 1], help="window radii in patches around the "
                              "true correspondence (0 = the target patch alone)")
    depth_tolerance: float = option(0.05, help="occlusion test: the point's depth in the other view must "
                                    "agree with that view's GT depth within this fraction")
    overwrite: bool = overwrite_option()

    def __post_init__(self) -> None:
        self._check_held_out()
        if not self.radii or any(r < 0 for r in self.radii):
            raise ValueError(f"--radii must be one or more integers >= 0, got {self.radii}")
        if not self.depth_tolerance > 0:
            raise ValueError(f"--depth-tolerance must be > 0, got {self.depth_tolerance}")
