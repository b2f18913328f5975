"""What the loader (``depthpe.loader``) may use of the scene files: the one public door between the
two packages. Training and evaluation read scene files only through these names; everything else
under ``depthpe.scenes`` (converters, synth, checks, camera readers) is offline tooling that the loader
never imports. See docs/scene-format.md for the format itself.

- ``SceneReader``: one scene file opened lazily (frames, K, w2c, depth), ``SceneFileError`` its one error.
- ``read_index``: the ``index.json`` of a split folder.
- ``frame_size_problem``: why a scene's frame size cannot be used, or None.
- ``MIN_SCALE_RATIO``: the smallest camera baseline / median depth a usable sample has (``depthpe check``
  fails a scene below it; the default of ``DataConfig.min_scale_ratio``).
"""

from __future__ import annotations

from .format.limits import MIN_SCALE_RATIO, frame_size_problem
from .format.scene_file import SceneFileError, SceneReader, read_index

__all__ = ["SceneReader", "SceneFileError", "read_index", "frame_size_problem", "MIN_SCALE_RATIO"]
