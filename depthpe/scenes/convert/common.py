"""Shared machinery of the dataset converters: frames, resizing, splits, the parallel runner, summary.

A converter module (``depthpe.scenes.convert.<dataset>``) reads one native dataset layout and exposes

* ``NAME`` (folder name under the output root), ``METRIC`` (bool), ``DEPTH_UNITS`` ("m", "colmap",
  "scene"), ``SOURCE`` (a short provenance string), ``SPLIT_RULE``: ``"random"`` (a seeded random
  draw of ``val_scenes`` validation scenes, the rest train), ``"official"`` (each ``SceneRef``
  carries its split) or ``"train"`` (everything is train);
* ``list_scenes(src: Path, options: ConvertOptions) -> list[SceneRef]``: every scene of the raw
  download (cheap: no image is read); raises ``ConvertError`` when ``src`` has not the expected layout;
* ``open_scene(ref: SceneRef, options) -> SceneSource``: parses a scene's metadata (cameras, frame
  list); ``SceneSource.frames`` are frame keys in temporal order, ``SceneSource.dropped`` counts
  frames dropped while parsing (e.g. no pose), and ``SceneSource.load(key) -> RawFrame`` reads one
  frame in native resolution or raises ``FrameDropped(reason)``.

``convert_dataset`` does the rest, identically for every dataset: split assignment (written to
``ROOT/<dataset>/split.json`` and reused on reruns), resumability (a scene file written with the same
settings is kept), frame subsampling, resizing with exact intrinsics, dropping unusable frames, the
worker pool and progress bar, ``index.json`` per split and a summary (``convert_summary.json``).
Output frames follow docs/conventions.md: RGB uint8, z-depth (0 = invalid), OpenCV K and world-to-camera in
the dataset's own world frame and units.

The pieces live in one module each: ``contract`` (the types and errors above), ``readers`` (image
and depth files), ``frames`` (resizing and frame checks), ``splits``, ``scene`` (one scene),
``runner`` (the whole dataset) and ``summary``; this module gathers the names converters and
callers import.
"""

from __future__ import annotations

from .contract import ConvertError, FrameDropped, RawFrame, SceneRef, SceneSkipped, SceneSource
from .frames import fit_size, match_size, resize_frame, rotation_ok, scale_intrinsics
from .options import CONVERTER_VERSION, ConvertOptions
from .readers import find_dirs_with, read_image_file, read_rgb, read_rgb_image, read_uint16
from .runner import convert_dataset
from .scene import convert_scene
from .splits import load_or_create_split, random_val_split
from .summary import format_summary

__all__ = [
    "CONVERTER_VERSION",
    "ConvertError",
    "FrameDropped",
    "SceneSkipped",
    "ConvertOptions",
    "SceneRef",
    "RawFrame",
    "SceneSource",
    "fit_size",
    "scale_intrinsics",
    "resize_frame",
    "match_size",
    "find_dirs_with",
    "read_image_file",
    "read_rgb_image",
    "read_rgb",
    "read_uint16",
    "rotation_ok",
    "random_val_split",
    "load_or_create_split",
    "convert_scene",
    "convert_dataset",
    "format_summary",
]
