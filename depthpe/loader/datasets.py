"""The multi-view datasets over scene files: ``MultiViewDataset`` (training, indexed by
``SampleKey``) and ``SceneEvalDataset`` (evaluation, one item per scene). Their items are the
sample dicts of ``depthpe.loader.samples``.

An *unusable scene file* is one that is listed in index.json but is missing, cannot be opened or
read (corrupt, truncated, a truncated or corrupt image of a frame the sample reads), claims a
shape beyond the format's limits, breaks the format (``SceneFileError``), holds an invalid camera
anywhere in the scene (NaN/inf, non-positive focal length, non-orthonormal rotation, principal
point far outside the image: checked when the file is opened, ``validation.camera_problems``),
NaN/inf depth in a frame the sample reads (``SceneReader(strict=True)``), or, for training, whose
frames are smaller than ``MIN_FRAME_SIDE`` pixels (``require_frame_size``, the rule of ``depthpe
check``) or whose camera centres all coincide (a pure rotation: no view pair has a baseline,
``require_camera_motion``). Such a draw is skipped, warned about (``SceneSkippedWarning``, once per
file and process) and replaced by another scene, so no NaN or inf from a file ever reaches a batch;
the file is remembered as bad by the process and every later draw of it is skipped without reading
it again.

Scene files are opened lazily inside ``__getitem__`` (in DataLoader workers), never at construction:
datasets are built from ``index.json`` files only and keep a small per-process LRU of ``SceneReader``
that is dropped when the process id changes (after a fork) and not pickled (spawn)
(``depthpe.loader.scenes.ReaderCache``).
"""

from __future__ import annotations

import os
import warnings
from typing import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from depthpe.loader.batching import batch_tensor
from depthpe.loader.config import MIN_SCALE_RATIO, DataConfig, SourceConfig
from depthpe.scenes.api import SceneFileError, SceneReader
from depthpe.loader.samples import SampleRejected, build_sample
from depthpe.loader.sampling import (
    SampleKey,
    draw_scene,
    eval_view_indices,
    make_rng,
    normalized_weights,
    select_views,
    target_size,
)
from depthpe.loader.scenes import (
    MIN_TRAIN_FRAMES,
    ReaderCache,
    SceneEntry,
    load_entries,
    require_camera_motion,
    require_frame_size,
    too_few_frames_problem,
)
from depthpe.geometry import perturb_cameras
from depthpe.metrics import MIN_VALID_FRACTION, MIN_VALID_PIXELS, min_valid_pixels, scored_mask

__all__ = ["SceneSkippedWarning", "NoUsableSampleError", "MultiViewDataset", "SceneEvalDataset"]

_TAG_REDRAW = 0x52454452
_TAG_CAMERA_NOISE = 0x43414d4e  # the stream of data.camera_noise: the other draws never see it


class SceneSkippedWarning(UserWarning):
    """A scene file could not be read and was skipped (the sample was drawn again elsewhere)."""


class NoUsableSampleError(RuntimeError):
    """Every draw of a training sample hit an unreadable file or an unusable view subset: the data
    (or the sampling settings) are broken, not one scene. The message is one line."""


class _SceneSource:
    """Shared reader handling of the training and evaluation datasets."""

    def _init_readers(self, size: int) -> None:
        self._cache = ReaderCache(size)
        self._bad: dict[str, str] = {}
        self._bad_pid: int | None = None

    def close_files(self) -> None:
        """Close the scene files this process has open (reopened if the dataset is read again)."""
        self._cache.close()

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
        self._moving: set[str] = set()  # files found large enough, with moving cameras (require_*)

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
            require_frame_size(reader)
            require_camera_motion(reader)
            self._moving.add(str(reader.path))
        w2c = reader.read_cameras()[1] if src.view_selection == "nearest" else None
        frames = select_views(reader.num_frames, key.num_views, rng, src.view_selection, src.window, w2c=w2c)
        sample = build_sample(
            reader, frames, (key.height, key.width), rng,
            crop_scale=cfg.crop_scale if self.train else (1.0, 1.0),
            jitter=cfg.color_jitter if self.train else None,
            min_valid_fraction=cfg.min_valid_fraction_of(source),
            min_scale_ratio=cfg.min_scale_ratio, scale_reference=cfg.scale_reference, out=out,
        )
        return self._noisy_cameras(sample, key, rng) if self.train else sample

    def _noisy_cameras(self, sample: dict, key: SampleKey, rng: np.random.Generator) -> dict:
        """``sample`` with its K and w2c perturbed as ``data.camera_noise`` says (the sample itself when
        it is off); the draw comes from the sample's own stream (``_TAG_CAMERA_NOISE``, seeded from
        ``rng``'s state without drawing from it), so every other draw of the run is unchanged."""
        noise = self.cfg.camera_noise
        if noise.is_zero:
            return sample
        state = rng.bit_generator.state["state"]
        seed = int(make_rng(key.seed, _TAG_CAMERA_NOISE, int(state["state"]) % 2**32).integers(2**62))
        K, w2c = perturb_cameras(sample["K"], sample["w2c"], rotation_deg=noise.rotation_deg,
                                 translation=noise.translation, focal=noise.focal,
                                 generator=torch.Generator().manual_seed(seed))
        return {**sample, "K": K, "w2c": w2c}

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
        images, depth = batch_tensor((b, s, 3, h, w), torch.float32), batch_tensor((b, s, h, w), torch.float32)
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
