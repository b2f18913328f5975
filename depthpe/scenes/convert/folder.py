"""Own captures converter: a folder of images, depth maps and cameras -> scene files (docs/data.md).

Layout of one scene (``SRC`` itself, or every subfolder of ``SRC`` that holds ``images/``)::

    images/<name>.jpg|.jpeg|.png        RGB images (subfolders allowed; the name is the relative path)
    depth/<name without suffix>.npy     z-depth in the cameras' unit, float (0, NaN, inf = invalid)
                           .exr         the same as OpenEXR (first of the channels R, Z, Y, V, Depth.*)
                           .png         16-bit PNG: value / --depth-scale (default 1000: millimetres
                                        with metre cameras), 0 = invalid
    cameras.json                        ``{"frames": [{"file", "K", "w2c", "width"?, "height"?}]}``
      or transforms.json                nerfstudio / instant-ngp (``depthpe.scenes.transforms_json``); its
                                        ``depth_file_path`` / ``depth_path`` entries name the depth maps
                                        (then no depth/ folder is needed; ``integer_depth_scale`` scales
                                        16-bit PNG depth unless --depth-scale is given)
      or a COLMAP model                 ``sparse/0``, ``sparse`` or the folder itself (.bin or .txt)

``--cameras SOURCE`` names the camera source instead (the same for every scene). Cameras are read
with ``depthpe.scenes.cameras.read_cameras`` (OpenCV K and world-to-camera; COLMAP's half-pixel
shift is undone there) and matched to images by name (``match_cameras``: the path relative to
``images/``, else the file name with the closest path when that is unique; one camera name that
fits two images skips the scene). Images are read in their stored pixel grid, EXIF orientation ignored
(``read_rgb_image``): cameras and depth maps describe that grid. K refers to the camera's ``width``
x ``height`` and is rescaled to the image's size when only the resolution differs; another aspect
ratio skips the scene with a message naming the image (``fit_camera``). Frames without a camera,
without a depth map or with an unreadable image or depth are dropped with that reason. Depth must be z-depth (distance along the optical axis), not the
distance along the ray; `depthpe check` names that mistake. Split: everything is train.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ...files import safe_component
from ..format.limits import MAX_FRAME_SIDE
from ..format.npy_header import npy_claim_problem
from .common import (
    ConvertOptions,
    FrameDropped,
    RawFrame,
    SceneRef,
    SceneSkipped,
    SceneSource,
    read_rgb_image,
    read_uint16,
)

__all__ = [
    "NAME", "METRIC", "DEPTH_UNITS", "SOURCE", "SPLIT_RULE", "LAYOUT_HINT", "DEFAULT_DEPTH_SCALE",
    "Capture", "units", "scene_refs", "list_scenes", "open_scene", "open_capture", "read_depth_file", "npy_factor_of",
    "load_cameras", "folder_scene_id",
]

NAME = "folder"
METRIC = False
DEPTH_UNITS = "scene"
SOURCE = "own capture (depthpe convert folder)"
SPLIT_RULE = "train"
LAYOUT_HINT = ("SRC/images/*.jpg|png, SRC/depth/<image name>.npy|exr|png and SRC/cameras.json, SRC/transforms.json "
               "or a COLMAP model (SRC/sparse/0), or one such folder per scene under SRC")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
DEPTH_SUFFIXES = (".npy", ".exr", ".png")
NERFSTUDIO_DEPTH_UNIT = 1e-3  # nerfstudio's default depth_unit_scale_factor: depth files in millimetres
DEFAULT_DEPTH_SCALE = 1000.0
CAMERA_FILES = ("cameras.json", "transforms.json")


def units(options: ConvertOptions) -> tuple[bool, str]:
    """(metric, depth_units) of the written scenes: metres with ``--metric``, else the scene's own unit."""
    return (True, "m") if options.metric else (False, DEPTH_UNITS)


def folder_scene_id(name: str) -> str:
    """The scene id of a folder named ``name``: ``depthpe.files.safe_component(name)``, the name itself
    when it is a plain file name, else a plain one with 8 hex digits of its hash, so that two folders
    (``a b`` and ``a_b``, ``.x`` and ``x``) never share an id; ``scene`` for the root folder."""
    return safe_component(name) if name else "scene"


def scene_refs(src: Path, is_scene: Callable[[Path], bool]) -> list[SceneRef]:
    """``src`` itself when ``is_scene(src)``, else every subfolder of ``src`` for which it holds."""
    src = Path(src)
    folders = [src] if is_scene(src) else sorted(d for d in src.iterdir() if d.is_dir() and is_scene(d))
    return [SceneRef(folder_scene_id(d.resolve().name), str(d)) for d in folders]


def list_scenes(src: Path, options: ConvertOptions) -> list[SceneRef]:
    """The capture folder ``src`` (it holds ``images/``) or each subfolder of it that is one."""
    return scene_refs(src, lambda d: (d / "images").is_dir())


def check_npy_size(path: Path) -> None:
    """Read only the header of a ``.npy`` depth map and refuse, before anything is allocated, one
    that claims more than ``MAX_FRAME_SIDE`` pixels on a side or more bytes than the file holds
    (a 100000x100000 header would otherwise make ``np.load`` allocate 37 GB). Raises ``FrameDropped``."""
    try:
        with open(path, "rb") as f:
            problem = npy_claim_problem(f, path.stat().st_size)
    except OSError as err:
        raise FrameDropped("unreadable depth") from err
    reasons = {"unreadable": "unreadable depth", "too large": f"depth larger than {MAX_FRAME_SIDE} pixels on a side",
               "truncated": "truncated or corrupt depth"}
    if problem:
        raise FrameDropped(reasons[problem[0]])


def read_depth_file(path: Path, depth_scale: float | None, npy_factor: float = 1.0) -> np.ndarray:
    """A depth map file -> (H, W) float32 in the cameras' unit (NaN/inf kept; the runner zeroes them).
    ``.exr`` as stored; ``.npy`` times ``npy_factor`` (``npy_factor_of``); ``.png`` 16-bit divided by
    ``depth_scale`` (None = 1000). Raises ``FrameDropped`` ("unreadable depth", "truncated or corrupt depth")."""
    suffix = path.suffix.lower()
    if suffix == ".png":
        return read_uint16(path).astype(np.float32) / np.float32(depth_scale or DEFAULT_DEPTH_SCALE)
    if suffix == ".exr":
        from .megasynth import read_exr_depth

        return read_exr_depth(path)
    check_npy_size(path)
    try:
        depth = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise FrameDropped("unreadable depth") from err
    depth = np.squeeze(depth)
    if depth.ndim != 2 or not (np.issubdtype(depth.dtype, np.floating) or np.issubdtype(depth.dtype, np.integer)):
        raise FrameDropped("unreadable depth")
    return (depth.astype(np.float64) * npy_factor).astype(np.float32)


def npy_factor_of(depth_scale: float | None, unit_factor: float | None = None, transforms: bool = False) -> float:
    """What a ``.npy`` depth map's values are multiplied by: ``1 / --depth-scale`` when given; else in a
    transforms.json capture nerfstudio's rule (every depth file times ``depth_unit_scale_factor``, the
    file's ``unit_factor``, else ``NERFSTUDIO_DEPTH_UNIT`` = 1e-3: millimetres), elsewhere 1 (as stored)."""
    if depth_scale:
        return 1.0 / depth_scale
    if transforms:
        return unit_factor if unit_factor is not None else NERFSTUDIO_DEPTH_UNIT
    return 1.0


def load_cameras(source: str | os.PathLike) -> dict:
    """``read_cameras(source)``; a camera source that cannot be read skips the scene with its reason."""
    from ...config import ConfigError
    from ..cameras import read_cameras

    try:
        return read_cameras(source)
    except ConfigError as err:
        raise SceneSkipped(f"cameras: {err}") from err


@dataclass
class Capture:
    """One own-capture scene: its images (``(name relative to images/, path)``, sorted), cameras
    (camera name -> ``FrameCamera``, as read), ``find_depth(image name, its camera) -> Path | None``
    and ``read_depth(path) -> (H, W)``."""

    images: list
    cameras: dict
    find_depth: Callable[[str, object], Path | None]
    read_depth: Callable[[Path], np.ndarray]


def image_files(images_dir: Path) -> list[tuple[str, Path]]:
    """``(name, path)`` of every image under ``images_dir`` (name: '/'-separated relative path), sorted."""
    files = [p for p in images_dir.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file()]
    return sorted((p.relative_to(images_dir).as_posix(), p) for p in files)


def _load_frame(capture: Capture, matched: dict, frame: tuple[str, Path]) -> RawFrame:
    """One frame of a capture, ``matched``: image name -> its camera or None (``match_cameras``).
    Raises FrameDropped ("no camera", "no depth map", unreadable files), SceneSkipped for a camera of
    another aspect ratio than its image (``fit_camera``'s message)."""
    from ...config import ConfigError
    from ..cameras import fit_camera

    name, path = frame
    cam = matched[name]
    if cam is None:
        raise FrameDropped("no camera")
    depth_path = capture.find_depth(name, cam)
    if depth_path is None:
        raise FrameDropped("no depth map")
    image, orientation = read_rgb_image(path)
    depth = capture.read_depth(depth_path)
    try:
        cam, _ = fit_camera(cam, name, *image.shape[:2])
    except ConfigError as err:
        raise SceneSkipped(str(err)) from err
    return RawFrame(image=image, depth=depth, K=cam.K, w2c=cam.w2c, name=name, exif_orientation=orientation)


def open_capture(capture: Capture) -> SceneSource:
    """A ``SceneSource`` over the capture's images (in name order), each matched to its camera
    (``match_cameras``; an ambiguous match skips the scene with its message)."""
    from ...config import ConfigError
    from ..cameras import match_cameras

    if not capture.images:
        raise SceneSkipped("no images (.jpg, .jpeg, .png) in images/")
    try:
        matched = match_cameras(capture.cameras, [name for name, _ in capture.images])
    except ConfigError as err:
        raise SceneSkipped(f"cameras: {err}") from err
    return SceneSource(frames=capture.images, load=lambda fr: _load_frame(capture, matched, fr), dropped=Counter())


def _camera_source(scene_dir: Path, options: ConvertOptions) -> Path:
    """``options.cameras`` if given, else ``scene_dir/cameras.json``, else ``scene_dir/transforms.json``,
    else the scene folder (COLMAP)."""
    if options.cameras:
        return Path(options.cameras)
    return next((p for p in (scene_dir / f for f in CAMERA_FILES) if p.is_file()), scene_dir)


def _depth_finder(depth_dir: Path) -> Callable[[str, object], Path | None]:
    """``name -> depth_dir/<name without suffix>.{npy,exr,png}`` (the first that exists) or None."""
    def find(name: str, cam=None) -> Path | None:
        """The depth map of image ``name`` (its camera ``cam`` is not needed), or None."""
        stem = str(Path(name).with_suffix(""))
        return next((p for p in (depth_dir / f"{stem}{s}" for s in DEPTH_SUFFIXES) if p.is_file()), None)

    return find


def _listed_depth(source: Path):
    """The depth maps a transforms.json camera source names: ``({camera name: path}, its
    integer_depth_scale, its depth_unit_scale_factor)``, or None when ``source`` is no transforms.json
    or names no depth map."""
    from ...config import ConfigError
    from ..transforms_json import read_transforms

    if source.suffix.lower() != ".json" or not source.is_file():
        return None
    try:
        scene = read_transforms(source)
    except ConfigError:  # a cameras JSON (load_cameras has read it) is no transforms.json
        return None
    depth = {f.name: p for f in scene.frames if (p := scene.depth_path(f)) is not None}
    return (depth, scene.integer_depth_scale, scene.depth_unit_scale_factor) if depth else None


def _depth_source(scene_dir: Path, camera_source: Path, options: ConvertOptions) -> tuple[Callable, float | None, float]:
    """(find_depth, depth_scale, npy_factor): the depth maps a transforms.json names (16-bit PNG values
    times its ``integer_depth_scale`` unless --depth-scale is given; ``.npy`` by nerfstudio's rule,
    ``npy_factor_of``), else those of ``depth/`` (``.npy`` divided by --depth-scale when given)."""
    listed = _listed_depth(camera_source)
    if listed is not None:
        paths, integer_scale, unit = listed
        scale = options.depth_scale or (1.0 / integer_scale if integer_scale else None)
        return (lambda name, cam: paths.get(cam.name)), scale, npy_factor_of(options.depth_scale, unit, True)
    if not (scene_dir / "depth").is_dir():
        raise SceneSkipped("no depth/ folder (depth maps named like the images: .npy, .exr or 16-bit .png) and no "
                           "depth_file_path in a transforms.json")
    return _depth_finder(scene_dir / "depth"), options.depth_scale, npy_factor_of(options.depth_scale)


def open_scene(ref: SceneRef, options: ConvertOptions) -> SceneSource:
    """Images of ``images/``, cameras from ``_camera_source``, depth from ``_depth_source``."""
    scene_dir = Path(ref.path)
    camera_source = _camera_source(scene_dir, options)
    cameras = load_cameras(camera_source)
    find_depth, depth_scale, npy_factor = _depth_source(scene_dir, camera_source, options)
    capture = Capture(
        images=image_files(scene_dir / "images"),
        cameras=cameras,
        find_depth=find_depth,
        read_depth=lambda p: read_depth_file(p, depth_scale, npy_factor),
    )
    return open_capture(capture)
