"""Multi-view datasets over scene files, their collate function and DataLoader builders.

Sample dict (one sample of S views, output of ``__getitem__``):

============== ======================== ==========================================================
key            type                     meaning
============== ======================== ==========================================================
images         (S, 3, H, W) float32     RGB in [0, 1] (no ImageNet normalization)
depth          (S, H, W) float32        z-depth in the normalized unit, 0 = invalid
valid          (S, H, W) bool           depth > 0 and the file's optional valid mask
K              (S, 3, 3) float32        pixel intrinsics of the output images (OpenCV)
w2c            (S, 4, 4) float32        normalized OpenCV world-to-camera; w2c[0] = identity
scale          float                    normalization scale in the dataset's units
                                        (depth_in_dataset_units = depth * scale)
dataset        str                      source name (``SourceConfig.name``)
scene          str                      scene id
frames         (S,) int64               frame indices in the scene file (view 0 = reference)
redraws        int                      draws rejected (degenerate cameras / too little valid depth)
skipped_files  int                      draws that hit an unusable scene file (warned, skipped)
bad_files      list[(str, str)]         (path, reason) of each of those draws
============== ======================== ==========================================================

An *unusable scene file* is one that is listed in index.json but is missing, cannot be opened or
read (corrupt, truncated, a truncated or corrupt image of a frame the sample reads), claims a
shape beyond the format's limits, breaks the format (``SceneFileError``), holds an invalid camera
anywhere in the scene (NaN/inf, non-positive focal length, non-orthonormal rotation, principal
point far outside the image: checked when the file is opened, ``validation.camera_problems``),
NaN/inf depth in a frame the sample reads (``SceneReader(strict=True)``), or, for training, whose
camera centres all coincide (a pure rotation: no view pair has a baseline, ``require_camera_motion``). Such a draw is skipped, warned about
(``SceneSkippedWarning``, once per file and process) and replaced by another scene, so no NaN or
inf from a file ever reaches a batch; the file is remembered as bad by the process and every later
draw of it is skipped without reading it again.

``collate`` stacks B samples into (B, S, ...) tensors, ``scale`` into (B,) float32, names into lists,
sums ``redraws`` and ``skipped_files`` and concatenates ``bad_files`` over the batch: the training
loop adds these to its counters (this works with any number of DataLoader workers because the
counts travel with the batch).

Scene files are opened lazily inside ``__getitem__`` (in DataLoader workers), never at construction:
datasets are built from ``index.json`` files only and keep a small per-process LRU of ``SceneReader``
that is dropped when the process id changes (after a fork) and not pickled (spawn).

Loader workers are forked and set up by ``depthpe.data.workers.worker_init_fn``: they leave SIGTERM
and SIGINT to the main process (which checkpoints on pre-emption) and never inherit a live OpenCV
thread pool (a fork hook settles it first), so a loader started after ``predict`` does not hang.
"""

from __future__ import annotations

import os
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

import cv2
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from depthpe.data.augment import crop_and_resize, crop_box, jitter_views
from depthpe.data.config import MIN_SCALE_RATIO, ColorJitterConfig, DataConfig, SourceConfig
from depthpe.data.sampling import (
    DynamicBatchSampler,
    SampleKey,
    draw_scene,
    eval_view_indices,
    make_rng,
    normalized_weights,
    select_views,
    target_size,
)
from depthpe.data.format.scene_file import SceneFileError, SceneReader, read_index
from depthpe.data.workers import worker_init_fn
from depthpe.geometry import DegenerateSceneError, normalize_scene
from depthpe.metrics import MIN_VALID_FRACTION, MIN_VALID_PIXELS, min_valid_pixels, scored_mask

__all__ = [
    "SceneSkippedWarning",
    "MIN_TRAIN_FRAMES",
    "load_entries",
    "too_few_frames_problem",
    "require_camera_motion",
    "SampleRejected",
    "NoUsableSampleError",
    "SceneEntry",
    "ReaderCache",
    "build_sample",
    "MultiViewDataset",
    "SceneEvalDataset",
    "collate",
    "collate_eval",
    "worker_init_fn",
    "loader_kwargs",
    "build_train_loader",
    "build_eval_loader",
]

_TAG_REDRAW = 0x52454452
_TENSOR_KEYS = ("images", "depth", "valid", "K", "w2c", "frames")


class SceneSkippedWarning(UserWarning):
    """A scene file could not be read and was skipped (the sample was drawn again elsewhere)."""


MIN_TRAIN_FRAMES = 2  # views of one scene a training sample needs at the least


class SampleRejected(Exception):
    """A drawn sample is unusable (degenerate normalization or too little valid depth)."""


class NoUsableSampleError(RuntimeError):
    """Every draw of a training sample hit an unreadable file or an unusable view subset: the data
    (or the sampling settings) are broken, not one scene. The message is one line."""


@dataclass(frozen=True)
class SceneEntry:
    """One scene of the index: absolute file path, id, frame count and stored size."""

    path: str
    scene_id: str
    num_frames: int
    height: int
    width: int


def load_entries(src: SourceConfig, index: Sequence[dict] | None = None) -> list[SceneEntry]:
    """Every scene listed in the index.json of ``src`` (no HDF5 file is opened). index: its entries
    as already read (``read_index``; None = read them now)."""
    split_dir = src.split_dir
    return [
        SceneEntry(str(split_dir / e["path"]), str(e["scene_id"]), int(e["num_frames"]),
                   int(e["height"]), int(e["width"]))
        for e in (read_index(split_dir) if index is None else index)
    ]


def too_few_frames_problem(index: int, src: SourceConfig, entries: Sequence[SceneEntry]) -> str | None:
    """One line when training source ``index`` (``src``, with positive weight) lists scenes but none
    with ``MIN_TRAIN_FRAMES`` or more frames (a training sample needs two views of one scene); else None."""
    if src.weight <= 0 or not entries or any(e.num_frames >= MIN_TRAIN_FRAMES for e in entries):
        return None
    frames = sorted({e.num_frames for e in entries})
    return (f"source {index} ({src.name}) has {len(entries)} scene(s) in {src.split_dir} but none with "
            f">= {MIN_TRAIN_FRAMES} frames (frame counts {frames}): a training sample needs {MIN_TRAIN_FRAMES} or "
            f"more views of one scene; convert the scenes with more frames, or set data.sources.{index}.weight=0")


def require_camera_motion(reader: SceneReader) -> None:
    """Raise ``SceneFileError`` when all camera centres of the scene coincide (a pure rotation, a
    tripod capture): no pair of its views has a baseline, so depth has no scale and every draw
    would be rejected; training then skips the file like any unusable one. Uses the test of
    ``normalize_scene`` over all frames (view 0 as the reference)."""
    _, w2c = reader.read_cameras()
    try:
        normalize_scene(torch.from_numpy(w2c))
    except DegenerateSceneError as err:
        raise SceneFileError(f"{reader.path}: all {len(w2c)} camera centres coincide (pure rotation), so no pair "
                             "of its views has a baseline to scale depth by; use a capture with camera motion") from err


class ReaderCache:
    """Per-process LRU of ``SceneReader(strict=True)`` keyed by path (at most ``size`` open files).

    The cache is emptied when used from a new process (pid check) and is never pickled, so readers
    are only ever opened in the process that uses them.
    """

    def __init__(self, size: int = 16) -> None:
        self.size = max(1, int(size))
        self._pid: int | None = None
        self._readers: OrderedDict[str, SceneReader] = OrderedDict()

    def __len__(self) -> int:
        return len(self._readers) if self._pid == os.getpid() else 0

    def get(self, path: str) -> SceneReader:
        """The reader of ``path`` (created and opened lazily by the reader itself)."""
        if self._pid != os.getpid():
            self._readers = OrderedDict()  # inherited readers belong to the parent: drop, never close
            self._pid = os.getpid()
        reader = self._readers.pop(path, None)
        if reader is None:
            reader = SceneReader(path, strict=True)
        self._readers[path] = reader
        while len(self._readers) > self.size:
            _, old = self._readers.popitem(last=False)
            old.close()
        return reader

    def drop(self, path: str) -> None:
        """Close and forget the reader of ``path`` (after a read failure)."""
        reader = self._readers.pop(path, None)
        if reader is not None and self._pid == os.getpid():
            reader.close()

    def __getstate__(self) -> dict:
        return {"size": self.size, "_pid": None, "_readers": OrderedDict()}


def build_sample(
    reader: SceneReader,
    frames: Sequence[int],
    out_hw: tuple[int, int],
    rng: np.random.Generator,
    *,
    crop_scale: tuple[float, float] = (1.0, 1.0),
    jitter: ColorJitterConfig | None = None,
    min_valid_fraction: float = 0.0,
    min_scale_ratio: float = MIN_SCALE_RATIO,
    scale_reference: str = "others",
    out: dict[str, torch.Tensor] | None = None,
) -> dict:
    """Read, augment and normalize the views ``frames`` of one scene (view 0 = reference).

    Each view is cropped around its principal point with a scale ~ U(crop_scale) and resized to
    ``out_hw`` = (H, W); then the colour jitter (if ``jitter``) and ``normalize_scene``.
    Returns the tensor part of the sample dict (images, depth, valid, K, w2c, scale, frames).
    Raises ``SampleRejected`` when the valid-depth fraction over all views is below
    ``min_valid_fraction`` or the normalization is degenerate (no camera motion beyond the rounding
    of the positions, ``geometry.scale_is_degenerate``, or a scale below ``min_scale_ratio`` times
    the reference view's median valid depth; both relative, so any unit); ``SceneFileError`` when the
    file cannot be read. ``out``: optional preallocated tensors ``images`` (S, 3, H, W) float32 and
    ``depth`` (S, H, W) float32 (slices of a batch: ``MultiViewDataset.__getitems__``) that the
    sample's images and depth are written into and returned as; written only if the sample is kept.
    """
    images, depth, valid, K, w2c = _read_views(reader, frames, out_hw, rng, crop_scale)
    frac = _valid_fraction(valid)
    if frac < min_valid_fraction:
        raise SampleRejected(f"valid depth fraction {frac:.3f} < {min_valid_fraction}")
    w2c_n, scale = _normalize_views(w2c, depth, valid, min_scale_ratio, scale_reference)
    if jitter is not None:
        images, _ = jitter_views(images, rng, jitter)
    out = out or {}
    return {
        "images": _images_to_float(images, out.get("images")),
        "depth": _scaled_depth(depth, scale, out.get("depth")),
        "valid": torch.from_numpy(valid),
        "K": K.float(),
        "w2c": w2c_n.float(),
        "scale": scale,
        "frames": torch.as_tensor([int(f) for f in frames], dtype=torch.int64),
    }


def _read_views(reader: SceneReader, frames: Sequence[int], out_hw: tuple[int, int],
                rng: np.random.Generator, crop_scale: tuple[float, float]):
    """Read the views ``frames`` (each file frame once), crop each around its principal point with a
    scale ~ U(crop_scale) and resize it to ``out_hw``. Returns ``(images (S, H, W, 3) uint8,
    depth (S, H, W) float32 with +0.0 where not valid, valid (S, H, W) bool: the resized mask and
    depth > 0, all numpy arrays; K (S, 3, 3) float64 and w2c (S, 3, 4) float64 tensors)``."""
    raw: dict[int, dict] = {}
    views = []
    for f in frames:
        if f not in raw:
            raw[f] = reader.read_frame(int(f))
        fr = raw[f]
        scale = float(rng.uniform(*crop_scale))
        box = crop_box(fr["depth"].shape, (fr["K"][0, 2], fr["K"][1, 2]), out_hw, scale)
        views.append(crop_and_resize(fr["image"], fr["depth"], fr["valid"], fr["K"], box, out_hw))
    images = np.stack([v[0] for v in views])  # (S, H, W, 3) uint8
    depth = np.stack([v[1] for v in views]).astype(np.float32, copy=False)
    valid = np.stack([v[2] for v in views])
    valid &= depth > 0
    # depth * valid, then + 0.0 (turns the -0.0 of negative-zero or masked depth into +0.0): the values
    # of torch.where(valid, depth, 0), bit for bit, for finite depth, in two passes without a copy
    np.multiply(depth, valid, out=depth)
    np.add(depth, np.float32(0), out=depth)
    K = torch.from_numpy(np.stack([v[3] for v in views]))
    w2c = torch.from_numpy(np.stack([raw[f]["w2c"] for f in frames]))
    return images, depth, valid, K, w2c


def _valid_fraction(valid: np.ndarray) -> float:
    """Fraction of True in the (S, H, W) bool mask as ``torch.from_numpy(valid).float().mean().item()``
    computes it (float32 sum, exact below 2**24 elements, divided in float32), from a count."""
    if valid.size >= 1 << 24:
        return torch.from_numpy(valid).float().mean().item()
    return float(np.float32(np.count_nonzero(valid)) / np.float32(valid.size))


def _images_to_float(images: np.ndarray, out: torch.Tensor | None = None) -> torch.Tensor:
    """(S, H, W, 3) uint8 RGB -> (S, 3, H, W) float32 in [0, 1] (x / 255 in float32), written into
    ``out`` when given. Per plane: cv2.split reads each view once, about 1.5x faster than a strided
    transpose."""
    s, h, w, _ = images.shape
    out = torch.empty((s, 3, h, w), dtype=torch.float32) if out is None else out
    dst = out.numpy()
    for i in range(s):
        for c, plane in enumerate(cv2.split(images[i])):
            np.divide(plane, np.float32(255), out=dst[i, c], dtype=np.float32)
    return out


def _scaled_depth(depth: np.ndarray, scale: float, out: torch.Tensor | None = None) -> torch.Tensor:
    """(S, H, W) float32 depth / ``scale`` computed in float64 and rounded to float32 (the values of
    ``normalize_scene``'s float64 depth cast to float32), written into ``out`` when given."""
    out = torch.empty(depth.shape, dtype=torch.float32) if out is None else out
    np.divide(depth, scale, out=out.numpy(), dtype=np.float64, casting="same_kind")
    return out


def _normalize_views(w2c: torch.Tensor, depth: np.ndarray, valid: np.ndarray, min_scale_ratio: float,
                     scale_reference: str = "others") -> tuple[torch.Tensor, float]:
    """``normalize_scene`` of the views -> (w2c (S, 4, 4) float64, scale: depth is divided by it);
    raises ``SampleRejected`` when it is degenerate (cameras that do not move, relative to their own
    positions) or the scale is below ``min_scale_ratio`` times the reference view's median valid
    depth (all views' if the reference has none).
    depth / valid: (S, H, W) float32 / bool arrays."""
    try:
        w2c_n, _, scale_t = normalize_scene(w2c, None, scale_reference=scale_reference)
    except DegenerateSceneError as err:
        raise SampleRejected(f"degenerate normalization: {err}") from err
    scale = float(scale_t)
    depth_t, valid_t = torch.from_numpy(depth), torch.from_numpy(valid)
    ref = depth_t[0][valid_t[0]] if valid_t[0].any() else depth_t[valid_t]
    if ref.numel() and scale < min_scale_ratio * float(ref.median()):
        raise SampleRejected(
            f"camera baseline {scale:.3g} is below {min_scale_ratio} x median depth {float(ref.median()):.3g}"
        )
    return w2c_n, scale


class _SceneSource:
    """Shared reader handling of the training and evaluation datasets."""

    def _init_readers(self, size: int) -> None:
        self._cache = ReaderCache(size)
        self._bad: dict[str, str] = {}
        self._bad_pid: int | None = None

    def _read(self, path: str, fn, *args):
        """Return ``fn(reader, *args)`` for the scene file ``path``; if the file is unusable (see the
        module docstring), warn (once per file and process), remember it as bad and raise
        ``SceneFileError`` (later calls for that file raise it again without reading)."""
        if self._bad_pid != os.getpid():
            self._bad, self._bad_pid = {}, os.getpid()
        if path in self._bad:
            raise SceneFileError(self._bad[path])
        try:
            return fn(self._cache.get(path), *args)
        except (SceneFileError, OSError) as err:
            self._cache.drop(path)
            self._bad[path] = str(err) if path in str(err) else f"{path}: {err}"
            warnings.warn(f"skipping unusable scene file: {self._bad[path]}", SceneSkippedWarning, stacklevel=2)
            raise SceneFileError(self._bad[path]) from err


class MultiViewDataset(_SceneSource, Dataset):
    """Training dataset over the sources of a ``DataConfig``, indexed by ``SampleKey``.

    Built from the sources' index.json files only (scenes with fewer than 2 frames are left out).
    ``__getitem__(key)`` draws views of scene ``key.scene`` of source ``key.source`` (by the source's
    view selection), augments them to ``(key.height, key.width)`` and normalizes them; everything
    random derives from ``key.seed``. Rejected samples and unusable files are redrawn (another
    scene by the source weights, deterministically from ``key.seed``: ``scene_of_attempt``) up to
    ``cfg.max_attempts`` times, counted in the sample's ``redraws`` / ``skipped_files`` (and
    ``bad_files``); then a RuntimeError is raised.
    ``train=False`` disables colour jitter and uses the largest crop (crop scale 1).
    """

    def __init__(self, cfg: DataConfig, *, train: bool = True) -> None:
        if not cfg.sources:
            raise ValueError("DataConfig has no sources; add at least one under data.sources")
        self.cfg, self.train = cfg, train
        self.entries: list[list[SceneEntry]] = []
        for i, src in enumerate(cfg.sources):
            listed = load_entries(src)
            problem = too_few_frames_problem(i, src, listed)
            if problem:
                raise ValueError(problem)
            self.entries.append([e for e in listed if e.num_frames >= MIN_TRAIN_FRAMES])
        self.probs = normalized_weights([s.weight for s in cfg.sources], self.scene_counts)
        self._init_readers(cfg.reader_cache_size)
        self._moving: set[str] = set()  # files whose cameras were found to move (require_camera_motion)

    @property
    def scene_counts(self) -> list[int]:
        """Number of usable scenes per source."""
        return [len(e) for e in self.entries]

    def __len__(self) -> int:
        return sum(self.scene_counts)

    def _load(self, reader: SceneReader, source: int, key: SampleKey, rng: np.random.Generator,
              out: dict[str, torch.Tensor] | None = None) -> dict:
        cfg, src = self.cfg, self.cfg.sources[source]
        if str(reader.path) not in self._moving:
            require_camera_motion(reader)
            self._moving.add(str(reader.path))
        w2c = reader.read_cameras()[1] if src.view_selection == "nearest" else None
        frames = select_views(reader.num_frames, key.num_views, rng, src.view_selection, src.window, w2c=w2c)
        return build_sample(
            reader, frames, (key.height, key.width), rng,
            crop_scale=cfg.crop_scale if self.train else (1.0, 1.0),
            jitter=cfg.color_jitter if self.train else None,
            min_valid_fraction=cfg.min_valid_fraction_of(source),
            min_scale_ratio=cfg.min_scale_ratio, scale_reference=cfg.scale_reference, out=out,
        )

    def _attempt(self, key: SampleKey, attempt: int) -> tuple[int, int, np.random.Generator]:
        """(source, scene, rng) of draw ``attempt`` of sample ``key``: attempt 0 is the key's own
        scene, later attempts draw a scene by the source weights; ``rng`` then drives the sample."""
        rng = make_rng(key.seed, _TAG_REDRAW, attempt)
        if attempt == 0:
            return key.source, key.scene, rng
        source, scene = draw_scene(rng, self.probs, self.scene_counts)
        return source, scene, rng

    def scene_of_attempt(self, key: SampleKey | tuple, attempt: int) -> tuple[int, int]:
        """(source index, scene index) that draw ``attempt`` (0, 1, ...) of sample ``key`` reads: a
        pure function of the key, so the redraws of a run can be replayed."""
        source, scene, _ = self._attempt(SampleKey(*key), attempt)
        return source, scene

    def __getitems__(self, keys: Sequence[SampleKey | tuple]) -> list[dict]:
        """The samples of ``keys`` (torch's DataLoader fetches a batch through this). When all keys
        share (S, H, W), the samples' images and depth are written straight into one batch tensor each
        (in shared memory inside a worker), which ``collate`` then hands on without stacking: one copy
        of the largest tensors less per batch, samples equal to ``[self[k] for k in keys]``."""
        keys = [SampleKey(*k) for k in keys]
        if not keys or len({(k.num_views, k.height, k.width) for k in keys}) != 1:
            return [self[k] for k in keys]
        b, (s, h, w) = len(keys), (keys[0].num_views, keys[0].height, keys[0].width)
        images, depth = _batch_tensor((b, s, 3, h, w), torch.float32), _batch_tensor((b, s, h, w), torch.float32)
        return [self._sample(k, {"images": images[i], "depth": depth[i]}) for i, k in enumerate(keys)]

    def __getitem__(self, key: SampleKey | tuple) -> dict:
        return self._sample(SampleKey(*key))

    def _sample(self, key: SampleKey, out: dict[str, torch.Tensor] | None = None) -> dict:
        """The sample of ``key`` (class docstring), its images and depth written into ``out`` if given."""
        cfg = self.cfg
        redraws = skipped = 0
        bad_files: list[tuple[str, str]] = []
        errors = []
        for attempt in range(cfg.max_attempts):
            source, scene, rng = self._attempt(key, attempt)
            entry = self.entries[source][scene]
            try:
                sample = self._read(entry.path, self._load, source, key, rng, out)
            except SceneFileError as err:
                skipped += 1
                bad_files.append((entry.path, str(err)))
                errors.append(str(err))
                continue
            except SampleRejected as err:
                redraws += 1
                errors.append(f"{entry.path}: {err}")
                continue
            sample.update(
                dataset=cfg.sources[source].name, scene=entry.scene_id, redraws=redraws, skipped_files=skipped,
                bad_files=bad_files,
            )
            return sample
        raise NoUsableSampleError(
            f"no usable sample after {cfg.max_attempts} draws for key {tuple(key)}; the data looks broken "
            f"(run `depthpe check`). Last problems: {errors[-3:]}"
        )


class SceneEvalDataset(_SceneSource, Dataset):
    """Evaluation dataset: one item per scene with a fixed view subset, no random augmentation.

    sources: the sources to evaluate (all their scenes, in index order). views: S per scene
    (fewer if the scene is shorter). Views are ``eval_view_indices(num_frames, views, seed,
    "<source name>/<scene_id>", mode=source.view_selection, window=source.window)``; if that subset is
    degenerate or has too little valid depth, attempts 1, 2, ... give alternatives (up to
    ``max_attempts``). ``manifest`` maps "<source name>/<scene_id>" to an explicit frame list that
    is used as is (reproduce an earlier run). ``indexes``: each source's index.json entries as
    already read (``read_index``; None = read them here). Images are resized to width ``image_width``; height
    from the scene's own aspect (``aspect=None``) or from ``aspect``, with the largest crop centred
    on the principal point.

    Valid depth (``min_valid_fraction``; a source's own ``min_valid_fraction`` wins): the views
    together need that fraction of valid pixels, and an image is scored only with at least
    ``metrics.min_valid_pixels`` (the fraction of its pixels, and ``MIN_VALID_PIXELS``): the
    ``valid`` mask of a sparser image is emptied; a subset without any scored image is rejected.

    Item: the sample dict of the module docstring (redraws = alternatives tried) plus
    ``error: None``; a scene that cannot be used gives ``{"dataset", "scene", "frames": [],
    "error": message}`` instead (warned for unreadable files), so one bad scene never stops an eval.
    """

    def __init__(
        self,
        sources: Sequence[SourceConfig],
        *,
        views: int,
        seed: int = 0,
        image_width: int = 518,
        patch_size: int = 14,
        aspect: float | None = None,
        min_valid_fraction: float = MIN_VALID_FRACTION,
        min_scale_ratio: float = MIN_SCALE_RATIO,
        max_attempts: int = 8,
        manifest: dict[str, Sequence[int]] | None = None,
        reader_cache_size: int = 4,
        scale_reference: str = "others",
        indexes: Sequence[Sequence[dict]] | None = None,
    ) -> None:
        if views < 2:
            raise ValueError(f"evaluation needs at least 2 views per scene, got {views}")
        self.sources = [s if isinstance(s, SourceConfig) else SourceConfig.from_dict(s) for s in sources]
        self.views, self.seed = int(views), int(seed)
        self.image_width, self.patch_size, self.aspect = image_width, patch_size, aspect
        self.min_valid_fraction, self.min_scale_ratio = min_valid_fraction, min_scale_ratio
        self.max_attempts, self.scale_reference = max_attempts, scale_reference
        self.manifest = {k: [int(i) for i in v] for k, v in (manifest or {}).items()}
        self.items: list[tuple[int, SceneEntry]] = [
            (i, e) for i, src in enumerate(self.sources)
            for e in load_entries(src, None if indexes is None else indexes[i]) if e.num_frames >= 2
        ]
        self._init_readers(reader_cache_size)

    def __len__(self) -> int:
        return len(self.items)

    def scene_key(self, index: int) -> str:
        """Manifest key "<source name>/<scene_id>" of item ``index``."""
        src, entry = self.items[index]
        return f"{self.sources[src].name}/{entry.scene_id}"

    def output_size(self, index: int) -> tuple[int, int]:
        """(H, W) of item ``index``'s images."""
        _, e = self.items[index]
        return target_size(self.aspect or e.height / e.width, self.image_width, self.patch_size)

    def min_valid_fraction_of(self, index: int) -> float:
        """The valid-depth minimum of item ``index``: its source's ``min_valid_fraction`` if set, else
        the dataset's."""
        own = self.sources[self.items[index][0]].min_valid_fraction
        return self.min_valid_fraction if own is None else float(own)

    def view_indices(self, index: int, num_frames: int, attempt: int = 0, w2c: np.ndarray | None = None) -> list[int]:
        """Frames of item ``index`` (manifest entry, else ``eval_view_indices`` for ``attempt``);
        ``w2c`` (num_frames, 3, 4): the scene's cameras, needed by view_selection "nearest"."""
        src, key = self.sources[self.items[index][0]], self.scene_key(index)
        if key in self.manifest:
            frames = list(self.manifest[key])
            if not frames or min(frames) < 0 or max(frames) >= num_frames:
                raise SampleRejected(f"manifest frames {frames} out of range for {num_frames} frames")
            return frames
        return eval_view_indices(
            num_frames, self.views, self.seed, key, mode=src.view_selection, window=src.window, attempt=attempt,
            w2c=w2c,
        )

    def _load(self, reader: SceneReader, index: int, attempt: int) -> dict:
        src = self.sources[self.items[index][0]]
        w2c = reader.read_cameras()[1] if src.view_selection == "nearest" else None
        frames = self.view_indices(index, reader.num_frames, attempt, w2c=w2c)
        fraction = self.min_valid_fraction_of(index)
        sample = build_sample(
            reader, frames, self.output_size(index), make_rng(self.seed, _TAG_REDRAW, attempt),
            min_valid_fraction=fraction, min_scale_ratio=self.min_scale_ratio,
            scale_reference=self.scale_reference,
        )
        h, w = sample["depth"].shape[-2:]
        need = min_valid_pixels(h * w, fraction)
        scored = scored_mask(sample["depth"], sample["valid"], min_pixels=need)
        if not scored.any():
            raise SampleRejected(f"too little valid depth: no view has the {need} valid pixels an image needs "
                                 f"to be scored ({fraction:g} of {h}x{w}, at least {MIN_VALID_PIXELS})")
        sample["valid"] = torch.from_numpy(scored)
        return sample

    def __getitem__(self, index: int) -> dict:
        src_idx, entry = self.items[index]
        src = self.sources[src_idx]
        fixed = self.scene_key(index) in self.manifest
        base = {"dataset": src.name, "scene": entry.scene_id}
        problems = []
        for attempt in range(1 if fixed else self.max_attempts):
            try:
                sample = self._read(entry.path, self._load, index, attempt)
            except SceneFileError as err:
                return {**base, "frames": [], "error": f"unusable scene file: {err}"}
            except SampleRejected as err:
                problems.append(str(err))
                continue
            return {**sample, **base, "redraws": attempt, "skipped_files": 0, "bad_files": [], "error": None}
        return {**base, "frames": [], "error": f"no usable view subset: {problems[-1]}"}


def collate(samples: Sequence[dict]) -> dict:
    """Stack samples sharing (S, H, W) into a batch.

    Returns images (B, S, 3, H, W) float32, depth (B, S, H, W) float32, valid (B, S, H, W) bool,
    K (B, S, 3, 3) float32, w2c (B, S, 4, 4) float32, frames (B, S) int64, scale (B,) float32,
    dataset / scene: lists of B str, redraws / skipped_files: int sums over the batch, bad_files:
    the samples' (path, reason) lists concatenated.
    """
    if not samples:
        raise ValueError("cannot collate an empty batch")
    shapes = {tuple(s["images"].shape) for s in samples}
    if len(shapes) != 1:
        raise ValueError(f"all samples of a batch must share (S, 3, H, W); got shapes {sorted(shapes)}")
    out = {k: _stack([s[k] for s in samples]) for k in _TENSOR_KEYS}
    out["scale"] = torch.tensor([s["scale"] for s in samples], dtype=torch.float32)
    out["dataset"] = [s["dataset"] for s in samples]
    out["scene"] = [s["scene"] for s in samples]
    out["redraws"] = int(sum(s["redraws"] for s in samples))
    out["skipped_files"] = int(sum(s["skipped_files"] for s in samples))
    out["bad_files"] = [b for s in samples for b in s.get("bad_files", ())]
    return out


def _batch_tensor(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialized contiguous tensor of ``shape``; inside a DataLoader worker in shared memory
    (as torch's ``default_collate`` allocates), so that sending the batch to the main process copies
    nothing (pickling would copy it into shared memory: about 1.4 ms per 518-px image)."""
    if torch.utils.data.get_worker_info() is None:
        return torch.empty(shape, dtype=dtype)
    numel = int(np.prod(shape))
    storage = torch.UntypedStorage._new_shared(numel * torch.empty((), dtype=dtype).element_size())
    return torch.empty(0, dtype=dtype).set_(storage).view(shape)


def _stack(tensors: list[torch.Tensor]) -> torch.Tensor:
    """``torch.stack(tensors)`` into a ``_batch_tensor``; when the B > 1 tensors already are the
    consecutive slices [0], [1], ... of one whole batch tensor (``MultiViewDataset.__getitems__``),
    that tensor itself, without a copy."""
    first = tensors[0]
    if len(tensors) > 1 and _slices_of_one_tensor(tensors):
        return first.new_empty(0).set_(first.untyped_storage()).view(len(tensors), *first.shape)
    return torch.stack(tensors, out=_batch_tensor((len(tensors), *first.shape), first.dtype))


def _slices_of_one_tensor(tensors: list[torch.Tensor]) -> bool:
    """Whether ``tensors`` (equal shapes and dtypes) are the contiguous slices 0..B-1, in order, of one
    storage that holds exactly them."""
    first = tensors[0]
    storage, n = first.untyped_storage(), first.numel()
    if storage.nbytes() != len(tensors) * n * first.element_size():
        return False
    return all(t.untyped_storage().data_ptr() == storage.data_ptr() and t.storage_offset() == i * n
               and t.is_contiguous() and t.shape == first.shape and t.dtype == first.dtype
               for i, t in enumerate(tensors))


def collate_eval(samples: Sequence[dict]) -> dict:
    """Collate for ``SceneEvalDataset`` with batch size 1: the ``collate`` batch (B = 1) plus
    ``error: None``, or the item itself (``error`` set, no tensors) for an unusable scene."""
    if len(samples) != 1:
        raise ValueError("evaluation batches hold one scene (batch_size=1)")
    item = samples[0]
    if item["error"] is not None:
        return dict(item)
    return {**collate(samples), "error": None}


def loader_kwargs(num_workers: int, pin_memory: bool = False, prefetch_factor: int | None = 2) -> dict:
    """DataLoader keyword arguments shared by the builders: workers, pinning, ``worker_init_fn``,
    and persistent workers + prefetch when ``num_workers`` > 0. (``_loader_kwargs`` is an alias.)"""
    kw = {"num_workers": num_workers, "pin_memory": pin_memory, "worker_init_fn": worker_init_fn}
    if num_workers > 0:
        kw.update(persistent_workers=True, prefetch_factor=prefetch_factor or 2)
    return kw


_loader_kwargs = loader_kwargs


def build_train_loader(
    data_cfg: DataConfig,
    *,
    seed: int,
    rank: int = 0,
    world_size: int = 1,
    start_step: int = 0,
    num_workers: int = 4,
    num_steps: int | None = None,
    pin_memory: bool = False,
    prefetch_factor: int | None = 2,
    grad_accum: int = 1,
) -> DataLoader:
    """Training DataLoader: ``MultiViewDataset`` + ``DynamicBatchSampler`` + ``collate``.

    The iterator yields ``grad_accum`` micro-batches per optimizer step, starting at optimizer step
    ``start_step`` (so resume passes the next step); infinite unless ``num_steps`` (exclusive end
    step). Each process passes its own ``rank``; all processes must pass the same ``seed``, config
    and ``grad_accum``: together they draw one global batch per step (see ``depthpe.data.sampling``).
    Persistent workers when num_workers > 0. Do not wrap it with ``accelerator.prepare`` (it is
    already sharded by rank).
    """
    dataset = MultiViewDataset(data_cfg, train=True)
    sampler = DynamicBatchSampler(
        data_cfg, dataset.scene_counts, seed=seed, rank=rank, world_size=world_size,
        start_step=start_step, num_steps=num_steps, grad_accum=grad_accum,
    )
    return DataLoader(
        dataset, batch_sampler=sampler, collate_fn=collate,
        **loader_kwargs(num_workers, pin_memory, prefetch_factor),
    )


def build_eval_loader(
    sources: Sequence[SourceConfig],
    *,
    views: int,
    seed: int = 0,
    num_workers: int = 2,
    rank: int = 0,
    world_size: int = 1,
    **dataset_kwargs,
) -> DataLoader:
    """Finite evaluation DataLoader over ``SceneEvalDataset(sources, views=, seed=, **dataset_kwargs)``
    yielding ``collate_eval`` batches (one scene each). With ``world_size`` > 1 the scenes are split
    round-robin by rank (scene i goes to rank i % world_size). The dataset is ``loader.dataset``.
    """
    dataset = SceneEvalDataset(sources, views=views, seed=seed, **dataset_kwargs)
    indices = list(range(rank, len(dataset), world_size))
    kw = loader_kwargs(num_workers, False, 2)
    kw["persistent_workers"] = False
    return DataLoader(dataset, batch_size=1, sampler=indices, collate_fn=collate_eval, **kw)
