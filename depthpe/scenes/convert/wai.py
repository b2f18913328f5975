"""WAI converter: scenes in MapAnything's WorldAI (WAI) format -> scene files (docs/data.md).

Layout of one scene (``SRC`` itself, or every folder at most six levels below ``SRC`` that holds a
``scene_meta.json``)::

    scene_meta.json          an extension of nerfstudio's transforms.json (``depthpe.scenes.transforms_json``)
    images/<frame>.png|jpg   the (undistorted) images, named by each frame's image modality
    depth/<frame>.exr        z-depth (OpenEXR, one channel; .npy or 16-bit .png / --depth-scale also read)
    covisibility/ masks/ ... other modalities (not used)

Conventions handled here:

* ``transform_matrix`` is camera-to-world in the axes ``camera_convention`` states (``opencv``, the
  only value WAI allows; ``opengl`` is converted too; a file without the field is read as OpenCV,
  as MapAnything's loader reads every file); it becomes OpenCV world-to-camera. Intrinsics ``fl_x,
  fl_y, cx, cy, w, h`` are per frame or shared; ``cx``, ``cy`` are read as MapAnything's loader
  reads them, as they are, pixel centres at whole numbers (``transforms_json.WAI_PIXEL_SHIFT``).
* ``frame_modalities`` maps a modality to the frame key holding its path (``{"depth": {"frame_key":
  "depth", "format": "depth"}}``; nested ones such as ``pred_depth/mvsanywhere`` take the path, and
  the last entry of a group, as WAI does). The image is the ``image`` modality (else ``file_path``),
  the depth the ``depth`` modality (``--depth-modality`` names another); a scene without that
  modality is skipped with one line naming the modalities it has.
* A scene with only ``scene_meta_distorted.json``, a fisheye ``camera_model`` or distortion
  coefficients is skipped (undistort it first). Depth 0, NaN and inf are invalid.
* ``scale_type: metric`` scenes are recorded as metric (metres), others in the scene's unit
  (``--metric`` says they all are metres).

Nothing is written into the WAI folders. Split: a seeded random draw of ``--val-scenes``
validation scenes (at most half), the rest train.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from .common import (
    ConvertOptions,
    FrameDropped,
    RawFrame,
    SceneRef,
    SceneSkipped,
    SceneSource,
    find_dirs_with,
    read_rgb_image,
)
from ...files import read_json
from .folder import folder_scene_id, npy_factor_of, read_depth_file

__all__ = [
    "NAME", "METRIC", "DEPTH_UNITS", "SOURCE", "SPLIT_RULE", "LAYOUT_HINT", "META_FILE", "DISTORTED_META_FILE",
    "list_scenes", "open_scene", "modality_key",
]

NAME = "wai"
METRIC = False
DEPTH_UNITS = "scene"
SOURCE = "WAI scene (MapAnything's WorldAI format; depthpe convert wai)"
SPLIT_RULE = "random"
LAYOUT_HINT = "SRC/<scene>/scene_meta.json with images/ and depth/*.exr (one folder per scene, or SRC itself)"
META_FILE = "scene_meta.json"
DISTORTED_META_FILE = "scene_meta_distorted.json"


def list_scenes(src: Path, options: ConvertOptions) -> list[SceneRef]:
    """Every folder under ``src`` (``src`` included) holding a ``scene_meta.json`` or only a
    ``scene_meta_distorted.json`` (skipped when opened); the id is its path below ``src`` joined by
    ``_`` (``src``'s own name for ``src`` itself)."""
    src = Path(src)
    folders = sorted(set(find_dirs_with(src, META_FILE)) | set(find_dirs_with(src, DISTORTED_META_FILE)))
    refs = []
    for folder in folders:
        parts = folder.relative_to(src).parts or (src.resolve().name,)
        refs.append(SceneRef(folder_scene_id("_".join(parts)), str(folder)))
    return refs


def modality_key(meta: dict, modality: str, first_frame: dict) -> str | None:
    """The frame key holding ``modality``'s path: ``frame_modalities[...]["frame_key"]`` along the
    '/'-separated ``modality`` (a group without ``frame_key``: its last entry), else ``modality``
    itself when the first frame has that key, else None."""
    node = meta.get("frame_modalities")
    for part in modality.split("/"):
        node = node.get(part) if isinstance(node, dict) else None
    while isinstance(node, dict) and "frame_key" not in node and node:
        node = node[next(reversed(node))]
    if isinstance(node, dict) and isinstance(node.get("frame_key"), str):
        return node["frame_key"]
    return modality if modality in first_frame else None


def _modality_names(meta: dict) -> str:
    """The modalities a scene's ``frame_modalities`` lists, for a message."""
    names = []
    for name, node in (meta.get("frame_modalities") or {}).items():
        nested = isinstance(node, dict) and "frame_key" not in node
        names += [f"{name}/{sub}" for sub in node] if nested else [name]
    return ", ".join(names) or "none"


def _read_meta(scene_dir: Path) -> dict:
    """The scene's ``scene_meta.json`` as a dict; SceneSkipped with one line when it cannot be used."""
    path = scene_dir / META_FILE
    if not path.is_file():
        raise SceneSkipped(f"only {DISTORTED_META_FILE}: the images are not undistorted yet; run the wai_processing "
                           "undistort stage (python -m wai_processing.scripts.undistort) first")
    try:
        meta = read_json(path)
    except (OSError, ValueError) as err:
        raise SceneSkipped(f"{META_FILE}: cannot read it as JSON ({err})") from None
    if not isinstance(meta, dict):
        raise SceneSkipped(f"{META_FILE}: not a JSON object")
    return meta


def _cameras(meta: dict, scene_dir: Path):
    """(frames, cameras by name) of the scene (``transforms_json.parse_transforms`` with OpenCV as the
    default axes, every camera checked); SceneSkipped with the reader's line."""
    from ...config import ConfigError
    from ..cameras import transforms_cameras
    from ..transforms_json import parse_transforms

    try:
        scene = parse_transforms(meta, scene_dir / META_FILE, default_convention="opencv")
        return scene.frames, transforms_cameras(scene, META_FILE)
    except ConfigError as err:
        raise SceneSkipped(str(err).replace(f"{scene_dir / META_FILE}: ", f"{META_FILE}: ")) from err


def _load_frame(scene_dir: Path, frame, cam, keys: tuple[str, str], depth_scale: float | None) -> RawFrame:
    """One WAI frame (image and depth from the frame keys ``keys``); FrameDropped ("no image",
    "no depth map", unreadable files), SceneSkipped for a camera of another aspect ratio."""
    from ...config import ConfigError
    from ..cameras import fit_camera

    image_rel, depth_rel = (frame.entry.get(k) for k in keys)
    if not isinstance(image_rel, str) or not image_rel:
        raise FrameDropped("no image")
    if not isinstance(depth_rel, str) or not depth_rel:
        raise FrameDropped("no depth map")
    image, orientation = read_rgb_image(scene_dir / image_rel)
    depth = read_depth_file(scene_dir / depth_rel, depth_scale, npy_factor_of(depth_scale))
    try:
        cam, _ = fit_camera(cam, frame.name, *image.shape[:2])
    except ConfigError as err:
        raise SceneSkipped(str(err)) from err
    return RawFrame(image=image, depth=depth, K=cam.K, w2c=cam.w2c, name=frame.name, exif_orientation=orientation)


def open_scene(ref: SceneRef, options: ConvertOptions) -> SceneSource:
    """Parse ``scene_meta.json``: cameras, the image and depth modalities, the scene's units."""
    scene_dir = Path(ref.path)
    meta = _read_meta(scene_dir)
    frames, cameras = _cameras(meta, scene_dir)
    first = frames[0].entry
    modality = options.depth_modality or "depth"
    depth_key = modality_key(meta, modality, first)
    if depth_key is None:
        raise SceneSkipped(f"no '{modality}' frame modality in {META_FILE} (it has: {_modality_names(meta)}); "
                           "pass --depth-modality NAME to use another")
    keys = (modality_key(meta, "image", first) or "file_path", depth_key)
    metric = options.metric or meta.get("scale_type") == "metric"
    return SceneSource(
        frames=frames,
        load=lambda f: _load_frame(scene_dir, f, cameras[f.name], keys, options.depth_scale),
        dropped=Counter(),
        units=(True, "m") if metric else (False, DEPTH_UNITS),
    )
