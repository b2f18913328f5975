"""Camera readers and writers for user data: COLMAP reconstructions, a simple JSON file, scene files.

Every reader returns ``{image name: FrameCamera}`` in depthpe's conventions (docs/conventions.md):

* ``K``: (3, 3) float64 pixel intrinsics, OpenCV (pixel centres at integer coordinates, zero skew);
* ``w2c``: (3, 4) float64 OpenCV world-to-camera, ``x_cam = R @ x_world + t`` (x right, y down, z forward);
* ``width``, ``height``: the image size K refers to, in pixels (0 = not given by the source; the size of
  the image it is used with is then assumed).

Sources (``read_cameras`` dispatches on the path):

* **COLMAP** (a folder: ``sparse/0``, ``sparse``, or any folder holding ``cameras`` + ``images`` as
  ``.bin`` or ``.txt``). Read with ``pycolmap`` (``pip install depthpe[colmap]``) when installed;
  without it the text format is read by the small parser below (so that text models, e.g. the test
  fixtures, work in a minimal install) and the binary format asks for pycolmap. COLMAP's image
  quaternion ``qvec = (w, x, y, z)`` and ``tvec`` are already world-to-camera in OpenCV axes; its
  pixel coordinates put the centre of the top-left pixel at (0.5, 0.5), so the principal point is
  shifted by -0.5 to OpenCV integer pixel centres (and by +0.5 when writing). Camera models
  PINHOLE, SIMPLE_PINHOLE, SIMPLE_RADIAL, RADIAL and OPENCV give K; a non-zero distortion
  parameter is refused with the undistort hint (``depthpe.scenes.lens``, the one lens check of every
  reader; undistort first, e.g. ``colmap image_undistorter``); any other model (fisheye, ...) is refused.
* **JSON** (``*.json``): ``{"frames": [{"file": "img.jpg", "K": [[fx,0,cx],[0,fy,cy],[0,0,1]],
  "w2c": 3x4 or 4x4, "width": W, "height": H}]}``; ``width``/``height`` are optional.
* **transforms.json** (``*.json`` whose frames have a ``transform_matrix``: nerfstudio, instant-ngp,
  or a WAI ``scene_meta.json``): parsed by ``depthpe.scenes.transforms_json`` (camera-to-world in
  OpenGL axes unless ``camera_convention`` says ``opencv``; half-pixel principal point; distortion
  and fisheye models refused), keyed by ``file_path``; every camera passes ``check_camera``.
* **Scene file** (``*.h5``): the frames of a depthpe scene file, named by its ``frame_names`` (or
  ``frame_00000``, ... when it has none).

Malformed sources raise ``depthpe.config.ConfigError`` with a one-line message naming the file.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import ConfigError
from ..files import read_json
from .format.limits import homogeneous_row_problems, rotation_problems
from .format.scene_file import SceneFileError, SceneReader
from .lens import lens_problem
from .transforms_json import NerfScene, is_transforms_doc, parse_transforms

__all__ = [
    "read_scene_cameras",
    "FrameCamera",
    "read_cameras",
    "read_colmap",
    "read_json_cameras",
    "transforms_cameras",
    "check_camera",
    "write_json_cameras",
    "write_colmap_text",
    "find_camera",
    "match_cameras",
    "fit_camera",
    "COLMAP_PIXEL_SHIFT",
]

#: COLMAP principal point minus OpenCV principal point (COLMAP: top-left pixel centre at 0.5).
COLMAP_PIXEL_SHIFT = 0.5

# COLMAP model name -> (indices of fx, fy, cx, cy in params; number of params); fx == fy for one focal.
_COLMAP_MODELS = {
    "SIMPLE_PINHOLE": ((0, 0, 1, 2), 3),
    "PINHOLE": ((0, 1, 2, 3), 4),
    "SIMPLE_RADIAL": ((0, 0, 1, 2), 4),
    "RADIAL": ((0, 0, 1, 2), 5),
    "OPENCV": ((0, 1, 2, 3), 8),
}
# COLMAP model name -> the names of its distortion parameters (after fx, fy, cx, cy).
_COLMAP_DISTORTION = {"SIMPLE_PINHOLE": (), "PINHOLE": (), "SIMPLE_RADIAL": ("k1",), "RADIAL": ("k1", "k2"),
                      "OPENCV": ("k1", "k2", "p1", "p2")}


@dataclass
class FrameCamera:
    """One image's camera. K: (3, 3) float64 OpenCV pixel intrinsics of a ``width`` x ``height`` image;
    w2c: (3, 4) float64 OpenCV world-to-camera (a 4x4 must end in [0, 0, 0, 1] and is cut to 3x4); width/height 0 = unknown."""

    name: str
    K: np.ndarray
    w2c: np.ndarray
    width: int = 0
    height: int = 0

    def __post_init__(self) -> None:
        self.K = np.asarray(self.K, dtype=np.float64)
        self.w2c = np.asarray(self.w2c, dtype=np.float64)
        if self.K.shape != (3, 3) or self.w2c.shape not in ((3, 4), (4, 4)):
            raise ValueError(f"camera {self.name!r}: K must be 3x3 and w2c 3x4 or 4x4, "
                             f"got {self.K.shape} and {self.w2c.shape}")
        if self.w2c.shape == (4, 4) and np.isfinite(self.w2c).all():
            problems = homogeneous_row_problems(self.w2c[None])
            if problems:
                raise ValueError(f"camera {self.name!r}: {problems[0].replace(' in 1 frame(s), first frame 0', '')}")
        self.w2c = self.w2c[:3].copy()
        self.width, self.height = int(self.width), int(self.height)


def _problem(source, message: str) -> ConfigError:
    return ConfigError(f"{source}: {message}")


def check_camera(cam: FrameCamera, source) -> FrameCamera:
    """Raise ConfigError when a camera cannot be right: non-finite values, focal length <= 0, K's last
    row not [0, 0, 1], a skewed K (``lens.lens_problem``), or a rotation that is not orthonormal with det +1 (tolerance 1e-3)."""
    where = f"camera {cam.name!r}"
    if not (np.isfinite(cam.K).all() and np.isfinite(cam.w2c).all()):
        raise _problem(source, f"{where} has NaN or inf values")
    if cam.K[0, 0] <= 0 or cam.K[1, 1] <= 0:
        raise _problem(source, f"{where} has a non-positive focal length (fx={cam.K[0, 0]:g}, fy={cam.K[1, 1]:g})")
    if np.abs(cam.K[2] - [0, 0, 1]).max() > 1e-6:
        raise _problem(source, f"{where}: K's last row is {cam.K[2].tolist()}, expected [0, 0, 1]")
    problem = lens_problem(K=cam.K)
    if problem:
        raise _problem(source, f"{where}: {problem}")
    if rotation_problems(cam.w2c[None]):
        raise _problem(source, f"{where}: the rotation of w2c is not orthonormal with det +1 "
                               "(is it a c2w, or scaled?)")
    return cam


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


def read_cameras(source: str | os.PathLike) -> dict[str, FrameCamera]:
    """Cameras of a COLMAP folder, a JSON file or a scene file (see the module docstring), keyed by
    image name (COLMAP's image name, the JSON ``file``, the scene file's frame name); ConfigError with
    one line if the source is unusable."""
    path = Path(source)
    if not path.exists():
        raise ConfigError(f"camera source {path} does not exist (pass a COLMAP folder, a .json or a .h5 file)")
    if path.is_dir():
        return read_colmap(path)
    suffix = path.suffix.lower()
    if suffix == ".json":
        return read_json_cameras(path)
    if suffix in (".h5", ".hdf5"):
        return read_scene_cameras(path)
    raise ConfigError(f"camera source {path}: unknown kind {suffix or '(no suffix)'!r} "
                      "(expected a COLMAP folder, a .json or a .h5 scene file)")


# -- COLMAP --------------------------------------------------------------------------------------

def _colmap_model_folder(folder: Path) -> tuple[Path, str]:
    """The folder holding the model and its format ("bin" or "txt"): ``folder`` itself,
    ``folder/sparse/0`` or ``folder/sparse``; bin wins when both are present."""
    for candidate in (folder, folder / "sparse" / "0", folder / "sparse"):
        for ext in ("bin", "txt"):
            if (candidate / f"cameras.{ext}").is_file() and (candidate / f"images.{ext}").is_file():
                return candidate, ext
    raise ConfigError(f"{folder}: not a COLMAP reconstruction (no cameras.bin/images.bin or "
                      "cameras.txt/images.txt here, in sparse/0 or in sparse)")


def _have_pycolmap() -> bool:
    try:
        import pycolmap  # noqa: F401
    except ImportError:
        return False
    return True


def read_colmap(folder: str | os.PathLike, *, use_pycolmap: bool | None = None) -> dict[str, FrameCamera]:
    """Cameras of the registered images of a COLMAP model, sorted by image name (see the module docstring for the folder
    layout, the camera models accepted and the half-pixel shift). ``use_pycolmap``: None = when
    installed; False = the built-in text parser (text models only)."""
    model, ext = _colmap_model_folder(Path(folder))
    if use_pycolmap is None:
        use_pycolmap = _have_pycolmap()
    if use_pycolmap:
        cams = _read_colmap_pycolmap(model)
    elif ext == "txt":
        cams = _read_colmap_text(model)
    else:
        raise ConfigError(f"{model}: reading a binary COLMAP model needs pycolmap "
                          "(pip install 'depthpe[colmap]', or export it as text with `colmap model_converter`)")
    if not cams:
        raise ConfigError(f"{model}: the COLMAP model has no registered images")
    return {name: check_camera(cams[name], model) for name in sorted(cams)}


def _colmap_K(model_name: str, params, width: int, height: int, where) -> np.ndarray:
    """OpenCV K (3, 3) of a COLMAP camera (principal point shifted by -0.5); refuses non-zero distortion
    parameters (``lens.lens_problem``, with the undistort hint) and models that are not listed."""
    if model_name not in _COLMAP_MODELS:
        raise ConfigError(f"{where}: COLMAP camera model {model_name} is not supported "
                          f"(supported: {', '.join(_COLMAP_MODELS)}; undistort the images first)")
    (ifx, ify, icx, icy), count = _COLMAP_MODELS[model_name]
    params = [float(p) for p in params]
    if len(params) != count:
        raise ConfigError(f"{where}: COLMAP {model_name} camera has {len(params)} parameters, expected {count}")
    distortion = dict(zip(_COLMAP_DISTORTION[model_name], map(float, params[4 if ifx != ify else 3:])))
    problem = lens_problem(model=model_name, coefficients=distortion)
    if problem:
        raise ConfigError(f"{where}: COLMAP {model_name} camera: {problem}")
    return np.array([[params[ifx], 0.0, params[icx] - COLMAP_PIXEL_SHIFT],
                     [0.0, params[ify], params[icy] - COLMAP_PIXEL_SHIFT],
                     [0.0, 0.0, 1.0]])


def _read_colmap_pycolmap(model: Path) -> dict[str, FrameCamera]:
    """Read a COLMAP model (bin or txt) with pycolmap (3.10 and later: ``cam_from_world`` is a
    property up to 3.11 and a method from 3.12)."""
    import pycolmap

    try:
        rec = pycolmap.Reconstruction(str(model))
    except Exception as err:  # noqa: BLE001 - pycolmap raises RuntimeError/ValueError on bad files
        raise ConfigError(f"{model}: pycolmap cannot read the COLMAP model ({str(err).splitlines()[0]})") from err
    cams: dict[str, FrameCamera] = {}
    for image in rec.images.values():
        if hasattr(image, "has_pose") and not image.has_pose:
            continue
        camera = rec.cameras[image.camera_id]
        pose = image.cam_from_world() if callable(image.cam_from_world) else image.cam_from_world
        K = _colmap_K(camera.model_name if hasattr(camera, "model_name") else camera.model.name,
                      camera.params, camera.width, camera.height, f"{model} camera {image.camera_id}")
        cams[image.name] = FrameCamera(image.name, K, np.asarray(pose.matrix()), camera.width, camera.height)
    return cams


def _data_lines(path: Path) -> list[str]:
    """Lines of a COLMAP text file without comments; blank lines are kept (images.txt has an empty
    points line for images without observations)."""
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if not line.startswith("#")]


def _read_colmap_text(model: Path) -> dict[str, FrameCamera]:
    """Built-in parser of COLMAP's text format (cameras.txt, images.txt), used when pycolmap is not
    installed. images.txt holds two lines per image; the second (2D points) is skipped."""
    cameras = {}
    for n, line in enumerate(_data_lines(model / "cameras.txt"), 1):
        fields = line.split()
        if not fields:
            continue
        try:
            cam_id, width, height = int(fields[0]), int(fields[2]), int(fields[3])
        except (ValueError, IndexError) as err:
            raise ConfigError(f"{model / 'cameras.txt'} line {n}: malformed camera ({err})") from err
        cameras[cam_id] = (fields[1], fields[4:], width, height, f"{model / 'cameras.txt'} line {n}")
    lines = [line for line in _data_lines(model / "images.txt")]
    while lines and not lines[-1].strip():
        lines.pop()
    frames: dict[str, FrameCamera] = {}
    for n in range(0, len(lines), 2):
        frames.update([_parse_image_line(lines[n], cameras, f"{model / 'images.txt'} image line {n // 2 + 1}")])
    return frames


def _parse_image_line(line: str, cameras: dict, where: str) -> tuple[str, FrameCamera]:
    """``IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME`` -> (name, FrameCamera)."""
    fields = line.split(maxsplit=9)
    try:
        qvec = np.array([float(x) for x in fields[1:5]])
        tvec = np.array([float(x) for x in fields[5:8]])
        cam_id, name = int(fields[8]), fields[9].strip()
    except (ValueError, IndexError) as err:
        raise ConfigError(f"{where}: malformed image line {line[:60]!r} ({err})") from err
    if cam_id not in cameras:
        raise ConfigError(f"{where}: image {name!r} refers to camera {cam_id}, which cameras.txt lacks")
    norm = np.linalg.norm(qvec)
    if not np.isfinite(norm) or norm < 1e-12:
        raise ConfigError(f"{where}: image {name!r} has an invalid quaternion {qvec.tolist()}")
    model_name, params, width, height, cam_where = cameras[cam_id]
    try:
        K = _colmap_K(model_name, params, width, height, cam_where)
    except ConfigError:
        raise
    except ValueError as err:
        raise ConfigError(f"{cam_where}: malformed camera ({err})") from err
    w2c = np.concatenate([quaternion_to_rotation(qvec / norm), tvec[:, None]], axis=1)
    return name, FrameCamera(name, K, w2c, width, height)


def quaternion_to_rotation(q: np.ndarray) -> np.ndarray:
    """(3, 3) rotation of a unit quaternion ``q = (w, x, y, z)`` (Hamilton, COLMAP's order)."""
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def rotation_to_quaternion(R: np.ndarray) -> np.ndarray:
    """Unit quaternion ``(w, x, y, z)`` with w >= 0 of a (3, 3) rotation (largest-pivot method)."""
    R = np.asarray(R, dtype=np.float64)
    trace = R[0, 0] + R[1, 1] + R[2, 2]
    if trace > 0:
        s = 2.0 * math.sqrt(trace + 1.0)
        q = [0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(max(1.0 + R[i, i] - R[j, j] - R[k, k], 1e-300))
        q = [0.0] * 4
        q[0] = (R[k, j] - R[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (R[j, i] + R[i, j]) / s
        q[1 + k] = (R[k, i] + R[i, k]) / s
    q = np.array(q)
    q /= np.linalg.norm(q)
    return -q if q[0] < 0 else q


# -- JSON and scene files ------------------------------------------------------------------------

def read_json_cameras(path: str | os.PathLike) -> dict[str, FrameCamera]:
    """Cameras of a JSON file ``{"frames": [{"file", "K", "w2c", "width"?, "height"?}]}``, or of a
    transforms.json (frames with ``transform_matrix``: ``transforms_cameras``) (module docstring)."""
    path = Path(path)
    try:
        data = read_json(path)
    except (OSError, ValueError) as err:
        raise ConfigError(f"{path}: cannot read the cameras JSON ({err})") from None
    if is_transforms_doc(data):
        return transforms_cameras(parse_transforms(data, path), path)
    frames = data.get("frames") if isinstance(data, dict) else None
    if not isinstance(frames, list) or not frames:
        raise ConfigError(f'{path}: expected {{"frames": [{{"file", "K", "w2c"}}, ...]}} with at least one frame')
    cams: dict[str, FrameCamera] = {}
    for i, frame in enumerate(frames):
        where = f"frames[{i}]"
        if not isinstance(frame, dict) or not {"file", "K", "w2c"} <= set(frame):
            raise _problem(path, f'{where} needs "file", "K" and "w2c"')
        try:
            cam = FrameCamera(str(frame["file"]), np.array(frame["K"], dtype=np.float64),
                              np.array(frame["w2c"], dtype=np.float64),
                              int(frame.get("width", 0)), int(frame.get("height", 0)))
        except (ValueError, TypeError) as err:
            raise _problem(path, f"{where}: {err}") from err
        if cam.name in cams:
            raise _problem(path, f"{where}: file {cam.name!r} appears twice")
        cams[cam.name] = check_camera(cam, path)
    return cams


def transforms_cameras(scene: NerfScene, source) -> dict[str, FrameCamera]:
    """The cameras of a parsed transforms.json / WAI scene_meta.json (``transforms_json.NerfScene``),
    keyed by ``file_path``, each checked (``check_camera``: a rigid w2c, a valid K); ConfigError naming
    ``source`` otherwise."""
    return {f.name: check_camera(FrameCamera(f.name, f.K, f.w2c, f.width, f.height), source) for f in scene.frames}


def write_json_cameras(path: str | os.PathLike, cameras) -> Path:
    """Write cameras (a dict name -> FrameCamera, or an iterable of FrameCamera) as the JSON format
    that ``read_json_cameras`` reads; width/height are written when known (non-zero)."""
    frames = []
    for cam in _camera_list(cameras):
        frame = {"file": cam.name, "K": cam.K.tolist(), "w2c": cam.w2c.tolist()}
        if cam.width and cam.height:
            frame.update(width=cam.width, height=cam.height)
        frames.append(frame)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"frames": frames}, indent=1), encoding="utf-8")
    return path


def write_colmap_text(folder: str | os.PathLike, cameras) -> Path:
    """Write a minimal COLMAP text model (cameras.txt with one PINHOLE camera per image, images.txt
    with empty 2D-point lines, an empty points3D.txt) into ``folder``. K gets the +0.5 principal
    point shift of COLMAP; every camera needs its width and height."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cam_lines = ["# CAMERA_ID MODEL WIDTH HEIGHT PARAMS[]"]
    image_lines = ["# IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME"]
    for i, cam in enumerate(_camera_list(cameras), 1):
        if not (cam.width and cam.height):
            raise ValueError(f"camera {cam.name!r}: COLMAP needs the image width and height")
        fx, fy, cx, cy = (float(v) for v in (cam.K[0, 0], cam.K[1, 1], cam.K[0, 2], cam.K[1, 2]))
        cam_lines.append(f"{i} PINHOLE {cam.width} {cam.height} {fx!r} {fy!r} "
                         f"{cx + COLMAP_PIXEL_SHIFT!r} {cy + COLMAP_PIXEL_SHIFT!r}")
        q = rotation_to_quaternion(cam.w2c[:, :3])
        t = cam.w2c[:, 3]
        image_lines += [" ".join([str(i)] + [repr(float(x)) for x in (*q, *t)] + [str(i), cam.name]), ""]
    (folder / "cameras.txt").write_text("\n".join(cam_lines) + "\n", encoding="utf-8")
    (folder / "images.txt").write_text("\n".join(image_lines) + "\n", encoding="utf-8")
    (folder / "points3D.txt").write_text("# POINT3D_ID X Y Z R G B ERROR TRACK[]\n", encoding="utf-8")
    return folder


def _camera_list(cameras) -> list[FrameCamera]:
    return list(cameras.values()) if isinstance(cameras, dict) else list(cameras)


def _path_parts(name: str) -> tuple[str, ...]:
    """A '/'- or '\\'-separated image name as its path components."""
    return tuple(part for part in name.replace("\\", "/").split("/") if part)


def _shared_tail(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """How many trailing path components ``a`` and ``b`` share (``a/img.png``, ``x/a/img.png``: 2)."""
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def _best_camera(name: str, parts: tuple[str, ...], candidates: list) -> tuple[int, str] | None:
    """(shared trailing components, key) of the candidate ``(key parts, key)`` closest to the image
    path ``parts``, or None without candidates; ConfigError when two are equally close."""
    scored = sorted(((_shared_tail(key_parts, parts), key) for key_parts, key in candidates), reverse=True)
    if len(scored) > 1 and scored[0][0] == scored[1][0]:
        raise ConfigError(f"image {name!r} matches the cameras {scored[1][1]!r} and {scored[0][1]!r} of the camera "
                          "source equally; name each image in the cameras file by its path relative to the "
                          "images folder")
    return scored[0] if scored else None


def match_cameras(cameras: dict[str, FrameCamera], names) -> dict[str, FrameCamera | None]:
    """The camera of every image -> ``{name: FrameCamera or None}`` (None: no camera).

    names: the images' paths relative to the images folder, '/'-separated. A camera named with the
    image's path matches first, then a camera named without a file extension with the image's path
    without its extension (``frame_00000`` for ``frame_00000.png``). Otherwise, among the cameras left with the same file name, the one
    sharing the most trailing path components with the image (``images/a/img.png`` or a bare
    ``img.png`` for ``a/img.png``), when it is the closest for no other image as well. Raises
    ConfigError (one line naming both files) for an ambiguous match: a camera ``img.png`` and two
    images ``a/img.png`` and ``b/img.png``, or two cameras ``x/img.png``, ``y/img.png`` and an
    image ``img.png``.
    """
    parts = {name: _path_parts(name) for name in names}
    exact = {_path_parts(key): key for key in cameras}
    out = {name: cameras[exact[p]] for name, p in parts.items() if p in exact}
    out.update(_stem_matches(cameras, parts, out))
    matched = {parts[name] for name in out}
    by_file: dict[str, list] = {}
    for key_parts, key in exact.items():
        if key_parts and key_parts not in matched:
            by_file.setdefault(key_parts[-1], []).append((key_parts, key))
    claims: dict[str, list[tuple[int, str]]] = {}
    for name in (n for n in parts if n not in out):
        best = _best_camera(name, parts[name], by_file.get(parts[name][-1] if parts[name] else "", []))
        if best is not None:
            claims.setdefault(best[1], []).append((best[0], name))
    for key, claimants in claims.items():
        claimants.sort(key=lambda c: -c[0])
        if len(claimants) > 1 and claimants[0][0] == claimants[1][0]:
            first, second = claimants[0][1], claimants[1][1]
            raise ConfigError(f"images {first!r} and {second!r} both match the camera {key!r} of the camera source; "
                              "name each image in the cameras file by its path relative to the images folder "
                              f"(e.g. {first!r})")
        out[claimants[0][1]] = cameras[key]
    return {name: out.get(name) for name in parts}


def _stem_matches(cameras: dict[str, FrameCamera], parts: dict[str, tuple[str, ...]], matched: dict) -> dict:
    """Images matched by their path without the file extension to a camera named without one (the
    frames of a scene file without ``frame_names`` are ``frame_00000``, ...; their exported images
    ``frame_00000.png``). Only cameras whose last component has no ``.`` and that no image matched
    exactly take part."""
    used = {id(cam) for cam in matched.values()}
    bare = {_path_parts(key): cam for key, cam in cameras.items()
            if _path_parts(key) and "." not in _path_parts(key)[-1] and id(cam) not in used}
    out = {}
    for name, p in parts.items():
        if name not in matched and p and "." in p[-1]:
            cam = bare.get(p[:-1] + (p[-1].rsplit(".", 1)[0],))
            if cam is not None:
                out[name] = cam
    return out


def find_camera(cameras: dict[str, FrameCamera], name: str) -> FrameCamera | None:
    """The camera of the single image ``name`` (a path relative to the images folder, '/'-separated):
    the exact name, else the one camera with the same file name closest to its path
    (``match_cameras``), else None (also when two are equally close). For a set of images use
    ``match_cameras``, which also refuses one camera matching two images."""
    try:
        return match_cameras(cameras, [name])[name]
    except ConfigError:
        return None


def fit_camera(cam: FrameCamera, name: str, height: int, width: int) -> tuple[FrameCamera, str | None]:
    """The camera of image ``name`` whose stored pixel grid is ``height`` x ``width`` -> (camera, note).

    A camera without a size, or of that size, is returned as is (note None). A camera calibrated at
    another resolution of the same aspect ratio (within 1 %, e.g. COLMAP run on downscaled copies)
    gets K rescaled (``geometry.resize_intrinsics``) and the size of the image, with a note. Another
    aspect ratio is a ConfigError naming the image, both sizes and what to do (K is never rescaled
    anisotropically: a rotated or cropped image needs its own camera).
    """
    if not (cam.width and cam.height) or (cam.width, cam.height) == (width, height):
        return cam, None
    sx, sy = width / cam.width, height / cam.height
    if abs(sx / sy - 1) > 0.01:
        swapped = abs((height / cam.width) / (width / cam.height) - 1) <= 0.01
        hint = (" (width and height swapped: images are read in their stored pixel grid and EXIF "
                "orientation is ignored, so the camera must describe that grid)") if swapped else ""
        raise ConfigError(f"image {name!r} is {width}x{height} (WxH) but its camera is for {cam.width}x{cam.height}, "
                          f"another aspect ratio{hint}: give the camera of the image as stored (a cropped or "
                          "rotated image needs its own K)")
    import torch

    from ..geometry import resize_intrinsics

    K = resize_intrinsics(torch.from_numpy(cam.K), sx, sy).numpy()
    note = f"{name}: K rescaled from {cam.width}x{cam.height} to the image's {width}x{height}"
    return FrameCamera(cam.name, K, cam.w2c, width, height), note
