"""Typed settings of ``depthpe demo`` (light module: no torch, no gradio)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..config import require
from ..config.options import REQUIRED, check_required, option

__all__ = ["DemoConfig"]


@dataclass
class DemoConfig:
    """``depthpe demo``: the model the page runs (an exported folder or a Hub repo id at
    ``revision``, on ``device``), where it is served (``host``, ``port``) and what an upload may be
    (``max_images`` per request, ``max_mb`` per file)."""

    model: str = option(REQUIRED, help="exported model folder or Hub repo id")
    revision: Optional[str] = option(None, help="Hub revision of --model")
    device: Optional[str] = option(None, help="torch device (none: cuda if available, else cpu)")
    host: str = option("127.0.0.1", help="address to serve on (0.0.0.0: reachable from other machines)")
    port: int = option(7860, help="port to serve on")
    max_images: int = option(32, help="images per request")
    max_mb: float = option(20.0, metavar="MB", help="megabytes per uploaded file")

    def __post_init__(self) -> None:
        check_required(self)
        require(0 <= self.port <= 65535, f"--port must be in 0..65535, got {self.port}")
        require(self.max_images >= 1, f"--max-images must be >= 1, got {self.max_images}")
        require(self.max_mb > 0, f"--max-mb must be > 0, got {self.max_mb:g}")
