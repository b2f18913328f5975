"""RMVD sample lists as JSON, and their strict loader.

A sample list is one JSON file::

    {"dataset": "kitti",
     "samples": [{"name": "2011_09_26_0002_key5",
                  "keyview": 0,
                  "depth": "gt/0002_key5.npy",
                  "views": [{"image": "img/0002_5.png", "K": [[fx,0,cx],[0,fy,cy],[0,0,1]],
                             "pose": [[r11,r12,r13,tx],[r21,r22,r23,ty],[r31,r32,r33,tz],[0,0,0,1]]},
                            ...]}]}

Paths are relative to the JSON file's folder (absolute paths are kept). ``K`` is in pixels of the
view's image. ``depth`` is the keyview's ground-truth depth, a float ``.npy`` of shape (H, W) in
metres, 0 = no ground truth.

Native layouts (optional keys, docs/rmvd.md): a list-level ``"format"`` (``DEPTH_FORMATS``: ``npy``,
the default, or ``kitti``, ``scannet``, ``eth3d``, ``dtu``, ``tanks_and_temples``) says how
``depth`` is encoded (read by ``depthpe.rmvd.datasets``); a list-level ``"root"`` is the folder the
paths are relative to (itself relative to the JSON's folder), ``null`` when it must be given as
``--data-root DATASET=DIR`` (the shipped official lists), which also overrides any ``"root"``. A
view's ``"image_size": [H, W]`` says K is in pixels of the image resized to H x W (ScanNet); a
sample's ``"depth_range": [min, max]`` (metres) is the reference's depth range (DTU). Other keys
(``"source"``: where a list came from) are ignored. ``official:NAME`` / ``official:all`` in place
of a path are the shipped lists (``depthpe.rmvd.official``).

Pose convention (RMVD's ``view_to_key`` transform): ``pose`` maps keyview camera coordinates into
the view's camera coordinates, ``p_view = pose @ p_key`` (metres, OpenCV axes: x right, y down,
z forward). The keyview's own pose is therefore the identity. With the keyview's camera frame as
the world frame this is exactly depthpe's world-to-camera ``w2c`` (docs/conventions.md):
``w2c_i = pose_i`` and view 0 normalization (``w2c_i @ inv(w2c_key)``) leaves it unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import ConfigError
from ..files import read_json
from ..scenes.format.limits import MAX_FRAME_SIDE
from ..scenes.lens import lens_problem
from .datasets import DEPTH_FORMATS
from .official import is_official, official_list_paths

__all__ = ["RmvdView", "RmvdSample", "SampleList", "parse_data_roots", "load_sample_list", "load_sample_lists"]

_POSE_TOL = 1e-4  # keyview pose vs identity, last row vs [0, 0, 0, 1]


@dataclass(frozen=True)
class RmvdView:
    """One view: ``image`` path, ``K`` (3, 3) float64 pixels, ``pose`` (4, 4) float64 view_to_key
    (``p_view = pose @ p_key``, = depthpe ``w2c`` with the keyview as world); ``image_size``
    (H, W): the size K is given for, the image to be resized to it (None: the file's own size)."""

    image: Path
    K: np.ndarray
    pose: np.ndarray
    image_size: tuple[int, int] | None = None


@dataclass(frozen=True)
class RmvdSample:
    """One benchmark sample: ``name`` (unique in its list), ``keyview`` (index into ``views``),
    ``views`` and the keyview's GT ``depth`` path (``.npy`` (H, W), metres, 0 = invalid, or a
    native file of ``depth_format``: ``depthpe.rmvd.datasets``); ``depth_range`` (min, max) metres
    where the list gives one."""

    name: str
    keyview: int
    views: tuple[RmvdView, ...]
    depth: Path
    depth_format: str = "npy"
    depth_range: tuple[float, float] | None = None

    @property
    def source_indices(self) -> list[int]:
        """The indices of every view but the keyview, in list order."""
        return [i for i in range(len(self.views)) if i != self.keyview]


@dataclass(frozen=True)
class SampleList:
    """The samples of one dataset (``dataset``: its name, e.g. ``kitti``), the file read, the
    encoding of its GT depth (``format``) and the folder its paths are relative to (``root``)."""

    dataset: str
    samples: tuple[RmvdSample, ...]
    path: Path
    format: str = "npy"
    root: Path | None = None


def _field(entry: dict, key: str, kind, where: str):
    """``entry[key]`` if present and of type ``kind``, else a one-line ConfigError."""
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be a JSON object, got {type(entry).__name__}")
    if key not in entry:
        raise ConfigError(f"{where} has no '{key}' (see docs/rmvd.md for the sample-list schema)")
    value = entry[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ConfigError(f"{where}: '{key}' must be {getattr(kind, '__name__', kind)}, got {value!r:.60}")
    return value


def _optional(entry: dict, key: str, kind, where: str):
    """``entry[key]`` when present (checked like ``_field``), else None."""
    return _field(entry, key, kind, where) if key in entry else None


def _matrix(value, shape: tuple[int, int], where: str) -> np.ndarray:
    """``value`` as a finite float64 array of ``shape``, else a one-line ConfigError."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"{where} must be a {shape[0]}x{shape[1]} list of numbers") from None
    if arr.shape != shape:
        raise ConfigError(f"{where} must be {shape[0]}x{shape[1]}, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ConfigError(f"{where} has a NaN or infinite entry")
    return arr


def _intrinsics(value, where: str) -> np.ndarray:
    """A pinhole K in pixels: positive focal lengths, zero skew terms (``depthpe.scenes.lens``, the lens
    check every camera reader shares: a skew K[0][1] is refused with the undistort hint), last row [0, 0, 1]."""
    K = _matrix(value, (3, 3), where)
    problem = lens_problem(K=K)
    if problem and K[0, 1]:
        raise ConfigError(f"{where}: {problem}")
    if not (K[0, 0] > 0 and K[1, 1] > 0) or K[1, 0] or K[2, 0] or K[2, 1] or K[2, 2] != 1:
        raise ConfigError(f"{where} must be [[fx,0,cx],[0,fy,cy],[0,0,1]] with fx, fy > 0 (pixels)")
    return K


_LAST_ROW, _EYE3, _EYE4 = np.array([0.0, 0.0, 0.0, 1.0]), np.eye(3), np.eye(4)


def _near(a: np.ndarray, b: np.ndarray, tol: float) -> bool:
    """Every element of ``a`` within ``tol`` of ``b`` (np.allclose is slow on thousands of small
    matrices, and the official lists have about 7000 views)."""
    return float(np.max(np.abs(a - b))) <= tol


def _pose(value, where: str) -> np.ndarray:
    """A rigid 4x4 view_to_key transform: rotation block orthonormal with det +1, last row [0,0,0,1]."""
    T = _matrix(value, (4, 4), where)
    R = T[:3, :3]
    if not _near(T[3], _LAST_ROW, _POSE_TOL) or not _near(R @ R.T, _EYE3, 1e-3) \
            or np.linalg.det(R) < 0:
        raise ConfigError(f"{where} must be a rigid transform [[R, t], [0, 0, 0, 1]] with R a rotation")
    return T


def _image_size(value, where: str) -> tuple[int, int] | None:
    """An optional ``[H, W]`` of positive integers (pixels)."""
    if value is None:
        return None
    if len(value) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_FRAME_SIDE
                                  for v in value):
        raise ConfigError(f"{where}: 'image_size' must be [height, width] in pixels (integers from 1 to "
                          f"{MAX_FRAME_SIDE}, the scene format's largest side), got {value!r:.60}")
    return int(value[0]), int(value[1])


def _depth_range(value, where: str) -> tuple[float, float] | None:
    """An optional ``[min, max]`` in metres with 0 < min < max."""
    if value is None:
        return None
    numbers = len(value) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    lo, hi = value if numbers else (0, 0)
    if not (numbers and 0 < lo < hi < float("inf")):
        raise ConfigError(f"{where}: 'depth_range' must be [min, max] metres with 0 < min < max, got {value!r:.60}")
    return float(lo), float(hi)


def _view(entry, base: Path, where: str) -> RmvdView:
    image = _field(entry, "image", str, where)
    return RmvdView(base / image, _intrinsics(_field(entry, "K", list, where), f"{where}.K"),
                    _pose(_field(entry, "pose", list, where), f"{where}.pose"),
                    _image_size(_optional(entry, "image_size", list, where), where))


def _sample(entry, base: Path, fmt: str, where: str) -> RmvdSample:
    """One sample entry; the keyview must index a view and carry the identity pose."""
    name = _field(entry, "name", str, where)
    if not name:
        raise ConfigError(f"{where}: 'name' is empty (give each sample a unique name)")
    views = _field(entry, "views", list, where)
    if not views:
        raise ConfigError(f"{where} ({name}): 'views' is empty (the keyview and its source views)")
    keyview = _field(entry, "keyview", int, where)
    if not 0 <= keyview < len(views):
        raise ConfigError(f"{where} ({name}): keyview {keyview} is not an index of its {len(views)} views")
    parsed = tuple(_view(v, base, f"{where}.views[{i}]") for i, v in enumerate(views))
    if not _near(parsed[keyview].pose, _EYE4, _POSE_TOL):
        raise ConfigError(f"{where} ({name}): the keyview's pose must be the identity (poses map keyview "
                          f"coordinates into each view: p_view = pose @ p_key)")
    depth_range = _depth_range(_optional(entry, "depth_range", list, where), where)
    return RmvdSample(name, keyview, parsed, base / _field(entry, "depth", str, where), fmt, depth_range)


def _format(doc: dict, where: str) -> str:
    """The list's ``"format"`` (default ``npy``), one of ``DEPTH_FORMATS``."""
    fmt = _optional(doc, "format", str, where)
    fmt = "npy" if fmt is None else fmt
    if fmt not in DEPTH_FORMATS:
        raise ConfigError(f"{where}: 'format' must be one of {', '.join(DEPTH_FORMATS)}, got {fmt!r:.40}")
    return fmt


class MissingDataRoot(ConfigError):
    """A sample list's dataset folder was not given (``"root": null`` without ``--data-root``) or does
    not exist; ``dataset`` and ``problem`` (why, in a few words) let ``load_sample_lists`` name every
    missing folder in one line."""

    def __init__(self, message: str, dataset: str, problem: str):
        super().__init__(message)
        self.dataset, self.problem = dataset, problem


def _root(doc: dict, path: Path, dataset: str, data_root) -> Path:
    """The folder the list's paths are relative to: ``data_root`` (``--data-root``) when given,
    else the list's ``"root"`` (relative to its folder; ``null``: must be given), else its folder.
    A folder not given or not there raises ``MissingDataRoot``."""
    if data_root is not None:
        root = Path(data_root).expanduser()
        if not root.is_dir():
            raise MissingDataRoot(f"--data-root {dataset}={data_root}: no such folder (give the dataset's native "
                                  f"root, docs/rmvd.md)", dataset, f"--data-root {dataset}={data_root}: no such folder")
        return root
    if "root" not in doc:
        return path.parent
    if doc["root"] is None:
        raise MissingDataRoot(f"sample list {path} refers to files in the {dataset} dataset's own folder: give it "
                              f"with --data-root {dataset}=DIR (layouts: docs/rmvd.md)", dataset,
                              f"sample list {path} reads its own folder, not given")
    return path.parent / _field(doc, "root", str, f"sample list {path}")


def _missing_roots_error(missing: list[MissingDataRoot]) -> ConfigError:
    """One line for every dataset folder the sample lists need and do not have (one: its own message)."""
    if len(missing) == 1:
        return missing[0]
    needed = " ".join(f"--data-root {err.dataset}=DIR" for err in missing)
    return ConfigError(f"{len(missing)} datasets have no folder: " + "; ".join(f"{err.dataset} ({err.problem})"
                       for err in missing) + f"; give each dataset's native root: {needed} (layouts: docs/rmvd.md)")


def load_sample_list(path: str | Path, data_roots: dict | None = None) -> SampleList:
    """Read and check one sample-list JSON file (schema in the module docstring); its paths are
    relative to ``data_roots[dataset]`` when given (``--data-root``), else to its ``"root"`` or its
    folder. Every problem is one ``ConfigError`` line naming the file and the entry."""
    path = Path(path)
    try:
        doc = read_json(path)
    except OSError as err:
        raise ConfigError(f"cannot read sample list {path}: {err.strerror or err}") from None
    except ValueError as err:
        raise ConfigError(f"sample list {path} is not valid JSON ({err})".replace("\n", " ")) from None
    dataset = _field(doc, "dataset", str, f"sample list {path}")
    entries = _field(doc, "samples", list, f"sample list {path}")
    if not entries:
        raise ConfigError(f"sample list {path} has no samples")
    fmt = _format(doc, f"sample list {path}")
    root = _root(doc, path, dataset, (data_roots or {}).get(dataset))
    samples = tuple(_sample(e, root, fmt, f"{path}: samples[{i}]") for i, e in enumerate(entries))
    seen: set[str] = set()
    for s in samples:
        if s.name in seen:
            raise ConfigError(f"{path}: sample name {s.name!r} appears twice (names must be unique)")
        seen.add(s.name)
    return SampleList(dataset, samples, path, fmt, root)


def parse_data_roots(items) -> dict[str, str]:
    """``--data-root`` values ``["kitti=/data/kitti", ...]`` -> ``{"kitti": "/data/kitti"}``; a value
    without ``=``, with an empty side, or a dataset given twice is one ConfigError line."""
    roots: dict[str, str] = {}
    for item in items or ():
        dataset, sep, folder = str(item).partition("=")
        if not sep or not dataset or not folder:
            raise ConfigError(f"--data-root {item!r}: write DATASET=DIR, e.g. --data-root kitti=/data/kitti")
        if dataset in roots:
            raise ConfigError(f"--data-root gives dataset {dataset!r} twice (one folder per dataset)")
        roots[dataset] = folder
    return roots


def load_sample_lists(paths, data_roots=()) -> list[SampleList]:
    """Every sample list of ``paths`` (files, folders whose ``*.json`` are read in name order, or
    ``official:NAME`` / ``official:all``: the shipped lists), the paths of dataset D relative to
    ``D=DIR`` of ``data_roots`` (``--data-root`` values) where given; two lists of the same dataset,
    or a data root of a dataset no list has, are an error, and so are dataset folders not given or not
    there: all of them named in one line."""
    files: list[Path] = []
    for p in map(str, paths):
        if is_official(p):
            files.extend(official_list_paths(p))
            continue
        files.extend(sorted(Path(p).glob("*.json")) if Path(p).is_dir() else [Path(p)])
    if not files:
        raise ConfigError(f"no sample list (*.json) found in {', '.join(map(str, paths))}")
    roots = parse_data_roots(data_roots)
    lists, missing = [], []
    for f in files:
        try:
            lists.append(load_sample_list(f, roots))
        except MissingDataRoot as err:  # read the other lists too, to name every missing folder at once
            missing.append(err)
    if missing:
        raise _missing_roots_error(missing)
    names = [sl.dataset for sl in lists]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"dataset {name!r} comes from two sample lists (give each dataset one file)")
    unused = sorted(set(roots) - set(names))
    if unused:
        raise ConfigError(f"--data-root {unused[0]}=...: no sample list is of dataset {unused[0]!r} (the lists "
                          f"are of {', '.join(names)})")
    return lists
