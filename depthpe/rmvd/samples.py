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

Pose convention (RMVD's ``view_to_key`` transform): ``pose`` maps keyview camera coordinates into
the view's camera coordinates, ``p_view = pose @ p_key`` (metres, OpenCV axes: x right, y down,
z forward). The keyview's own pose is therefore the identity. With the keyview's camera frame as
the world frame this is exactly depthpe's world-to-camera ``w2c`` (docs/conventions.md):
``w2c_i = pose_i`` and view 0 normalization (``w2c_i @ inv(w2c_key)``) leaves it unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import ConfigError

__all__ = ["RmvdView", "RmvdSample", "SampleList", "load_sample_list", "load_sample_lists"]

_POSE_TOL = 1e-4  # keyview pose vs identity, last row vs [0, 0, 0, 1]


@dataclass(frozen=True)
class RmvdView:
    """One view: ``image`` path, ``K`` (3, 3) float64 pixels, ``pose`` (4, 4) float64 view_to_key
    (``p_view = pose @ p_key``, = depthpe ``w2c`` with the keyview as world)."""

    image: Path
    K: np.ndarray
    pose: np.ndarray


@dataclass(frozen=True)
class RmvdSample:
    """One benchmark sample: ``name`` (unique in its list), ``keyview`` (index into ``views``),
    ``views`` and the keyview's GT ``depth`` path (``.npy`` (H, W), metres, 0 = invalid)."""

    name: str
    keyview: int
    views: tuple[RmvdView, ...]
    depth: Path

    @property
    def source_indices(self) -> list[int]:
        """The indices of every view but the keyview, in list order."""
        return [i for i in range(len(self.views)) if i != self.keyview]


@dataclass(frozen=True)
class SampleList:
    """The samples of one dataset (``dataset``: its name, e.g. ``kitti``) and the file read."""

    dataset: str
    samples: tuple[RmvdSample, ...]
    path: Path


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
    """A pinhole K in pixels: positive focal lengths, zero skew terms, last row [0, 0, 1]."""
    K = _matrix(value, (3, 3), where)
    if not (K[0, 0] > 0 and K[1, 1] > 0) or K[1, 0] or K[2, 0] or K[2, 1] or K[2, 2] != 1:
        raise ConfigError(f"{where} must be [[fx,0,cx],[0,fy,cy],[0,0,1]] with fx, fy > 0 (pixels)")
    return K


def _pose(value, where: str) -> np.ndarray:
    """A rigid 4x4 view_to_key transform: rotation block orthonormal with det +1, last row [0,0,0,1]."""
    T = _matrix(value, (4, 4), where)
    R = T[:3, :3]
    if not np.allclose(T[3], [0, 0, 0, 1], atol=_POSE_TOL) or not np.allclose(R @ R.T, np.eye(3), atol=1e-3) \
            or np.linalg.det(R) < 0:
        raise ConfigError(f"{where} must be a rigid transform [[R, t], [0, 0, 0, 1]] with R a rotation")
    return T


def _view(entry, base: Path, where: str) -> RmvdView:
    image = _field(entry, "image", str, where)
    return RmvdView(base / image, _intrinsics(_field(entry, "K", list, where), f"{where}.K"),
                    _pose(_field(entry, "pose", list, where), f"{where}.pose"))


def _sample(entry, base: Path, where: str) -> RmvdSample:
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
    if not np.allclose(parsed[keyview].pose, np.eye(4), atol=_POSE_TOL):
        raise ConfigError(f"{where} ({name}): the keyview's pose must be the identity (poses map keyview "
                          f"coordinates into each view: p_view = pose @ p_key)")
    return RmvdSample(name, keyview, parsed, base / _field(entry, "depth", str, where))


def load_sample_list(path: str | Path) -> SampleList:
    """Read and check one sample-list JSON file (schema in the module docstring); every problem is
    one ``ConfigError`` line naming the file and the entry."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"cannot read sample list {path}: {err.strerror or err}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"sample list {path} is not valid JSON ({err})".replace("\n", " ")) from None
    dataset = _field(doc, "dataset", str, f"sample list {path}")
    entries = _field(doc, "samples", list, f"sample list {path}")
    if not entries:
        raise ConfigError(f"sample list {path} has no samples")
    samples = tuple(_sample(e, path.parent, f"{path}: samples[{i}]") for i, e in enumerate(entries))
    seen: set[str] = set()
    for s in samples:
        if s.name in seen:
            raise ConfigError(f"{path}: sample name {s.name!r} appears twice (names must be unique)")
        seen.add(s.name)
    return SampleList(dataset, samples, path)


def load_sample_lists(paths) -> list[SampleList]:
    """Every sample list of ``paths`` (files, or folders whose ``*.json`` are read in name order);
    two lists of the same dataset are an error."""
    files: list[Path] = []
    for p in map(Path, paths):
        files.extend(sorted(p.glob("*.json")) if p.is_dir() else [p])
    if not files:
        raise ConfigError(f"no sample list (*.json) found in {', '.join(map(str, paths))}")
    lists = [load_sample_list(f) for f in files]
    names = [sl.dataset for sl in lists]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"dataset {name!r} comes from two sample lists (give each dataset one file)")
    return lists
