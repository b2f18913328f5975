"""Camera sources of the data layer: the cameras of a depthpe scene file, and the one reader of every
camera source (COLMAP folder, cameras JSON, scene file) that ``depthpe predict`` and the own-capture
converter use.

The io layer (``depthpe.io.cameras``) reads users' camera files and sits below the data layer, so it
cannot open scene files itself; ``read_camera_source`` hands it ``read_scene_cameras`` for them.
"""

from __future__ import annotations

import os

from ..config import ConfigError
from ..io.cameras import FrameCamera, check_camera, read_cameras
from .scene_file import SceneFileError, SceneReader

__all__ = ["read_scene_cameras", "read_camera_source"]


def read_scene_cameras(path: str | os.PathLike) -> dict[str, FrameCamera]:
    """Cameras of a depthpe scene file, keyed by ``frame_names`` (``frame_00000``... without them)."""
    try:
        with SceneReader(path) as reader:
            K, w2c = reader.read_cameras()
            names = reader.frame_names() or [f"frame_{i:05d}" for i in range(reader.num_frames)]
            width, height = reader.width, reader.height
    except SceneFileError as err:
        raise ConfigError(str(err)) from err
    cams = {name: FrameCamera(name, K[i], w2c[i], width, height) for i, name in enumerate(names)}
    return {name: check_camera(cam, path) for name, cam in cams.items()}


def read_camera_source(source: str | os.PathLike) -> dict[str, FrameCamera]:
    """Cameras of a COLMAP folder, a cameras JSON or a scene file (``depthpe.io.cameras.read_cameras``
    with ``read_scene_cameras`` for ``.h5``), keyed by image name; ConfigError with one line if unusable."""
    return read_cameras(source, scene_reader=read_scene_cameras)
