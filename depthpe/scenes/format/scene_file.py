"""Scene files: one HDF5 file per scene, the single on-disk format of depthpe (docs/scene-format.md).

Layout of ``ROOT/<dataset>/<split>/<scene_id>.h5``:

========================  =====================================  ===========================================
node                      type                                   meaning
========================  =====================================  ===========================================
attrs                                                            ``format="depthpe-scene"``, ``version=1``,
                                                                 ``dataset``, ``scene_id``, ``split``,
                                                                 ``metric`` (bool), ``depth_units``, ``source``
``images``                (N,) variable-length uint8             JPEG (or PNG) bytes of RGB images
``depth``                 (N, H, W) float16/float32              z-depth, 0 = invalid; one chunk per frame
``K``                     (N, 3, 3) float32                      pixel intrinsics for the stored size
``w2c``                   (N, 3, 4) float64                      OpenCV world-to-camera, dataset's own frame
``valid``                 optional (N, H, W) uint8               validity beyond depth > 0 (chunked as depth)
``frame_names``           optional (N,) str                      source frame names
========================  =====================================  ===========================================

Depth and valid are gzip-compressed by default (``depth_compression="gzip"``: level 4 + byte
shuffle, the layout of every file written before the option existed); "lzf" and "none"
(uncompressed) can be chosen per file. HDF5 records the filter of each dataset, so the reader reads
every variant the same way. The trade-off (docs/data.md "Loader throughput", ``depthpe bench data
--format jpeg --depth-codecs``): reading a 480x640 float16 frame takes 1.1-2.3 ms with gzip (as long
as decoding the frame's JPEG), 1.2-1.4 ms with lzf and 0.07-0.09 ms uncompressed; uncompressed depth
takes 615 KB per frame against 30 KB (smooth rendered depth) to 317 KB (sensor-like) with gzip.
gzip stays the default because a converted dataset of millions of frames would grow 1.7-4.7 times
for a loader that one worker per GPU already keeps fed; "none" is for loader-bound machines.

``ROOT/<dataset>/<split>/index.json`` lists the scenes so that a dataset opens no HDF5 file until it
reads a sample. Files are written atomically (temporary name in the same folder, then ``os.replace``),
so a reader never sees a half-written file and an interrupted conversion leaves no partial scene.

Readers are lazy: ``SceneReader`` opens its file on first use and re-opens it after a fork (the pid is
checked), so a reader created in a parent process is never used through an inherited HDF5 handle.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import cv2
import h5py
import numpy as np

from ...files import atomic_target, atomic_write_bytes
from .depth_codecs import DEFAULT_DEPTH_COMPRESSION, DEPTH_COMPRESSIONS
from .image_bytes import decode_image_bytes
from .limits import camera_problems, depth_storage_problem, index_entry_problem, shape_problem, w2c_problems

__all__ = [
    "FORMAT",
    "VERSION",
    "INDEX_NAME",
    "SceneFileError",
    "DEPTH_COMPRESSIONS",
    "DEFAULT_DEPTH_COMPRESSION",
    "depth_filters",
    "write_scene",
    "write_index",
    "read_index",
    "finished_entry",
    "SceneReader",
    "encode_image",
    "decode_image",
    "read_attrs",
    "index_entry",
]

FORMAT = "depthpe-scene"
VERSION = 1
INDEX_NAME = "index.json"
_REQUIRED_NODES = ("images", "depth", "K", "w2c")
_REQUIRED_ATTRS = ("format", "version", "dataset", "scene_id", "split", "metric", "depth_units")
# HDF5 filters of the per-frame datasets (depth, valid) by ``write_scene(depth_compression=...)``
_PER_FRAME_FILTERS: dict[str, dict[str, Any]] = {
    "none": {},
    "lzf": {"compression": "lzf", "shuffle": True},
    "gzip": {"compression": "gzip", "compression_opts": 4, "shuffle": True},
}


class SceneFileError(Exception):
    """A scene file or index is missing, corrupt or does not follow the format; names file and problem."""


def encode_image(image: np.ndarray, fmt: str = "jpeg", quality: int = 95) -> np.ndarray:
    """Encode an RGB uint8 image (H, W, 3) as JPEG (4:4:4 chroma) or PNG bytes -> 1-D uint8 array."""
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"images must be uint8 RGB (H, W, 3), got {image.dtype} {image.shape}")
    bgr = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2BGR)
    if fmt == "jpeg":
        # 4:4:4 chroma (no subsampling): colour edges stay registered to depth edges.
        params = [int(cv2.IMWRITE_JPEG_QUALITY), int(quality),
                  int(cv2.IMWRITE_JPEG_SAMPLING_FACTOR), int(cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444)]
        ok, buf = cv2.imencode(".jpg", bgr, params)
    elif fmt == "png":
        ok, buf = cv2.imencode(".png", bgr)
    else:
        raise ValueError(f"image format must be 'jpeg' or 'png', got {fmt!r}")
    if not ok:
        raise ValueError("OpenCV failed to encode an image")
    return buf.reshape(-1)


_IMREAD_RGB = getattr(cv2, "IMREAD_COLOR_RGB", None)  # OpenCV >= 4.10


def decode_image(data: np.ndarray) -> np.ndarray:
    """Decode JPEG/PNG bytes (1-D uint8) to an RGB uint8 image (H, W, 3). Strict: raises
    ``ValueError`` (``image_bytes.ImageBytesError``) for truncated or corrupt bytes, which OpenCV
    alone would decode with a grey lower part, and for images larger than ``MAX_FRAME_SIDE``."""
    if _IMREAD_RGB is not None:  # the decoder writes RGB directly: the same pixels, one pass less
        return decode_image_bytes(data, _IMREAD_RGB)
    return cv2.cvtColor(decode_image_bytes(data, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


def _validate_arrays(images, depth, K, w2c, valid, frame_names) -> tuple[int, int, int]:
    depth = np.asarray(depth)
    if depth.ndim != 3:
        raise ValueError(f"depth must be (N, H, W), got shape {depth.shape}")
    n, h, w = depth.shape
    if n == 0:
        raise ValueError("a scene needs at least one frame")
    if len(images) != n:
        raise ValueError(f"{len(images)} images but {n} depth maps")
    for i, im in enumerate(images):
        if np.asarray(im).shape != (h, w, 3):
            raise ValueError(
                f"image {i} has shape {np.asarray(im).shape}; all frames must be RGB of the depth size "
                f"({h}, {w}, 3)"
            )
    if not np.isfinite(depth).all():
        raise ValueError("depth contains NaN or inf; set invalid pixels to 0 before writing")
    if (depth < 0).any():
        raise ValueError("depth contains negative values; set invalid pixels to 0 before writing")
    if np.asarray(K).shape != (n, 3, 3):
        raise ValueError(f"K must be (N, 3, 3) = ({n}, 3, 3), got {np.asarray(K).shape}")
    w2c = np.asarray(w2c)
    if w2c.shape not in ((n, 3, 4), (n, 4, 4)):
        raise ValueError(f"w2c must be (N, 3, 4) or (N, 4, 4) with N={n}, got {w2c.shape}")
    if not (np.isfinite(K).all() and np.isfinite(w2c).all()):
        raise ValueError("K or w2c contain NaN or inf")
    rigid = w2c_problems(w2c)
    if rigid:
        raise ValueError(f"w2c is not a rigid world-to-camera transform: {rigid[0]}")
    if valid is not None and np.asarray(valid).shape != (n, h, w):
        raise ValueError(f"valid must be (N, H, W) = {(n, h, w)}, got {np.asarray(valid).shape}")
    if frame_names is not None and len(frame_names) != n:
        raise ValueError(f"{len(frame_names)} frame names for {n} frames")
    return n, h, w


def write_scene(
    path: str | os.PathLike,
    *,
    images: Sequence[np.ndarray] | np.ndarray,
    depth: np.ndarray,
    K: np.ndarray,
    w2c: np.ndarray,
    dataset: str,
    scene_id: str,
    split: str,
    metric: bool,
    depth_units: str,
    source: str = "",
    valid: np.ndarray | None = None,
    frame_names: Sequence[str] | None = None,
    jpeg_quality: int = 95,
    image_format: str = "jpeg",
    depth_dtype: str = "float16",
    depth_compression: str = DEFAULT_DEPTH_COMPRESSION,
    extra_attrs: dict[str, Any] | None = None,
) -> dict:
    """Write one scene atomically in the depthpe scene format.

    images: N RGB uint8 arrays (H, W, 3) (or one (N, H, W, 3) array); depth: (N, H, W) z-depth,
    0 = invalid, finite and >= 0; K: (N, 3, 3) pixel intrinsics; w2c: (N, 3, 4) or (N, 4, 4) OpenCV
    world-to-camera in the dataset's own world frame; valid: optional (N, H, W) bool; frame_names:
    optional N strings. Depth is stored as ``depth_dtype`` (float16 or float32) with one chunk per
    frame, it and ``valid`` compressed by ``depth_compression``: "gzip" (default: level 4 with byte
    shuffle; smallest, 1-2 ms to inflate a 480x640 float16 frame), "lzf" or "none" (reads in under
    0.1 ms, 615 KB per frame); see the module docstring. Images are stored as JPEG
    (``jpeg_quality``) or PNG bytes.

    Returns the index entry ``{"path", "scene_id", "num_frames", "height", "width", "metric",
    "depth_units"}`` with ``path`` the file name relative to its split folder.
    """
    if depth_dtype not in ("float16", "float32"):
        raise ValueError(f"depth_dtype must be 'float16' or 'float32', got {depth_dtype!r}")
    filters = depth_filters(depth_compression)
    n, h, w = _validate_arrays(images, depth, K, w2c, valid, frame_names)
    depth_store = _depth_for_storage(depth, depth_dtype)
    attrs = {
        "format": FORMAT,
        "version": VERSION,
        "dataset": dataset,
        "scene_id": scene_id,
        "split": split,
        "metric": bool(metric),
        "depth_units": depth_units,
        "source": source,
        **(extra_attrs or {}),
    }
    path = Path(path)
    with atomic_target(path) as tmp, h5py.File(tmp, "w", libver="latest") as f:
        for key, value in attrs.items():
            f.attrs[key] = value
        encoded = [encode_image(np.asarray(im), image_format, jpeg_quality) for im in images]
        _write_nodes(f, encoded, depth_store.astype(depth_dtype), K, w2c, valid, frame_names, filters)
    return {"path": path.name, "scene_id": scene_id, "num_frames": n, "height": h, "width": w,
            "metric": bool(metric), "depth_units": depth_units}


def depth_filters(depth_compression: str) -> dict[str, Any]:
    """The ``h5py.Group.create_dataset`` keywords (compression, shuffle) of ``depth_compression``
    ("none", "lzf" or "gzip"), used for depth and valid; raises ValueError for other names."""
    if depth_compression not in _PER_FRAME_FILTERS:
        raise ValueError(f"depth_compression must be one of {DEPTH_COMPRESSIONS}, got {depth_compression!r}")
    return dict(_PER_FRAME_FILTERS[depth_compression])


def _depth_for_storage(depth: np.ndarray, depth_dtype: str) -> np.ndarray:
    """Depth as float32; raises ``ValueError`` when ``depth_dtype`` cannot hold it
    (``validation.depth_storage_problem``: underflow, overflow, distinct values merged)."""
    problem = depth_storage_problem(np.asarray(depth), depth_dtype)
    if problem:
        raise ValueError(problem)
    return np.asarray(depth, dtype=np.float32)


def _write_nodes(f: h5py.File, encoded: list[np.ndarray], depth: np.ndarray, K, w2c, valid,
                 frame_names, filters: dict[str, Any]) -> None:
    """Write the scene's datasets into the open file ``f``: encoded image bytes, depth (already in its
    storage dtype), K as float32, w2c as float64 (N, 3, 4), and the optional valid mask and frame names;
    depth and valid with the HDF5 ``filters`` (``create_dataset`` keywords)."""
    images = f.create_dataset("images", (len(encoded),), dtype=h5py.vlen_dtype(np.uint8))
    for i, data in enumerate(encoded):
        images[i] = data
    _create_per_frame(f, "depth", depth, filters)
    f.create_dataset("K", data=np.asarray(K, dtype=np.float32))
    f.create_dataset("w2c", data=np.asarray(w2c, dtype=np.float64)[:, :3, :])
    if valid is not None:
        _create_per_frame(f, "valid", np.asarray(valid).astype(np.uint8), filters)
    if frame_names is not None:
        f.create_dataset("frame_names", data=[str(s) for s in frame_names], dtype=h5py.string_dtype())


def _create_per_frame(f: h5py.File, name: str, data: np.ndarray, filters: dict[str, Any]) -> None:
    """Create dataset ``name`` from (N, H, W) ``data`` with one chunk per frame and the HDF5 ``filters``."""
    f.create_dataset(name, data=data, chunks=(1, *data.shape[1:]), **filters)


def write_index(
    split_dir: str | os.PathLike, entries: Iterable[dict], *, dataset: str, split: str
) -> Path:
    """Write ``split_dir/index.json`` atomically: ``{"format", "version", "dataset", "split", "scenes"}``.

    entries: index entries as returned by ``write_scene`` (sorted by path for reproducibility).
    """
    scenes = sorted((dict(e) for e in entries), key=lambda e: e["path"])
    doc = {"format": "depthpe-index", "version": VERSION, "dataset": dataset, "split": split, "scenes": scenes}
    return atomic_write_bytes(Path(split_dir) / INDEX_NAME, json.dumps(doc, indent=1).encode())


def read_index(split_dir: str | os.PathLike) -> list[dict]:
    """Read ``split_dir/index.json`` -> list of scene entries (``path`` relative to ``split_dir``).

    Every entry is validated (``validation.index_entry_problem``): required fields with the right
    types and ranges, a path inside the split folder (not absolute, no ``..``), no file or scene id
    listed twice. Raises ``SceneFileError`` naming the file (and the entry) if the index is missing,
    malformed or breaks one of these rules.
    """
    index_path = Path(split_dir) / INDEX_NAME
    if not index_path.is_file():
        raise SceneFileError(
            f"{index_path}: no scene index found. Generate data with `depthpe synth --out ROOT` or "
            "convert a dataset with `depthpe convert`; the folder must hold index.json and *.h5 files."
        )
    try:
        scenes = json.loads(index_path.read_text())["scenes"]
        if not isinstance(scenes, list):
            raise TypeError(f"'scenes' must be a list, got {type(scenes).__name__}")
    except (ValueError, KeyError, TypeError) as err:
        raise SceneFileError(f"{index_path}: malformed index ({err!r})") from err
    seen_paths: dict[str, int] = {}
    seen_ids: dict[str, int] = {}
    for number, e in enumerate(scenes):
        problem = index_entry_problem(e, seen_paths, seen_ids, number)
        if problem:
            name = f" ({e.get('path')!r})" if isinstance(e, dict) else ""
            raise SceneFileError(f"{index_path}: scene entry {number}{name}: {problem}")
    return scenes


def index_entry(name: str, attrs: dict) -> dict:
    """The index entry of a scene file named ``name`` (relative to its split folder) with the
    attributes ``attrs`` (``SceneReader.attrs``): path, scene_id, num_frames, height, width, metric,
    depth_units, as ``write_scene`` returns them."""
    return {
        "path": name,
        "scene_id": str(attrs["scene_id"]),
        "num_frames": int(attrs["num_frames"]),
        "height": int(attrs["height"]),
        "width": int(attrs["width"]),
        "metric": bool(attrs["metric"]),
        "depth_units": str(attrs["depth_units"]),
    }


def read_attrs(path: str | os.PathLike) -> dict | None:
    """Attributes (plus num_frames, height, width) of a readable scene file; None if the file is
    missing, unreadable or malformed. Used by resumable writers to decide whether to redo a scene."""
    if not Path(path).is_file():
        return None
    reader = SceneReader(path)
    try:
        return reader.attrs
    except (SceneFileError, OSError):
        return None
    finally:
        reader.close()


def finished_entry(path: str | os.PathLike, same_settings: Callable[[dict], bool]) -> dict | None:
    """The index entry (``index_entry``) of a complete scene file at ``path`` whose attributes
    (``read_attrs``) pass ``same_settings``; None if the file is missing, unreadable or was written
    with other settings. The one resume check of the resumable writers (``depthpe synth``,
    ``depthpe convert``): a scene with an entry is kept on a rerun, one without is redone."""
    attrs = read_attrs(path)
    if attrs is None or not same_settings(attrs):
        return None
    return index_entry(Path(path).name, attrs)


def _as_float32(a: np.ndarray) -> np.ndarray:
    """``a.astype(np.float32)``; float16 through torch, whose conversion is vectorized (a 480x640
    frame: 24 us against numpy's 508 us, docs/data.md) and exact like numpy's (every float16 is a
    float32)."""
    if a.dtype != np.float16:
        return a.astype(np.float32)
    import torch  # imported here: reading scene files needs torch only for this conversion

    return torch.from_numpy(a).float().numpy()


class SceneReader:
    """Lazy reader of one scene file; reads single frames without loading the whole file.

    Opening happens on first access, in the current process; after a fork the file is re-opened.
    Attributes are read on first access too. Every failure raises ``SceneFileError`` naming the file.

    Opening checks the claimed shape against ``validation.MAX_FRAMES`` / ``MAX_FRAME_SIDE`` before
    anything is read, and images are decoded strictly (a truncated or corrupt JPEG/PNG raises).

    ``strict=False`` (inspection, ``depthpe check``) repairs what it can: NaN/inf depth values read
    as invalid (0). ``strict=True`` (training and evaluation data) refuses values the format forbids
    (docs/scene-format.md): opening the file also checks every camera (``validation.camera_problems``:
    NaN/inf, non-positive focal length, non-orthonormal rotation, principal point far outside the
    image), and ``read_depth`` raises for a frame whose stored depth holds NaN/inf.
    """

    def __init__(self, path: str | os.PathLike, *, strict: bool = False):
        self.path = Path(path)
        self.strict = bool(strict)
        self._file: h5py.File | None = None
        self._pid: int | None = None
        self._meta: dict | None = None
        self._nodes: dict[str, h5py.Dataset] = {}  # datasets of the open file, looked up once
        self._cameras: tuple[np.ndarray, np.ndarray] | None = None  # K, w2c as float64, read once

    # -- opening -----------------------------------------------------------------------------
    def _error(self, problem: str) -> SceneFileError:
        return SceneFileError(f"{self.path}: {problem}")

    def _open(self) -> h5py.File:
        if self._file is not None and self._pid == os.getpid():
            return self._file
        self._file = None
        try:
            f = h5py.File(self.path, "r", locking=False)
        except FileNotFoundError as err:
            raise self._error("file not found") from err
        except OSError as err:
            raise self._error(f"cannot open as HDF5 (corrupt or truncated?): {err}") from err
        self._file, self._pid = f, os.getpid()
        self._nodes, self._cameras = {}, None
        try:
            self._meta = self._validate(f)
        except SceneFileError:
            self.close()
            raise
        return f

    def _validate(self, f: h5py.File) -> dict:
        try:
            attrs = {k: (v.item() if hasattr(v, "item") else v) for k, v in f.attrs.items()}
        except Exception as err:  # noqa: BLE001 - h5py raises many types on corrupt metadata
            raise self._error(f"cannot read attributes: {err}") from err
        missing = [a for a in _REQUIRED_ATTRS if a not in attrs]
        if missing:
            raise self._error(f"missing attributes {missing}")
        if attrs["format"] != FORMAT:
            raise self._error(f"format attribute is {attrs['format']!r}, expected {FORMAT!r}")
        if int(attrs["version"]) > VERSION:
            raise self._error(
                f"format version {attrs['version']} is newer than this depthpe ({VERSION}); upgrade depthpe"
            )
        missing_nodes = [k for k in _REQUIRED_NODES if k not in f]
        if missing_nodes:
            raise self._error(f"missing datasets {missing_nodes}")
        depth = f["depth"]
        if depth.ndim != 3:
            raise self._error(f"depth has shape {depth.shape}, expected (N, H, W)")
        n, h, w = depth.shape
        too_big = shape_problem(n, h, w)
        if too_big:
            raise self._error(f"depth {too_big}; refusing to read it (corrupt or hostile file?)")
        checks = {
            "images": (n,),
            "K": (n, 3, 3),
            "w2c": (n, 3, 4),
        }
        if "valid" in f:
            checks["valid"] = (n, h, w)
        if "frame_names" in f:
            checks["frame_names"] = (n,)
        for key, shape in checks.items():
            if f[key].shape != shape:
                raise self._error(f"{key} has shape {f[key].shape}, expected {shape}")
        if self.strict:
            self._check_cameras(f, h, w)
        attrs.update(num_frames=n, height=h, width=w)
        return attrs

    def _check_cameras(self, f: h5py.File, height: int, width: int) -> None:
        """Strict readers: raise if any camera of the file is invalid (``validation.camera_problems``:
        non-finite, non-positive focal length, non-orthonormal rotation, principal point far outside
        the image)."""
        try:
            K, w2c = f["K"][:], f["w2c"][:]
        except Exception as err:  # noqa: BLE001 - h5py raises many types on corrupt data
            raise self._error(f"cannot read cameras: {err}") from err
        self._cameras = (K.astype(np.float64), w2c.astype(np.float64))
        problems = camera_problems(K, w2c, height, width)
        if problems:
            raise self._error(
                f"{'; '.join(problems)}; the file breaks the scene format: re-convert the scene "
                "(`depthpe check` lists such files)"
            )

    def close(self) -> None:
        """Close the file handle if this process opened it."""
        if self._file is not None and self._pid == os.getpid():
            try:
                self._file.close()
            except Exception:  # noqa: BLE001
                pass
        self._file, self._nodes, self._cameras = None, {}, None

    def __enter__(self) -> "SceneReader":
        self._open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self):  # picklable: never carry an open handle into another process
        return {"path": self.path, "strict": self.strict, "_file": None, "_pid": None, "_meta": None,
                "_nodes": {}, "_cameras": None}

    # -- metadata ----------------------------------------------------------------------------
    @property
    def attrs(self) -> dict:
        """File attributes plus ``num_frames``, ``height``, ``width``."""
        self._open()
        return dict(self._meta)

    @property
    def num_frames(self) -> int:
        return self.attrs["num_frames"]

    @property
    def height(self) -> int:
        return self.attrs["height"]

    @property
    def width(self) -> int:
        return self.attrs["width"]

    def frame_names(self) -> list[str] | None:
        f = self._open()
        if "frame_names" not in f:
            return None
        return [s.decode() if isinstance(s, bytes) else str(s) for s in f["frame_names"][:]]

    # -- data --------------------------------------------------------------------------------
    def _node(self, name: str) -> h5py.Dataset:
        """Dataset ``name`` of the open file (looked up once per opening: a lookup costs ~0.1 ms)."""
        f = self._open()
        node = self._nodes.get(name)
        if node is None:
            node = self._nodes[name] = f[name]
        return node

    def _check_index(self, i: int) -> int:
        n = self.num_frames
        if not -n <= i < n:
            raise IndexError(f"{self.path}: frame {i} out of range for {n} frames")
        return i % n

    def read_cameras(self) -> tuple[np.ndarray, np.ndarray]:
        """All cameras: K (N, 3, 3) float64 pixels, w2c (N, 3, 4) float64 OpenCV world-to-camera
        (copies of the arrays read once per opening of the file)."""
        K, w2c = self._all_cameras()
        return K.copy(), w2c.copy()

    def _all_cameras(self) -> tuple[np.ndarray, np.ndarray]:
        """K (N, 3, 3) and w2c (N, 3, 4) as float64, read on first use (or by the strict check at
        opening) and kept while the file is open: callers must not modify them."""
        f = self._open()
        if self._cameras is None:
            try:
                self._cameras = (f["K"][:].astype(np.float64), f["w2c"][:].astype(np.float64))
            except Exception as err:  # noqa: BLE001
                raise self._error(f"cannot read cameras: {err}") from err
        return self._cameras

    def read_raw_depth(self, i: int) -> np.ndarray:
        """Depth of frame i as stored, as (H, W) float32 (NaN, inf and negative values included)."""
        i = self._check_index(i)
        try:
            return _as_float32(self._node("depth")[i])
        except Exception as err:  # noqa: BLE001
            raise self._error(f"cannot read depth of frame {i}: {err}") from err

    def read_depth(self, i: int) -> np.ndarray:
        """Depth of frame i: (H, W) float32 z-depth, 0 = invalid (negative values become 0; NaN/inf
        become 0, or raise ``SceneFileError`` when the reader is strict)."""
        i = self._check_index(i)
        d = self.read_raw_depth(i)
        if np.isfinite(d).all():  # the usual case: only negative values to clear
            d[d < 0] = 0
            return d
        nonfinite = ~np.isfinite(d)
        if self.strict and nonfinite.any():
            raise self._error(
                f"{int(nonfinite.sum())} NaN/inf depth value(s) in frame {i}; the format stores invalid depth "
                "as 0: re-convert the scene (`depthpe check` lists such files)"
            )
        d[nonfinite | (d < 0)] = 0
        return d

    def read_valid(self, i: int) -> np.ndarray | None:
        """The stored ``valid`` mask of frame i as (H, W) bool, or None when the file has none."""
        f = self._open()
        i = self._check_index(i)
        if "valid" not in f:
            return None
        try:
            return self._node("valid")[i].astype(bool)
        except Exception as err:  # noqa: BLE001
            raise self._error(f"cannot read valid mask of frame {i}: {err}") from err

    def read_image(self, i: int) -> np.ndarray:
        """Image of frame i: (H, W, 3) uint8 RGB."""
        i = self._check_index(i)
        try:
            img = decode_image(self._node("images")[i])
        except Exception as err:  # noqa: BLE001
            raise self._error(f"cannot decode image of frame {i}: {err}") from err
        if img.shape[:2] != (self.height, self.width):
            raise self._error(
                f"image of frame {i} is {img.shape[:2]}, but depth is {(self.height, self.width)}"
            )
        return img

    def read_frame(self, i: int) -> dict:
        """One frame: image (H, W, 3) uint8 RGB, depth (H, W) float32, valid (H, W) bool
        (depth > 0 and the optional ``valid`` node), K (3, 3) float64, w2c (3, 4) float64."""
        i = self._check_index(i)
        depth = self.read_depth(i)
        valid = depth > 0
        stored = self.read_valid(i)
        if stored is not None:
            valid &= stored
        K, w2c = self._all_cameras()
        return {"image": self.read_image(i), "depth": depth, "valid": valid, "K": K[i].copy(), "w2c": w2c[i].copy()}
