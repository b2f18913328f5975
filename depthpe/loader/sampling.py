"""Sampling for multi-view training and evaluation: batch shapes, scene draws, view selection.

Everything here is a pure function of integers (seed, step, rank, slot, ...) so that

* all processes agree on the batch shape (S views, height, width, batch size B) of optimizer step g,
  because it is drawn from ``(seed, g)`` only (the same for every micro-batch of a gradient
  accumulation);
* sample ``n`` of step g is drawn from ``(seed, g, n)`` only, where ``n`` is its *global* index in the
  step: ``n = (micro * world_size + rank) * B + slot`` (``sample_index``). The processes and micro-
  batches of a step therefore hold disjoint slices of one global batch of
  ``world_size * grad_accum * B`` samples that does not depend on how it is split: N processes with
  ``grad_accum`` A draw exactly the samples of 1 process with ``grad_accum`` N*A, or of 1 process
  whose B is N times larger (when ``max_images_per_batch`` is scaled so that it is);
* a run resumed at step g (``start_step=g``) continues with exactly the batches it would have had.

Randomness comes from ``numpy.random.default_rng`` seeded with a ``SeedSequence`` of those integers
(never from global RNG state), so DataLoader workers and re-created samplers reproduce it exactly.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Iterator, NamedTuple, Sequence

import numpy as np
from torch.utils.data import Sampler

from depthpe.loader.config import DataConfig

__all__ = [
    "SampleKey",
    "BatchShape",
    "make_rng",
    "target_size",
    "batch_shape",
    "normalized_weights",
    "draw_scene",
    "select_views",
    "nearest_camera_order",
    "eval_view_indices",
    "sample_index",
    "sample_key",
    "DynamicBatchSampler",
]

# Stream tags keep the RNG streams of different uses independent even for equal integers.
_TAG_SHAPE = 0x53484150
_TAG_SCENE = 0x5343454E
_TAG_EVAL = 0x4556414C
_SEED_MASK = (1 << 64) - 1


class SampleKey(NamedTuple):
    """What the batch sampler yields per sample and ``MultiViewDataset.__getitem__`` takes.

    source/scene: indices into the dataset's sources and that source's scene list; num_views: S;
    height/width: output size in pixels; seed: the sample seed (all randomness of the sample: views,
    crops, jitter and redraws derive from it).
    """

    source: int
    scene: int
    num_views: int
    height: int
    width: int
    seed: int


@dataclass(frozen=True)
class BatchShape:
    """Shape shared by all samples of one batch: S views of height x width, B samples, and the
    aspect ratio (height / width) that was drawn."""

    num_views: int
    height: int
    width: int
    batch_size: int
    aspect: float


def make_rng(*keys: int) -> np.random.Generator:
    """A numpy Generator seeded by a sequence of integers (negative values are wrapped to uint64)."""
    return np.random.default_rng([int(k) & _SEED_MASK for k in keys])


def target_size(aspect: float, image_width: int = 518, patch_size: int = 14) -> tuple[int, int]:
    """Output (height, width) for aspect = height / width: width = ``image_width``, height = the
    multiple of ``patch_size`` nearest to ``image_width * aspect``, at least one patch."""
    if image_width % patch_size:
        raise ValueError(f"image_width {image_width} is not a multiple of patch_size {patch_size}")
    h = int(round(image_width * aspect / patch_size)) * patch_size
    return max(patch_size, h), image_width


def batch_shape(seed: int, step: int, cfg: DataConfig) -> BatchShape:
    """Batch shape of global step ``step``, a function of ``(seed, step)`` and the config only.

    S ~ uniform integer in ``cfg.views`` (inclusive); aspect ~ U(cfg.aspect); (H, W) from
    ``target_size``; B = max(1, floor(cfg.max_images_per_batch / S)) samples per process and
    micro-batch (the global batch of the step is world_size * grad_accum * B samples).
    """
    rng = make_rng(seed, _TAG_SHAPE, step)
    s = int(rng.integers(cfg.views[0], cfg.views[1] + 1))
    aspect = float(rng.uniform(cfg.aspect[0], cfg.aspect[1]))
    h, w = target_size(aspect, cfg.image_width, cfg.patch_size)
    return BatchShape(s, h, w, max(1, cfg.max_images_per_batch // s), aspect)


def normalized_weights(weights: Sequence[float], counts: Sequence[int]) -> np.ndarray:
    """Per-source probabilities: weights normalized to sum 1; sources without scenes must weigh 0.

    weights, counts: one entry per source (count = number of usable scenes). Raises ValueError when
    all weights are 0 or a source with positive weight has no scenes.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (len(counts),):
        raise ValueError(f"{len(w)} weights for {len(counts)} sources")
    if (w < 0).any() or not np.isfinite(w).all():
        raise ValueError(f"source weights must be finite and >= 0, got {w.tolist()}")
    empty = [i for i, (wi, n) in enumerate(zip(w, counts)) if wi > 0 and n == 0]
    if empty:
        raise ValueError(f"sources {empty} have positive weight but no scenes; fix the data or set weight 0")
    if w.sum() <= 0:
        raise ValueError("all source weights are 0; give at least one source a positive weight")
    return w / w.sum()


def draw_scene(rng: np.random.Generator, probs: np.ndarray, counts: Sequence[int]) -> tuple[int, int]:
    """Draw (source index, scene index): source by ``probs``, scene uniformly within the source."""
    source = int(rng.choice(len(probs), p=probs))
    return source, int(rng.integers(counts[source]))


def nearest_camera_order(w2c: np.ndarray, anchor: int, angle_weight: float = 1.0) -> np.ndarray:
    """Frames ordered by camera similarity to ``anchor`` (the anchor itself excluded).

    w2c: (N, 3|4, 4) OpenCV world-to-camera. The distance of camera j to the anchor a is
    ``|c_j - c_a| / s + angle_weight * (1 - cos(angle between optical axes))`` with c the camera
    centres and s the median distance of all centres to the anchor (so the order is scale-free).
    Nearby cameras looking the same way see the same surfaces, which is what "views chosen for
    overlap" needs when frame order says nothing about overlap (MegaSynth's 48 scattered views).
    Returns (N - 1,) int frame indices, most similar first.
    """
    w2c = np.asarray(w2c, dtype=np.float64)
    R, t = w2c[:, :3, :3], w2c[:, :3, 3]
    centers = -np.einsum("nji,nj->ni", R, t)  # c = -R^T t
    axes = R[:, 2, :]  # optical axis (camera +z) in world coordinates
    dist = np.linalg.norm(centers - centers[anchor], axis=1)
    others = np.array([i for i in range(len(w2c)) if i != anchor])
    scale = float(np.median(dist[others])) if len(others) else 1.0
    cost = dist / max(scale, 1e-12) + angle_weight * (1.0 - axes @ axes[anchor])
    return others[np.argsort(cost[others], kind="stable")]


def select_views(
    num_frames: int,
    num_views: int,
    rng: np.random.Generator,
    mode: str = "random",
    window: int = 30,
    w2c: np.ndarray | None = None,
) -> list[int]:
    """Frame indices of one sample; the first is the reference view (view 0).

    mode "random": ``num_views`` distinct frames drawn uniformly from the scene, in random order.
    mode "window": a random anchor frame (returned first), then ``num_views - 1`` distinct frames from
    ``[anchor - window, anchor + window]`` (clipped to the scene and widened to hold ``num_views``
    frames), in random order.
    mode "nearest": a random anchor frame (returned first), then ``num_views - 1`` distinct frames
    drawn from the ``max(window, num_views - 1)`` cameras most similar to the anchor's
    (``nearest_camera_order``: close centres, similar viewing directions), in random order; needs
    ``w2c`` (num_frames, 3|4, 4).
    Scenes with fewer than ``num_views`` frames repeat frames (all frames appear, extra ones drawn
    with replacement).
    """
    if num_frames < 1:
        raise ValueError("cannot select views from a scene without frames")
    if num_frames < num_views:
        extra = rng.integers(num_frames, size=num_views - num_frames)
        return [int(i) for i in rng.permutation(np.concatenate([np.arange(num_frames), extra]))]
    if mode == "random":
        return [int(i) for i in rng.choice(num_frames, size=num_views, replace=False)]
    if mode == "nearest":
        if w2c is None or len(w2c) != num_frames:
            raise ValueError(f"view selection 'nearest' needs the {num_frames} cameras (w2c) of the scene")
        anchor = int(rng.integers(num_frames))
        pool = nearest_camera_order(w2c, anchor)[: max(int(window), num_views - 1)]
        chosen = rng.choice(pool, size=num_views - 1, replace=False)
        return [anchor] + [int(i) for i in chosen]
    if mode != "window":
        raise ValueError(f"view selection mode must be 'random', 'window' or 'nearest', got {mode!r}")
    anchor = int(rng.integers(num_frames))
    half = max(int(window), math.ceil((num_views - 1) / 2))
    lo, hi = max(0, anchor - half), min(num_frames, anchor + half + 1)
    # widen at the other end when clipped by a scene boundary, so that num_views frames fit
    if hi - lo < num_views:
        lo = max(0, min(lo, hi - num_views))
        hi = min(num_frames, max(hi, lo + num_views))
    others = np.array([i for i in range(lo, hi) if i != anchor])
    chosen = rng.choice(others, size=num_views - 1, replace=False)
    return [anchor] + [int(i) for i in chosen]


def _stable_hash(text: str) -> int:
    """A process-independent 64-bit hash of a string (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def eval_view_indices(
    num_frames: int,
    views: int,
    seed: int,
    scene_id: str,
    *,
    mode: str = "random",
    window: int = 30,
    attempt: int = 0,
    w2c: np.ndarray | None = None,
) -> list[int]:
    """Fixed view subset of one evaluation scene, a function of (seed, scene_id, attempt) only.

    Returns ``min(views, num_frames)`` distinct frame indices (reference first) chosen as in
    ``select_views``; ``attempt`` > 0 gives alternative subsets (used when a subset is degenerate);
    ``w2c``: the scene's cameras (N, 3|4, 4), needed by mode "nearest".
    The evaluator writes the result to its manifest so that runs can be compared view for view.
    """
    rng = make_rng(seed, _TAG_EVAL, _stable_hash(scene_id), attempt)
    return select_views(num_frames, min(views, num_frames), rng, mode, window, w2c=w2c)


def sample_index(rank: int, slot: int, batch_size: int, world_size: int = 1, micro: int = 0) -> int:
    """Global index of sample ``slot`` of micro-batch ``micro`` on process ``rank`` within one
    optimizer step: ``(micro * world_size + rank) * batch_size + slot`` (B = ``batch_size`` per
    process and micro-batch). Indices of a step run over ``0 .. grad_accum * world_size * B - 1``."""
    return (int(micro) * int(world_size) + int(rank)) * int(batch_size) + int(slot)


def sample_key(seed: int, step: int, index: int, shape: BatchShape, probs: np.ndarray,
               counts: Sequence[int]) -> SampleKey:
    """The ``SampleKey`` of global sample ``index`` of optimizer step ``step``: scene (source by
    ``probs``, scene uniform in the source) and sample seed from ``(seed, step, index)`` only.

    (The RNG key is ``(seed, tag, step, 0, index)``; the 0 keeps single-process keys identical to
    those of the earlier per-rank scheme ``(seed, tag, step, rank, slot)``.)
    """
    rng = make_rng(seed, _TAG_SCENE, step, 0, index)
    source, scene = draw_scene(rng, probs, counts)
    sample_seed = int(rng.integers(1 << 62))
    return SampleKey(source, scene, shape.num_views, shape.height, shape.width, sample_seed)


class DynamicBatchSampler(Sampler):
    """Infinite, step-indexed batch sampler with a per-step number of views and aspect ratio.

    For every optimizer step g (starting at ``start_step``) it yields ``grad_accum`` lists of B
    ``SampleKey`` (one per micro-batch): the shape (S, H, W, B) comes from
    ``batch_shape(seed, g, cfg)`` (identical on all ranks and micro-batches), and slot j of micro-batch
    m on this rank is global sample ``sample_index(rank, j, B, world_size, m)`` of step g, whose scene
    and sample seed come from ``(seed, g, index)`` (``sample_key``). Sources are drawn with
    ``cfg.sources[i].weight`` (normalized), scenes uniformly within a source.

    scene_counts: number of scenes per source, e.g. ``MultiViewDataset.scene_counts``.
    num_steps: stop before optimizer step ``num_steps`` (None = infinite).
    Use with ``DataLoader(dataset, batch_sampler=sampler)``.
    """

    def __init__(
        self,
        cfg: DataConfig,
        scene_counts: Sequence[int],
        *,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        start_step: int = 0,
        num_steps: int | None = None,
        grad_accum: int = 1,
    ) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank}")
        if start_step < 0:
            raise ValueError(f"start_step must be >= 0, got {start_step}")
        if grad_accum < 1:
            raise ValueError(f"grad_accum must be >= 1, got {grad_accum}")
        if len(scene_counts) != len(cfg.sources):
            raise ValueError(f"{len(scene_counts)} scene counts for {len(cfg.sources)} sources")
        self.cfg = cfg
        self.counts = [int(c) for c in scene_counts]
        self.probs = normalized_weights([s.weight for s in cfg.sources], self.counts)
        self.seed, self.rank, self.world_size = int(seed), int(rank), int(world_size)
        self.start_step, self.num_steps, self.grad_accum = int(start_step), num_steps, int(grad_accum)

    def batch_at(self, step: int, micro: int = 0) -> list[SampleKey]:
        """The keys this rank gets in micro-batch ``micro`` of optimizer step ``step`` (pure)."""
        if not 0 <= micro < self.grad_accum:
            raise ValueError(f"micro must be in [0, grad_accum={self.grad_accum}), got {micro}")
        shape = batch_shape(self.seed, step, self.cfg)
        return [
            sample_key(self.seed, step, sample_index(self.rank, slot, shape.batch_size, self.world_size, micro),
                       shape, self.probs, self.counts)
            for slot in range(shape.batch_size)
        ]

    def __iter__(self) -> Iterator[list[SampleKey]]:
        step = self.start_step
        while self.num_steps is None or step < self.num_steps:
            for micro in range(self.grad_accum):
                yield self.batch_at(step, micro)
            step += 1

    def __len__(self) -> int:
        if self.num_steps is None:
            raise TypeError("DynamicBatchSampler is infinite (num_steps=None) and has no length")
        return max(0, self.num_steps - self.start_step) * self.grad_accum
