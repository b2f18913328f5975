"""Shared machinery of the dataset converters: frames, resizing, splits, the parallel runner, summary.

A converter module (``depthpe.data.convert.<dataset>``) reads one native dataset layout and exposes

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
"""

from __future__ import annotations

import importlib
import json
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import cv2
import numpy as np

from ...files import atomic_write_bytes
from ..format.image_bytes import ImageBytesError, decode_image_bytes, decode_rgb, orientation_notes
from ..format.scene_file import index_entry, read_attrs, write_index, write_scene
from ..format.limits import camera_problems
from .options import CONVERTER_VERSION, ConvertOptions, resolve_workers

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

BLANK_IMAGE_MAX = 2  # an image whose brightest pixel is <= this is "blacked out" (CO3D test targets)


class ConvertError(Exception):
    """The raw dataset cannot be converted as a whole (wrong --src layout, unreadable split file)."""


class SceneSkipped(Exception):
    """A whole scene is unusable (e.g. a known-bad scene); ``reason`` is reported in the summary."""


class FrameDropped(Exception):
    """A frame is unusable; ``reason`` is a short stable text used to count drops in the summary."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class SceneRef:
    """One scene of a raw dataset: output ``scene_id`` (a file-name-safe string), its source folder
    ``path``, the ``split`` fixed by the dataset (official folds) or None, and converter ``meta``."""

    scene_id: str
    path: str
    split: str | None = None
    meta: dict = field(default_factory=dict)


@dataclass
class RawFrame:
    """One frame as read from the raw dataset, before resizing.

    image: (H, W, 3) uint8 RGB; depth: (H, W) float32 z-depth in the dataset's units, 0 = invalid
    (finite, >= 0); K: (3, 3) OpenCV pixel intrinsics of this image (pixel centres at integers);
    w2c: (3, 4) OpenCV world-to-camera; name: source frame name; exif_orientation: the EXIF
    orientation tag of the image file that was not applied (1 = none; ``read_rgb_image``), counted
    in the summary.
    """

    image: np.ndarray
    depth: np.ndarray
    K: np.ndarray
    w2c: np.ndarray
    name: str
    exif_orientation: int = 1


@dataclass
class SceneSource:
    """A parsed scene: ``frames`` (frame keys, temporal order), ``load(key) -> RawFrame`` (raises
    ``FrameDropped``), ``dropped`` (frames already dropped while parsing, by reason)."""

    frames: list
    load: Callable[[Any], RawFrame]
    dropped: Counter = field(default_factory=Counter)


# --------------------------------------------------------------------------------------------
# Image helpers
# --------------------------------------------------------------------------------------------


def _decode_file(path: str | os.PathLike, decode: Callable[[np.ndarray], Any], what: str):
    """``decode(bytes of path)``, its failures raised as ``FrameDropped`` (reasons: ``read_image_file``)."""
    try:
        data = np.fromfile(str(path), dtype=np.uint8)
    except OSError as err:
        raise FrameDropped(f"unreadable {what}") from err
    try:
        return decode(data)
    except ImageBytesError as err:
        reason = {"truncated": f"truncated or corrupt {what}", "corrupt": f"truncated or corrupt {what}",
                  "size": f"{what} too large"}.get(err.kind, f"unreadable {what}")
        raise FrameDropped(reason) from err
    except ValueError as err:
        raise FrameDropped(f"unreadable {what}") from err


def read_image_file(path: str | os.PathLike, flags: int, what: str = "image") -> np.ndarray:
    """Read and strictly decode an image file with ``cv2.imdecode(flags)`` (OpenCV channel order;
    the stored pixel grid, EXIF orientation not applied: ``image_bytes``).

    Raises ``FrameDropped`` with reason ``"unreadable <what>"`` (missing file, not a JPEG/PNG, not
    decodable), ``"truncated or corrupt <what>"`` (a JPEG without its end marker, a PNG cut off or
    with a bad CRC: OpenCV alone would decode these with a grey lower part) or ``"<what> too
    large"`` (larger than ``MAX_FRAME_SIDE``, refused before decoding).
    """
    return _decode_file(path, lambda data: decode_image_bytes(data, flags), what)


def read_rgb_image(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """Read a colour image file -> ((H, W, 3) uint8 RGB in its stored pixel grid, the EXIF
    orientation tag that was not applied, 1 = none): ``image_bytes.decode_rgb``, the one reader of
    users' images. Raises ``FrameDropped`` like ``read_image_file``."""
    return _decode_file(path, decode_rgb, "image")


def read_rgb(path: str | os.PathLike) -> np.ndarray:
    """Read an 8-bit colour image file as (H, W, 3) uint8 RGB in its stored pixel grid; an alpha
    channel is discarded. Raises ``FrameDropped`` (``read_image_file``) if the file is missing, not
    an image, truncated or corrupt."""
    return read_rgb_image(path)[0]


def read_uint16(path: str | os.PathLike) -> np.ndarray:
    """Read a single-channel 16-bit PNG unchanged -> (H, W) uint16 (the default imread flag would
    silently convert to 8 bit). Raises ``FrameDropped`` ("unreadable depth", "truncated or corrupt
    depth") on failure."""
    arr = read_image_file(path, cv2.IMREAD_UNCHANGED, "depth")
    if arr.dtype != np.uint16 or arr.ndim != 2:
        raise FrameDropped("unreadable depth")
    return arr


def fit_size(height: int, width: int, max_side: int) -> tuple[int, int]:
    """(height, width) scaled so that the longer side is at most ``max_side`` (never enlarged),
    rounded to whole pixels."""
    longest = max(height, width)
    if longest <= max_side:
        return height, width
    s = max_side / longest
    return max(1, int(round(height * s))), max(1, int(round(width * s)))


def scale_intrinsics(K: np.ndarray, sx: float, sy: float) -> np.ndarray:
    """(3, 3) OpenCV pixel intrinsics after resizing the image by (sx, sy) (geometry.resize_intrinsics,
    pixel-centre exact: cx' = sx (cx + 0.5) - 0.5) -> (3, 3) float64."""
    import torch

    from ...geometry import resize_intrinsics

    return resize_intrinsics(torch.from_numpy(np.asarray(K, np.float64)), sx, sy).numpy()


def match_size(depth: np.ndarray, height: int, width: int) -> np.ndarray:
    """Nearest-neighbour resample (``cv2.INTER_NEAREST_EXACT``) of a depth or mask map (h, w) to
    (height, width); a no-op if the size already matches. Never interpolates across depth edges."""
    if depth.shape[:2] == (height, width):
        return depth
    return cv2.resize(depth, (width, height), interpolation=cv2.INTER_NEAREST_EXACT)


def resize_frame(
    image: np.ndarray, depth: np.ndarray, K: np.ndarray, height: int, width: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Resize one frame to (height, width) with exact intrinsics.

    image: (H, W, 3) uint8 (INTER_AREA when shrinking, INTER_CUBIC when enlarging); depth: (H, W)
    z-depth (INTER_NEAREST_EXACT, so no value is ever interpolated); K: (3, 3) OpenCV pixel
    intrinsics, updated with sx = width / W, sy = height / H as
    ``fx' = sx fx, cx' = sx (cx + 0.5) - 0.5`` (geometry.resize_intrinsics).
    Returns (image (height, width, 3), depth (height, width), K (3, 3) float64).
    """
    H, W = depth.shape
    if image.shape[:2] != (H, W):
        raise ValueError(f"image {image.shape[:2]} and depth {(H, W)} differ in size")
    if (H, W) == (height, width):
        return image, depth, np.asarray(K, np.float64)
    shrink = height * width < H * W
    image = cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_CUBIC)
    depth = match_size(depth, height, width)
    return image, depth, scale_intrinsics(K, width / W, height / H)


def rotation_ok(w2c: np.ndarray, atol: float = 1e-3) -> bool:
    """True if ``w2c`` (3, 4) is finite and its 3x3 block is orthonormal with det +1 (within atol)."""
    w2c = np.asarray(w2c, np.float64)
    if w2c.shape != (3, 4) or not np.isfinite(w2c).all():
        return False
    R = w2c[:, :3]
    return bool(np.abs(R @ R.T - np.eye(3)).max() <= atol and abs(np.linalg.det(R) - 1) <= atol)


def find_dirs_with(root: str | os.PathLike, filename: str, max_depth: int = 6) -> list[Path]:
    """Folders at most ``max_depth`` levels below ``root`` (root included) that contain ``filename``,
    sorted. A folder holding the file is not searched further, so the (huge) frame folders inside a
    scene are never listed."""
    found, stack = [], [(Path(root), 0)]
    while stack:
        folder, depth = stack.pop()
        if (folder / filename).is_file():
            found.append(folder)
            continue
        if depth >= max_depth:
            continue
        try:
            with os.scandir(folder) as it:
                stack.extend((Path(e.path), depth + 1) for e in it if e.is_dir(follow_symlinks=True))
        except OSError:
            continue
    return sorted(found)


# --------------------------------------------------------------------------------------------
# Splits
# --------------------------------------------------------------------------------------------

SPLIT_FILE = "split.json"
SUMMARY_FILE = "convert_summary.json"


def random_val_split(scene_ids: Iterable[str], val_scenes: int, seed: int) -> dict[str, str]:
    """Seeded random split: ``val_scenes`` scenes (at most half of them) are "val", the rest "train".

    The draw depends only on the sorted scene ids and ``seed``, so it is reproducible. Returns
    ``{scene_id: split}``.
    """
    ids = sorted(set(scene_ids))
    n_val = min(int(val_scenes), len(ids) // 2)
    rng = np.random.default_rng(int(seed))
    val = {ids[i] for i in rng.choice(len(ids), size=n_val, replace=False)} if n_val else set()
    return {s: ("val" if s in val else "train") for s in ids}


def load_or_create_split(
    dataset_dir: Path, refs: list[SceneRef], rule: str, options: ConvertOptions
) -> tuple[dict[str, str], dict]:
    """The split of every scene, from ``dataset_dir/split.json`` if it exists, else made by ``rule``
    and written there. Scenes missing from an existing file (a larger download) are assigned by
    their official split (rule "official") or to train, and the file is updated.

    Under rule "official" a scene without an official split is left out of the assignment.
    Returns ``({scene_id: split}, info)`` with info = {"file", "created", "added"}.
    """
    path = dataset_dir / SPLIT_FILE
    ids = [r.scene_id for r in refs]
    info = {"file": str(path), "created": False, "added": 0}
    if path.is_file():
        try:
            doc = json.loads(path.read_text())
            assignment = {s: split for split, members in doc["splits"].items() for s in members}
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise ConvertError(
                f"{path}: malformed split file ({err!r}); fix or delete it to draw a new split"
            ) from err
    else:
        doc = {"format": "depthpe-split", "rule": rule, "seed": options.split_seed,
               "val_scenes": options.val_scenes}
        if rule == "random":
            assignment = random_val_split(ids, options.val_scenes, options.split_seed)
        elif rule == "official":
            assignment = {r.scene_id: r.split for r in refs if r.split}
        elif rule == "train":
            assignment = {s: "train" for s in ids}
        else:
            raise ValueError(f"unknown split rule {rule!r}")
        info["created"] = True
    for r in refs:
        if r.scene_id not in assignment:
            if rule == "official" and not r.split:
                continue  # not in the official split: reported as skipped, never assigned
            assignment[r.scene_id] = r.split if rule == "official" else "train"
            info["added"] += 1
    if info["created"] or info["added"]:
        splits: dict[str, list[str]] = {}
        for s, split in sorted(assignment.items()):
            splits.setdefault(split, []).append(s)
        doc["splits"] = splits
        doc["dataset"] = dataset_dir.name
        atomic_write_bytes(path, json.dumps(doc, indent=1).encode())
    return assignment, info


# --------------------------------------------------------------------------------------------
# One scene
# --------------------------------------------------------------------------------------------


def _existing_entry(path: Path, settings: str, min_frames: int) -> dict | None:
    """Index entry of a finished scene file written with the same settings, else None."""
    attrs = read_attrs(path)
    if attrs is None:
        return None
    if attrs.get("convert_settings") != settings or attrs["num_frames"] < min_frames:
        return None
    return index_entry(path.name, attrs)


def _same_aspect(a: tuple[int, int], b: tuple[int, int], tolerance: float = 0.02) -> bool:
    """True if the (H, W) sizes ``a`` and ``b`` have the same aspect ratio within ``tolerance``
    (relative difference of the two scale factors)."""
    sy, sx = b[0] / a[0], b[1] / a[1]
    return abs(sx - sy) <= tolerance * max(sx, sy)


def _prepare_frame(raw: RawFrame, target: tuple[int, int] | None, options: ConvertOptions):
    """Validate, resize and filter one raw frame -> (image, depth, K, w2c); raises FrameDropped."""
    image, depth = np.asarray(raw.image), np.asarray(raw.depth, np.float32)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise FrameDropped("bad image format")
    if image.shape[:2] != depth.shape:
        if not _same_aspect(image.shape[:2], depth.shape):  # e.g. depth in a rotated grid: never stretch it
            raise FrameDropped("depth map aspect differs from the image")
        depth = match_size(depth, *image.shape[:2])
    if int(image.max(initial=0)) <= BLANK_IMAGE_MAX:
        raise FrameDropped("blank image")
    K = np.asarray(raw.K, np.float64)
    w2c = np.asarray(raw.w2c, np.float64)[:3]
    if not np.isfinite(K).all() or K[0, 0] <= 0 or K[1, 1] <= 0:
        raise FrameDropped("invalid intrinsics")
    if not rotation_ok(w2c):
        raise FrameDropped("invalid pose")
    depth = np.where(np.isfinite(depth) & (depth > 0), depth, 0).astype(np.float32)
    H, W = depth.shape
    if camera_problems(K[None], w2c[None], H, W):  # principal point far off, K's last row
        raise FrameDropped("invalid intrinsics")
    if target is None:
        target = fit_size(H, W, options.max_side)
    elif not _same_aspect((H, W), target):
        raise FrameDropped("image aspect differs from the scene's first frame")
    image, depth, K = resize_frame(image, depth, K, *target)
    if float((depth > 0).mean()) < options.min_valid_fraction:
        raise FrameDropped("too little valid depth")
    return image, depth, K, w2c


def convert_scene(
    module_name: str, ref: SceneRef, split: str, split_dir: str | os.PathLike, options: ConvertOptions
) -> dict:
    """Convert one scene to ``split_dir/<scene_id>.h5``; never raises for a bad scene.

    Returns a result dict: scene_id, split, status ("written", "existing" = finished by an earlier
    run with the same settings, or "skipped"), entry (index entry or None), frames (written or
    existing), dropped ({reason: frames}), reason (why a scene was skipped), seconds.
    """
    t0 = time.perf_counter()
    cv2.setNumThreads(1)
    module = importlib.import_module(module_name)
    path = Path(split_dir) / f"{ref.scene_id}.h5"
    settings = json.dumps(options.content_settings(), sort_keys=True)
    result = _skipped_result(ref.scene_id, split)
    entry = _existing_entry(path, settings, options.min_frames)
    if entry is not None:
        result.update(status="existing", entry=entry, frames=entry["num_frames"])
        result["seconds"] = time.perf_counter() - t0
        return result
    dropped: Counter = Counter()
    orientations: list[int] = []
    try:
        source = module.open_scene(ref, options)
        dropped.update(source.dropped)
        images, depths, Ks, w2cs, names = _load_frames(source, options, dropped, orientations)
        if len(images) < options.min_frames:
            result["reason"] = f"only {len(images)} usable frame(s) (minimum {options.min_frames})"
            result["kind"] = "too few usable frames"
            if path.exists():  # a stale file of an earlier run would no longer be listed
                path.unlink()
        else:
            entry = write_scene(
                path,
                images=images,
                depth=np.stack(depths),
                K=np.stack(Ks),
                w2c=np.stack(w2cs),
                dataset=module.NAME,
                scene_id=ref.scene_id,
                split=split,
                metric=_units(module, options)[0],
                depth_units=_units(module, options)[1],
                source=module.SOURCE,
                frame_names=names,
                jpeg_quality=options.jpeg_quality,
                depth_dtype=options.depth_dtype,
                depth_compression=options.depth_compression,
                extra_attrs={"convert_settings": settings, "frames_dropped": json.dumps(dict(dropped))},
            )
            result.update(status="written", entry=entry, frames=len(images))
    except SceneSkipped as err:
        result["reason"] = result["kind"] = str(err)
    except Exception as err:  # noqa: BLE001 - one bad scene must never stop a conversion
        result["reason"] = f"error: {type(err).__name__}: {err}"
        result["kind"] = f"error: {type(err).__name__}"
    result["dropped"] = dict(dropped)
    result["exif_orientation_ignored"] = sum(o != 1 for o in orientations)
    result["seconds"] = time.perf_counter() - t0
    return result


def _units(module, options: ConvertOptions) -> tuple[bool, str]:
    """(metric, depth_units) of the scenes a converter writes: ``module.units(options)`` where the
    converter defines it (own captures: the user says), else ``module.METRIC``, ``module.DEPTH_UNITS``."""
    if hasattr(module, "units"):
        return module.units(options)
    return module.METRIC, module.DEPTH_UNITS


def _skipped_result(scene_id: str, split: str, reason: str = "", kind: str = "") -> dict:
    """A ``convert_scene`` result for a scene that is not (or not yet) converted."""
    return {"scene_id": scene_id, "split": split, "status": "skipped", "entry": None, "frames": 0,
            "dropped": {}, "exif_orientation_ignored": 0, "reason": reason, "kind": kind, "seconds": 0.0}


def _load_frames(source, options: ConvertOptions, dropped: Counter,
                 orientations: list) -> tuple[list, list, list, list, list]:
    """Load and prepare every ``options.frame_stride``-th frame of an opened scene ->
    ``(images, depths, Ks, w2cs, names)`` of the kept frames; dropped frames are counted in
    ``dropped`` by reason, the EXIF orientation tag of every frame read is appended to
    ``orientations``. The first kept frame fixes the size of the others."""
    images, depths, Ks, w2cs, names = [], [], [], [], []
    target = None
    for key in list(source.frames)[:: options.frame_stride]:
        try:
            raw = source.load(key)
            orientations.append(raw.exif_orientation)
            image, depth, K, w2c = _prepare_frame(raw, target, options)
        except FrameDropped as drop:
            dropped[drop.reason] += 1
            continue
        target = depth.shape
        images.append(image)
        depths.append(depth)
        Ks.append(K)
        w2cs.append(w2c)
        names.append(raw.name)
    return images, depths, Ks, w2cs, names


def _convert_job(job: tuple) -> dict:
    return convert_scene(*job)


# --------------------------------------------------------------------------------------------
# Whole dataset
# --------------------------------------------------------------------------------------------


def convert_dataset(module_name: str, src: str | os.PathLike, out: str | os.PathLike,
                    options: ConvertOptions | None = None) -> dict:
    """Convert a raw dataset into ``out/<NAME>/<split>/*.h5`` plus ``index.json`` per split.

    module_name: a converter module (``depthpe.data.convert.co3d`` ...). The split comes from
    ``out/<NAME>/split.json`` if present (else it is drawn and written). Scenes finished by an earlier
    run with the same settings are kept, so an interrupted run resumes. Each ``index.json`` lists every
    finished scene file of its split (also those outside ``options.limit``). The summary (also saved
    to ``out/<NAME>/convert_summary.json``) has scene and frame counts, skipped scenes with reasons,
    dropped frames by reason, wall time and throughput.
    """
    options = options or ConvertOptions()
    module = importlib.import_module(module_name)
    src, out = Path(src), Path(out)
    if not src.exists():
        raise ConvertError(f"--src {src} does not exist")
    t0 = time.perf_counter()
    refs = _list_scene_refs(module, src, options)
    dataset_dir = out / module.NAME
    dataset_dir.mkdir(parents=True, exist_ok=True)
    assignment, split_info = load_or_create_split(dataset_dir, refs, module.SPLIT_RULE, options)
    unassigned = [r for r in refs if r.scene_id not in assignment]
    refs = [r for r in refs if r.scene_id in assignment]
    jobs_refs = refs if options.limit is None else refs[: options.limit]
    jobs = [(module_name, r, assignment[r.scene_id], str(dataset_dir / assignment[r.scene_id]), options)
            for r in jobs_refs]

    results = [_skipped_result(r.scene_id, "", "not in the official split", "not in the official split")
               for r in unassigned]
    _run_jobs(jobs, options, module.NAME, results)
    entries = _write_indexes(dataset_dir, module.NAME, results, refs[len(jobs_refs):], assignment, options)
    wall = time.perf_counter() - t0
    summary = _summarize(module, src, out, options, refs + unassigned, results, entries, split_info, wall)
    atomic_write_bytes(dataset_dir / SUMMARY_FILE, json.dumps(summary, indent=1).encode())
    return summary


def _list_scene_refs(module, src: Path, options: ConvertOptions) -> list[SceneRef]:
    """The converter's scenes under ``src``, sorted by id; raises ConvertError for duplicate ids or
    when there are none."""
    refs = sorted(module.list_scenes(src, options), key=lambda r: r.scene_id)
    ids = [r.scene_id for r in refs]
    if len(set(ids)) != len(ids):
        dup = sorted({s for s in ids if ids.count(s) > 1})[:3]
        raise ConvertError(f"{src}: duplicate scene ids {dup}; the download holds a scene twice")
    if not refs:
        raise ConvertError(
            f"{src}: no {module.NAME} scenes found; --src must be the root of the raw download "
            f"({module.LAYOUT_HINT})"
        )
    return refs


def _run_jobs(jobs: list[tuple], options: ConvertOptions, name: str, results: list[dict]) -> None:
    """Run ``convert_scene`` on every job (in ``options.workers`` spawned processes if more than one),
    appending each result to ``results`` as it finishes; shows a progress bar if ``options.progress``."""
    pool = None
    workers = resolve_workers(options.workers)
    if workers > 1 and len(jobs) > 1:
        import multiprocessing as mp

        pool = mp.get_context("spawn").Pool(min(workers, len(jobs)))
    try:
        it = pool.imap_unordered(_convert_job, jobs) if pool else map(_convert_job, jobs)
        bar = None
        if options.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(jobs), desc=f"convert {name}", unit="scene")
        frames_done = 0
        for res in it:
            results.append(res)
            frames_done += res["frames"] if res["status"] == "written" else 0
            if bar is not None:
                bar.update(1)
                bar.set_postfix(frames=frames_done, skipped=sum(r["status"] == "skipped" for r in results))
        if bar is not None:
            bar.close()
    finally:
        if pool is not None:
            pool.close()
            pool.join()


def _write_indexes(dataset_dir: Path, name: str, results: list[dict], later_refs: list[SceneRef],
                   assignment: dict[str, str], options: ConvertOptions) -> dict[str, list[dict]]:
    """Write ``index.json`` of every split folder that has finished scenes or exists: the scenes of
    this run plus those of ``later_refs`` (outside --limit) finished by earlier runs with the same
    settings. Returns ``{split: entries}``."""
    settings = json.dumps(options.content_settings(), sort_keys=True)
    entries: dict[str, list[dict]] = {}
    for res in results:
        if res["entry"] is not None:
            entries.setdefault(res["split"], []).append(res["entry"])
    for r in later_refs:
        split = assignment[r.scene_id]
        entry = _existing_entry(dataset_dir / split / f"{r.scene_id}.h5", settings, options.min_frames)
        if entry is not None:
            entries.setdefault(split, []).append(entry)
    for split in sorted(set(assignment.values())):
        split_dir = dataset_dir / split
        if entries.get(split) or split_dir.is_dir():
            write_index(split_dir, entries.get(split, []), dataset=name, split=split)
    return entries


def _summarize(module, src, out, options, refs, results, entries, split_info, wall) -> dict:
    dropped: Counter = Counter()
    skip_reasons: Counter = Counter()
    written = [r for r in results if r["status"] == "written"]
    for r in results:
        dropped.update(r["dropped"] if r["status"] != "existing" else {})
        if r["status"] == "skipped":
            skip_reasons[r["kind"]] += 1
    frames_written = sum(r["frames"] for r in written)
    busy = sum(r["seconds"] for r in written)
    opts = asdict(options)
    return {
        "dataset": module.NAME,
        "src": str(src),
        "out": str(Path(out) / module.NAME),
        "options": opts,
        "scenes_found": len(refs),
        "scenes_processed": len(results),
        "scenes_written": len(written),
        "scenes_existing": sum(r["status"] == "existing" for r in results),
        "scenes_skipped": sum(r["status"] == "skipped" for r in results),
        "skip_reasons": dict(skip_reasons),
        "skipped": [{"scene_id": r["scene_id"], "reason": r["reason"]} for r in results
                    if r["status"] == "skipped"],
        "frames_written": frames_written,
        "frames_dropped": dict(dropped),
        "exif_orientation_ignored": sum(r.get("exif_orientation_ignored", 0) for r in results),
        "splits": {s: {"scenes": len(e), "frames": sum(x["num_frames"] for x in e)}
                   for s, e in sorted(entries.items())},
        "split_file": split_info,
        "wall_s": wall,
        "frames_per_s": frames_written / wall if wall > 0 else 0.0,
        "frames_per_s_per_worker": frames_written / busy if busy > 0 else 0.0,
    }


def format_summary(summary: dict) -> str:
    """Human-readable multi-line summary of ``convert_dataset``'s result."""
    lines = [
        f"{summary['dataset']}: {summary['scenes_found']} scenes found, {summary['scenes_processed']} processed: "
        f"{summary['scenes_written']} written, {summary['scenes_existing']} already done, "
        f"{summary['scenes_skipped']} skipped",
        f"frames written: {summary['frames_written']}; dropped: "
        + (", ".join(f"{k} {v}" for k, v in sorted(summary["frames_dropped"].items())) or "none"),
    ]
    lines += [f"note: {line}" for line in orientation_notes(summary.get("exif_orientation_ignored", 0))]
    for split, st in summary["splits"].items():
        lines.append(f"  {split}: {st['scenes']} scenes, {st['frames']} frames in index "
                     f"-> {summary['out']}/{split}")
    for item in summary["skipped"][:20]:
        lines.append(f"  skipped {item['scene_id']}: {item['reason']}")
    if len(summary["skipped"]) > 20:
        lines.append(f"  ... {len(summary['skipped']) - 20} more skipped scenes in {SUMMARY_FILE}")
    lines.append(
        f"time {summary['wall_s']:.1f} s, {summary['frames_per_s']:.1f} frames/s "
        f"({summary['frames_per_s_per_worker']:.1f} frames/s per worker); split: {summary['split_file']['file']}"
    )
    return "\n".join(lines)
