"""nerfstudio / instant-ngp ``transforms.json`` and WAI ``scene_meta.json`` (its extension): parsing
the frames into depthpe's camera conventions, and writing them (docs/data.md).

The format (one JSON object)::

    {"camera_model": "OPENCV", "fl_x", "fl_y", "cx", "cy", "w", "h",      intrinsics shared by all frames
     "k1", "k2", "k3", "k4", "p1", "p2",                                  lens distortion (must be 0 here)
     "camera_angle_x", "camera_angle_y",                                  instant-ngp: field of view (radians)
     "integer_depth_scale",                                               instant-ngp: 16-bit depth -> unit
     "depth_unit_scale_factor",                                           nerfstudio: depth file -> metres (1e-3)
     "camera_convention": "opencv" | "opengl",                            WAI only (nerfstudio: OpenGL)
     "frames": [{"file_path": "images/0001.png", "transform_matrix": 4x4 (or 3x4) camera-to-world,
                 "depth_file_path" | "depth_path": "depth/0001.png",     optional depth map
                 any intrinsics key above, overriding the shared value for this frame}]}

Conventions handled here:

* ``transform_matrix`` is **camera-to-world**; its camera axes are OpenGL/Blender (x right, y up,
  z backward) in nerfstudio and instant-ngp, and whatever ``camera_convention`` says in WAI
  (``"opencv"``: x right, y down, z forward). OpenGL axes become OpenCV by ``c2w @ diag(1, -1, -1,
  1)``; then ``w2c = c2w^-1``. The rotation must be orthonormal with det +1 (a rigid transform).
* Pixel coordinates put the centre of the top-left pixel at (0.5, 0.5) (nerfstudio's convention;
  instant-ngp's default ``cx = w / 2``); depthpe puts it at (0, 0), so the principal point is
  shifted by ``-PIXEL_SHIFT`` when read (and back when written). WAI ``scene_meta.json`` files are
  read as MapAnything's loader reads them: ``cx``, ``cy`` as they are (``WAI_PIXEL_SHIFT`` = 0).
* Without ``fl_x``: ``fl_x = 0.5 w / tan(0.5 camera_angle_x)`` (``fl_y`` likewise from
  ``camera_angle_y``, else ``fl_x``); without ``cx``/``cy``: the image centre ``w / 2``, ``h / 2``.
* Undistorted pinhole images only (``depthpe.scenes.lens``, the check every camera reader shares): a
  non-zero distortion coefficient (``k*``, ``p*``, nerfstudio's ``distortion_params`` list, top level
  or per frame), a ``camera_model`` that is not a pinhole (``OPENCV_FISHEYE``, ``EQUIRECTANGULAR``,
  ...) and instant-ngp's ``is_fisheye``, ``ftheta_p*``, ``latlong`` and ``equirectangular`` are
  refused (``UNDISTORT_HINT``).

Malformed input raises ``depthpe.config.ConfigError`` with one line naming the file and frame.
Light module: numpy and the standard library only.
"""

from __future__ import annotations

import json
import math
import re
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..config import ConfigError
from ..files import atomic_write_bytes, read_json
from .format.limits import MAX_FRAME_SIDE, rotation_problems
from .lens import DISTORTION_KEYS, FTHETA_KEYS, LENS_FLAGS, UNDISTORT_HINT, distortion_list, lens_problem

__all__ = [
    "PIXEL_SHIFT", "WAI_PIXEL_SHIFT", "is_wai_doc", "GL_TO_CV", "UNDISTORT_HINT", "DEPTH_KEYS", "NerfFrame", "NerfScene", "is_transforms_doc",
    "parse_transforms", "read_transforms", "transform_to_w2c", "w2c_to_transform", "write_transforms_json",
]

#: transforms.json principal point minus OpenCV principal point (top-left pixel centre at 0.5).
PIXEL_SHIFT = 0.5
#: The same for WAI ``scene_meta.json``: MapAnything's loader builds K from the stored ``cx``, ``cy`` as
#: they are, with pixel centres at whole numbers (``mapanything/utils/wai/camera.py``), so depthpe
#: reads them unshifted too and a model trained on a WAI scene sees the geometry MapAnything sees.
WAI_PIXEL_SHIFT = 0.0
#: OpenGL camera axes (x right, y up, z back) -> OpenCV axes (x right, y down, z forward); its own inverse.
GL_TO_CV = np.diag([1.0, -1.0, -1.0, 1.0])
#: Per-frame keys of a depth map: nerfstudio's, then instant-ngp's.
DEPTH_KEYS = ("depth_file_path", "depth_path")
CONVENTIONS = ("opencv", "opengl")


@dataclass
class NerfFrame:
    """One frame: ``name`` (its ``file_path``, '/'-separated, a leading ``./`` removed), ``K`` (3, 3)
    OpenCV pixel intrinsics, ``w2c`` (3, 4) OpenCV world-to-camera, ``width`` x ``height`` (0 =
    not given), ``entry`` (the frame's JSON object as read: modality paths and other keys)."""

    name: str
    K: np.ndarray
    w2c: np.ndarray
    width: int
    height: int
    entry: dict = field(default_factory=dict)


@dataclass
class NerfScene:
    """A parsed file: ``frames`` in file order, ``convention`` the camera axes its matrices were read
    in, ``integer_depth_scale`` and ``depth_unit_scale_factor`` (None = not given), ``folder`` (relative paths start there) and
    ``meta`` (the top-level keys but ``frames``)."""

    frames: list
    convention: str
    integer_depth_scale: float | None
    folder: Path
    meta: dict
    depth_unit_scale_factor: float | None = None

    def path_of(self, frame: NerfFrame, key: str) -> Path | None:
        """The file ``frame.entry[key]`` names (relative to ``folder``), or None without that key."""
        value = frame.entry.get(key)
        return self.folder / str(value) if isinstance(value, str) and value else None

    def depth_path(self, frame: NerfFrame) -> Path | None:
        """The frame's depth map (``DEPTH_KEYS``), or None."""
        return next((p for p in (self.path_of(frame, k) for k in DEPTH_KEYS) if p is not None), None)


def is_transforms_doc(doc) -> bool:
    """True if the JSON value ``doc`` looks like a transforms.json (frames with ``transform_matrix``)."""
    frames = doc.get("frames") if isinstance(doc, dict) else None
    return isinstance(frames, list) and bool(frames) and isinstance(frames[0], dict) and "transform_matrix" in frames[0]


def transform_to_w2c(matrix, convention: str) -> np.ndarray:
    """A camera-to-world ``transform_matrix`` (4, 4) or (3, 4) whose camera axes follow ``convention``
    ("opengl" or "opencv") -> (3, 4) float64 OpenCV world-to-camera (``R^T``, ``-R^T t`` of the
    OpenCV c2w; exact for a rigid transform)."""
    c2w = np.eye(4)
    c2w[:3] = np.asarray(matrix, np.float64)[:3]
    if convention == "opengl":
        c2w = c2w @ GL_TO_CV
    R, t = c2w[:3, :3], c2w[:3, 3]
    return np.concatenate([R.T, (-R.T @ t)[:, None]], axis=1)


def w2c_to_transform(w2c, convention: str) -> np.ndarray:
    """The inverse of ``transform_to_w2c``: (3, 4) OpenCV world-to-camera -> (4, 4) camera-to-world in
    the camera axes of ``convention``."""
    w2c = np.asarray(w2c, np.float64)
    R, t = w2c[:3, :3], w2c[:3, 3]
    c2w = np.eye(4)
    c2w[:3, :3], c2w[:3, 3] = R.T, -R.T @ t
    return c2w @ GL_TO_CV if convention == "opengl" else c2w


def _number(value, what: str) -> float | None:
    """``value`` as a float (None stays None); ConfigError naming ``what`` for anything else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a number, got {value!r}")
    return float(value)


def _lens(get, where: str) -> None:
    """Refuse what makes the frame's camera other than an undistorted pinhole (``lens.lens_problem``):
    a ``camera_model`` that is not a pinhole, a non-zero ``k*`` / ``p*`` or nerfstudio
    ``distortion_params`` entry, instant-ngp's ``ftheta_p*``, ``is_fisheye``, ``latlong`` or
    ``equirectangular`` (the frame's keys override the file's)."""
    coefficients = {k: _number(get(k), k) for k in (*DISTORTION_KEYS, *FTHETA_KEYS)}
    if get("distortion_params") is not None:
        coefficients.update(distortion_list(get("distortion_params"), where))
    flags = {k: get(k) for k in LENS_FLAGS}
    problem = lens_problem(model=get("camera_model"), coefficients=coefficients, flags=flags)
    if problem:
        raise ValueError(f"{where}: {problem}")


def _size(value, key: str) -> int:
    """An image side ``w`` / ``h`` in pixels (0 = not given): a whole number from 1 to ``MAX_FRAME_SIDE``."""
    value = _number(value, key)
    if value is None:
        return 0
    if not (math.isfinite(value) and value == int(value) and 1 <= value <= MAX_FRAME_SIDE):
        raise ValueError(f"{key} must be a whole number of pixels from 1 to {MAX_FRAME_SIDE}, got {value:g}")
    return int(value)


def _positive(doc: dict, key: str) -> float | None:
    """``doc[key]`` as a positive finite number, None when absent; ValueError otherwise."""
    value = _number(doc.get(key), key)
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{key} must be a positive number, got {value:g}")
    return value


def _intrinsics(get, where: str, shift: float = PIXEL_SHIFT) -> tuple[np.ndarray, int, int]:
    """(K (3, 3) OpenCV, width, height) from the keys ``get(key)`` finds (module docstring); ``shift``:
    the file's principal point minus OpenCV's (``PIXEL_SHIFT``, ``WAI_PIXEL_SHIFT``)."""
    w, h = (_size(get(k), k) for k in ("w", "h"))
    fx, fy, cx, cy = (_number(get(k), k) for k in ("fl_x", "fl_y", "cx", "cy"))
    angle_x, angle_y = (_number(get(k), k) for k in ("camera_angle_x", "camera_angle_y"))
    for name, angle in (("camera_angle_x", angle_x), ("camera_angle_y", angle_y)):
        if angle is not None and not 0 < angle < math.pi:
            raise ValueError(f"{where}: {name} must be a field of view in radians between 0 and pi, got {angle:g}")
    for name, value in (("fl_x", fx), ("fl_y", fy), ("cx", cx), ("cy", cy)):
        if value is not None and not math.isfinite(value):
            raise ValueError(f"{where}: {name} must be a finite number, got {value:g}")
    if fx is None and angle_x is not None and w:
        fx = 0.5 * w / math.tan(0.5 * angle_x)
    if fy is None and angle_y is not None and h:
        fy = 0.5 * h / math.tan(0.5 * angle_y)
    fy = fx if fy is None else fy
    cx = w / 2 if cx is None and w else cx
    cy = h / 2 if cy is None and h else cy
    if fx is None or cx is None or cy is None:
        raise ValueError(f"{where}: no complete intrinsics (give fl_x, fl_y, cx, cy, w, h, or camera_angle_x "
                         "with w and h)")
    K = np.array([[fx, 0.0, cx - shift], [0.0, fy, cy - shift], [0.0, 0.0, 1.0]])
    return K, w, h


def _frame_name(entry: dict, where: str) -> str:
    """The frame's ``file_path`` as a '/'-separated name without a leading ``./``, repeated ``/`` or
    ``/./`` (so ``images//x.png`` and ``images/x.png`` are one name, caught when listed twice)."""
    name = entry.get("file_path")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f'{where} needs "file_path" (the image, relative to the file\'s folder)')
    name = re.sub(r"/+", "/", name.replace("\\", "/"))  # images//x.png is images/x.png
    while name.startswith("./"):
        name = name[2:]
    while "/./" in name:
        name = name.replace("/./", "/")
    return name


def _pose(entry: dict, convention: str, where: str) -> np.ndarray:
    """(3, 4) OpenCV w2c of a frame's ``transform_matrix``, which must be a finite rigid c2w."""
    try:
        c2w = np.asarray(entry.get("transform_matrix"), dtype=np.float64)
    except (TypeError, ValueError):
        c2w = np.zeros(0)
    if c2w.shape not in ((4, 4), (3, 4)) or not np.isfinite(c2w).all():
        raise ValueError(f"{where}: transform_matrix must be a finite 4x4 (or 3x4) camera-to-world matrix")
    if c2w.shape == (4, 4) and np.abs(c2w[3] - [0, 0, 0, 1]).max() > 1e-6:
        raise ValueError(f"{where}: transform_matrix's last row is {c2w[3].tolist()}, not [0, 0, 0, 1] "
                         "(it must be a rigid camera-to-world transform)")
    if rotation_problems(c2w[None]):
        raise ValueError(f"{where}: transform_matrix is not a rigid transform (its rotation is not orthonormal with "
                         "det +1: a scaled or mirrored pose?)")
    return transform_to_w2c(c2w, convention)


def _convention(doc: dict, default: str) -> str:
    """The camera axes of the file's matrices: its ``camera_convention``, else ``default``."""
    value = doc.get("camera_convention", default)
    if not isinstance(value, str) or value.lower() not in CONVENTIONS:
        raise ValueError(f"camera_convention {value!r} is not one of {', '.join(CONVENTIONS)}")
    return value.lower()


def _parse_frame(doc: dict, entry, i: int, convention: str, shift: float) -> NerfFrame:
    """One entry of ``frames`` -> ``NerfFrame`` (the frame's keys override the file's)."""
    where = f"frames[{i}]"
    if not isinstance(entry, dict):
        raise ValueError(f"{where} is not an object")
    name = _frame_name(entry, where)
    where = f"frames[{i}] ({name})"

    def get(key):
        return entry.get(key, doc.get(key))

    _lens(get, where)
    K, w, h = _intrinsics(get, where, shift)
    return NerfFrame(name, K, _pose(entry, convention, where), w, h, entry)


def is_wai_doc(doc) -> bool:
    """True for a WAI ``scene_meta.json`` (it has WAI's ``frame_modalities`` or ``scene_modalities``),
    whose principal point follows MapAnything's loader (``WAI_PIXEL_SHIFT``), not nerfstudio's."""
    return isinstance(doc, dict) and ("frame_modalities" in doc or "scene_modalities" in doc)


def parse_transforms(doc, source, default_convention: str = "opengl") -> NerfScene:
    """Parse a transforms.json / scene_meta.json value ``doc`` read from the file ``source``.

    default_convention: the camera axes of the matrices when the file has no ``camera_convention``
    ("opengl": nerfstudio and instant-ngp; WAI files state theirs). The principal point is shifted
    by ``PIXEL_SHIFT``, or by ``WAI_PIXEL_SHIFT`` (none) in a WAI file (``is_wai_doc``). Raises ConfigError with one line
    ``SOURCE: what is wrong`` (no frames, a frame without file_path / transform_matrix, a non-rigid
    or non-finite matrix, missing intrinsics, distortion, a fisheye model, a name listed twice).
    """
    try:
        if not isinstance(doc, dict) or not isinstance(doc.get("frames"), list) or not doc["frames"]:
            raise ValueError('expected {"frames": [{"file_path", "transform_matrix", ...}, ...]} with at least '
                             'one frame')
        convention = _convention(doc, default_convention)
        shift = WAI_PIXEL_SHIFT if is_wai_doc(doc) else PIXEL_SHIFT
        frames = [_parse_frame(doc, entry, i, convention, shift) for i, entry in enumerate(doc["frames"])]
        scale, unit = (_positive(doc, key) for key in ("integer_depth_scale", "depth_unit_scale_factor"))
    except ValueError as err:
        raise ConfigError(f"{source}: {err}") from err
    names = [f.name for f in frames]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise ConfigError(f"{source}: file_path {twice!r} appears twice")
    meta = {k: v for k, v in doc.items() if k != "frames"}
    return NerfScene(frames, convention, scale, Path(source).parent, meta, unit)


def read_transforms(path: str | os.PathLike, default_convention: str = "opengl") -> NerfScene:
    """Read and parse a transforms.json (or WAI scene_meta.json) file: ``parse_transforms``."""
    path = Path(path)
    try:
        doc = read_json(path)
    except (OSError, ValueError) as err:
        raise ConfigError(f"{path}: cannot read it as JSON ({err})") from None
    return parse_transforms(doc, path, default_convention)


def write_transforms_json(path: str | os.PathLike, cameras, *, convention: str = "opengl",
                          fields: dict | None = None, frame_fields: list | None = None) -> Path:
    """Write cameras as a transforms.json (the inverse of ``parse_transforms``), atomically.

    cameras: objects with ``name``, ``K`` (3, 3 OpenCV), ``w2c`` (3, 4 OpenCV world-to-camera),
    ``width``, ``height`` (``depthpe.scenes.cameras.FrameCamera``); each frame gets its own intrinsics
    (principal point shifted by +``PIXEL_SHIFT``, none in a WAI file: ``fields`` with WAI's
    ``frame_modalities``) and ``transform_matrix`` (camera-to-world in the camera axes of
    ``convention``). fields: extra top-level keys (e.g. ``camera_convention``,
    ``integer_depth_scale``); frame_fields: one dict of extra keys per frame (e.g. ``depth_file_path``).
    """
    shift = WAI_PIXEL_SHIFT if is_wai_doc(fields) else PIXEL_SHIFT
    frames = []
    for i, cam in enumerate(cameras):
        K = np.asarray(cam.K, np.float64)
        frame = {"file_path": cam.name, "transform_matrix": w2c_to_transform(cam.w2c, convention).tolist(),
                 "fl_x": float(K[0, 0]), "fl_y": float(K[1, 1]),
                 "cx": float(K[0, 2]) + shift, "cy": float(K[1, 2]) + shift,
                 "w": int(cam.width), "h": int(cam.height)}
        frame.update(frame_fields[i] if frame_fields else {})
        frames.append(frame)
    doc = {**(fields or {}), "frames": frames}
    return atomic_write_bytes(path, json.dumps(doc, indent=1).encode())
