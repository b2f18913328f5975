"""The evaluation loop: depth metrics of a model on a resolved held-out set (``heldout.HeldOutSet``);
``depthpe eval`` (``command``) and training's validation call it, ``outputs`` writes its result.

Protocol (docs/evaluation.md):

* Each scene contributes one sample of ``views`` frames chosen by
  ``depthpe.loader.sampling.eval_view_indices`` from (seed, "<dataset>/<scene_id>"), or taken from a
  manifest. The chosen frames are written to ``manifest.json`` so that a later run (another
  encoding, another checkpoint) evaluates the very same views: pass it back with ``--manifest``.
* Images are resized to width ``image_width`` with the scene's own aspect (height a multiple of 14,
  largest crop centred on the principal point), no random augmentation. GT depth is normalized with
  the sample's cameras exactly as in training (view 0 = identity, unit mean camera distance), which
  is the unit the model predicts in.
* Rows: ``native`` (no alignment, headline), ``scene_aligned`` (one median scale per scene),
  ``image_aligned`` (median scale per image) and the two baselines ``global_constant`` (the median
  normalized GT over the evaluated set of the dataset) and ``scene_constant`` (per-scene median GT,
  an oracle). Per-image rows are averaged per scene, then over scenes (``depthpe.metrics``).
* Noisy cameras (``EvalOptions.camera_noise``): the model is given perturbed copies of the
  scene's normalized cameras (``geometry.perturb_cameras``, seeded per scene from
  ``noise_seed`` and its key); GT depth, validity and the scene's normalization stay those of the
  true cameras.
* Two passes over the scenes: the first collects the GT median per dataset for the
  global-constant baseline (a histogram, exact to 3e-4 relative), the second runs the model.
* Several processes (``accelerate launch``) split the scenes round-robin; rows are gathered and
  aggregated after sorting, so the table is the same for any number of processes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Collection

import numpy as np
import torch
from torch.utils.data import DataLoader

from ..config.camera_noise import CameraNoise, scene_noise_seed
from ..config.choices import DTYPES
from depthpe.loader.batching import collate_eval
from depthpe.loader.loaders import loader_kwargs
from ..geometry import perturb_cameras
from ..metrics import StreamingMedian, aggregate, baseline_rows, scene_rows
from ..model.inference import predict_depth
from .heldout import HeldOutSet
from .partial import PartialEvaluation
from .record import SceneRecord
from .worst import WorstImages

__all__ = ["EvalOptions", "EvalResult", "evaluate", "finite_values", "non_finite", "scene_loader", "scene_prediction",
           "noisy_cameras"]


@dataclass(frozen=True)
class EvalOptions:
    """How ``evaluate`` runs, beyond the held-out set: num_workers: data loader workers; panels: the
    first ``panels`` scenes of the evaluation (in order, whatever the number of processes; a skipped
    one has none) rendered as RGB | GT | prediction | error panels; worst: keep the panels of this
    many images with the largest native AbsRel; dtype: "fp32" or "bf16" (the model runs under
    ``torch.autocast`` with bfloat16 on its device; metrics in float32); loss_fn(pred, gt, valid,
    conf) -> {term: float}: the training loss terms of one scene (normalized units, (1, S, H, W)
    tensors), averaged over scenes into ``summary[dataset]["loss"]``; progress: progress bars;
    camera_noise: perturb the cameras the model is given (None or all levels 0: the true ones),
    each scene seeded from ``noise_seed`` and its key."""

    num_workers: int = 0
    panels: int = 0
    worst: int = 0
    dtype: str = "fp32"
    loss_fn: Callable | None = None
    progress: bool = True
    camera_noise: CameraNoise | None = None
    noise_seed: int = 0

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {self.dtype!r}")


@dataclass
class EvalResult:
    """Outcome of ``evaluate`` (complete on the main process; other processes hold the same)."""

    summary: dict  # {dataset: {mode: {metric: value, n_scenes, ...}}}
    rows: list[dict]  # per-image metric rows, all modes
    manifest: dict  # {"<dataset>/<scene>": [frame indices]}
    failures: list[dict] = field(default_factory=list)  # scenes that could not be evaluated
    panels: list = field(default_factory=list)  # (name, uint8 HWC panel) of the first scenes
    worst: list = field(default_factory=list)  # WorstImages.items: the worst images by native AbsRel

    def views_used(self) -> dict[str, int]:
        """Views actually evaluated per scene ("<dataset>/<scene>" -> count; fewer than requested
        where a scene has fewer frames)."""
        return {key: len(frames) for key, frames in self.manifest.items()}

    def short_scenes(self, views: int) -> dict[str, int]:
        """The scenes evaluated with fewer than ``views`` views, with their count."""
        return {key: n for key, n in self.views_used().items() if n < views}


def _gather(obj, accelerator):
    """All processes' python objects concatenated (a list), or the object itself on one process."""
    if accelerator is None or accelerator.num_processes == 1:
        return obj
    from accelerate.utils import gather_object

    return gather_object(obj)


@torch.no_grad()
def evaluate(model, held_out: HeldOutSet, options: EvalOptions = EvalOptions(), *, accelerator=None,
             partial: PartialEvaluation | None = None) -> EvalResult:
    """Evaluate ``model`` (a ``DepthModel``, possibly wrapped) on the scenes and views of ``held_out``.

    options: ``EvalOptions``; accelerator: an ``accelerate.Accelerator`` to split the scenes across
    processes (None = one process). A scene with fewer frames than ``held_out.draw.views`` is evaluated
    with all its frames (``views_used``). Sparser images than ``held_out.min_valid_fraction`` are
    left out (``n_empty_images``), a scene without a scored image is skipped and listed in
    ``failures`` like an unusable file (``SceneEvalDataset``).
    partial: the ``PartialEvaluation`` of an output folder (``depthpe eval``): the scenes and pass-1
    medians it holds are not computed again, every finished scene is added to it; the result is
    the same as without an interruption (None = keep nothing).
    Returns an ``EvalResult`` (see ``outputs.write_outputs``); its summary holds only defined
    (finite) values: a metric without any scored image is left out, never NaN.
    """
    rank = accelerator.process_index if accelerator is not None else 0
    world = accelerator.num_processes if accelerator is not None else 1
    dataset, order = held_out.dataset(), list(held_out.order)
    position = {key: p for p, key in enumerate(held_out.scenes)}
    was_training = model.training
    try:
        done, todo = _resume_split(dataset, order, partial, accelerator, announce=rank == 0)
        show = options.progress and rank == 0
        global_value = _pass_one(dataset, order[rank::world], options.num_workers, accelerator, show, partial)
        model.eval()
        worst_images = WorstImages(options.worst)
        records = _predict_scenes(model, scene_loader(dataset, todo[rank::world], options.num_workers), options,
                                  global_value, set(held_out.scenes[:options.panels]), show, worst_images, partial)
    finally:
        model.train(was_training)
        dataset.close_files()  # the scene files are free again when evaluate returns (not when collected)
        if partial is not None:
            partial.close()
    records = sorted([*done, *_gather(records, accelerator)], key=lambda r: position[r.key])
    result = _result_from_records(records, global_value, partial)
    result.worst = _worst_of_all(options.worst, _gather([worst_images], accelerator), done, partial)
    return result


def _resume_split(dataset, order: list[int], partial: PartialEvaluation | None, accelerator,
                  announce: bool) -> tuple[list[SceneRecord], list[int]]:
    """(records of the scenes of ``order`` that ``partial`` already holds, item indices still to
    evaluate, in order). Every process has read the finished scenes before this returns (none adds
    to them earlier); ``announce`` prints the "resuming" line when some were finished."""
    wanted = {dataset.scene_key(i) for i in order}
    done = [r for r in partial.records() if r.key in wanted] if partial is not None else []
    finished = {r.key for r in done}
    todo = [i for i in order if dataset.scene_key(i) not in finished]
    _wait(accelerator)
    if done and announce:
        print(f"resuming: {len(done):,} of {len(order):,} scenes already evaluated in {partial.out}", flush=True)
    if partial is not None and partial.bad_records and announce:
        print(f"warning: skipped {partial.bad_records} unusable record(s) in {partial.folder} (unreadable, made with "
              "other settings, repeated, or missing their panel); their scenes are evaluated again", flush=True)
    return done, todo


def _wait(accelerator) -> None:
    if accelerator is not None and accelerator.num_processes > 1:
        accelerator.wait_for_everyone()


def scene_loader(dataset, indices: list[int], num_workers: int) -> DataLoader:
    """One scene per batch, in the order of ``indices``; workers end with the pass."""
    loader_kw = loader_kwargs(num_workers, False, 2)
    loader_kw["persistent_workers"] = False
    return DataLoader(dataset, batch_size=1, sampler=indices, collate_fn=collate_eval, **loader_kw)


def _result_from_records(records: list[SceneRecord], global_value: dict, partial) -> EvalResult:
    """One ``EvalResult`` from the scene records of every process, in evaluation order; panels of
    records read back from ``partial`` come from its PNG files."""
    rows, failures, frames, losses, panels = [], [], {}, [], []
    for record in records:
        if record.failure is not None:
            failures.append({"scene": record.key, "error": record.failure})
            continue
        rows += record.rows
        frames[record.key] = record.frames
        if record.loss is not None:
            losses.append((record.dataset, record.loss))
        panel = record.panel_image
        if panel is None and record.panel_file:
            panel = partial.load_png(record.panel_file)
        if panel is not None:
            panels.append((record.stem, panel))
    summary = aggregate(rows) if rows else {}
    for name, value in global_value.items():
        summary.setdefault(name, {}).setdefault("global_constant", {})["value"] = value
    _add_mean_losses(summary, losses)
    return EvalResult(summary=finite_values(summary), rows=rows, manifest=dict(sorted(frames.items())),
                      failures=failures, panels=panels)


def _worst_of_all(k: int, collectors: list, done: list[SceneRecord], partial) -> list[dict]:
    """The ``k`` worst images of every process's collector and of the finished scenes of an
    interrupted run (their candidates' panels read back from ``partial``)."""
    merged = WorstImages(k).merge(collectors)
    for record in done:
        for item in record.worst:
            merged.add({**item, "panel": None})
    for item in merged.items:
        if item["panel"] is None:
            item["panel"] = partial.load_png(item.pop("panel_file"))
    return merged.items


def finite_values(tree):
    """``tree`` (nested dicts and lists) without its non-finite float leaves (NaN, inf: a metric that
    is undefined, e.g. over no scored image): dict entries are left out, list items become None.
    What summary.json, validation logs and trackers get, so none of them ever holds NaN."""
    if isinstance(tree, dict):
        return {k: finite_values(v) for k, v in tree.items() if not non_finite(v)}
    if isinstance(tree, (list, tuple)):
        return [None if non_finite(v) else finite_values(v) for v in tree]
    return tree


def non_finite(value) -> bool:
    """Whether ``value`` is a float (Python or numpy) that is NaN or infinite."""
    return isinstance(value, (float, np.floating)) and not math.isfinite(value)


def _pass_one(dataset, indices: list[int], num_workers: int, accelerator, progress: bool,
              partial: PartialEvaluation | None) -> dict[str, float]:
    """Pass 1 over this process's ``indices`` (``_global_medians``), or its result kept in ``partial``
    by an interrupted run (written there by the main process once the pass ends)."""
    kept = partial.gt_medians() if partial is not None else None
    if kept is not None:
        return kept
    medians = _global_medians(scene_loader(dataset, indices, num_workers), accelerator, progress)
    if partial is not None and (accelerator is None or accelerator.is_main_process):
        partial.save_gt_medians(medians)
    return medians


def _global_medians(loader, accelerator, progress: bool) -> dict[str, float]:
    """Pass 1: the median normalized GT depth per dataset over all processes' scenes (the
    global-constant baseline)."""
    from tqdm.auto import tqdm

    medians: dict[str, StreamingMedian] = {}
    for batch in tqdm(loader, desc="eval pass 1/2 (GT)", disable=not progress, leave=False):
        if batch["error"] is None:
            medians.setdefault(batch["dataset"][0], StreamingMedian()).update(batch["depth"][0], batch["valid"][0])
    merged: dict[str, StreamingMedian] = {}
    for part in _gather([medians], accelerator):
        for name, hist in part.items():
            merged.setdefault(name, StreamingMedian()).merge(hist)
    return {name: hist.median() for name, hist in merged.items()}


def _add_mean_losses(summary: dict, losses: list[tuple[str, dict]]) -> None:
    """``summary[dataset]["loss"]``: each loss term averaged over the scenes of that dataset."""
    by_dataset: dict[str, list[dict]] = {}
    for name, terms in losses:
        by_dataset.setdefault(name, []).append(terms)
    for name, items in by_dataset.items():
        summary.setdefault(name, {})["loss"] = {k: float(np.mean([t[k] for t in items])) for k in items[0]}


def scene_prediction(model, batch: dict, dtype: str = "fp32") -> dict[str, torch.Tensor]:
    """The model's depth for one evaluation batch (``collate_eval``: images (1, S, 3, H, W), K, w2c
    already in the normalized scene frame) through the one inference path (``predict_depth``, with
    scale 1: the dataset normalized the scene). Returns {"depth", "conf": (1, S, H, W) float32 on
    the model's device, "scale"}."""
    return predict_depth(model, batch["images"], batch["K"], batch["w2c"], scale=1.0, dtype=dtype)


def noisy_cameras(batch: dict, options: EvalOptions, key: str) -> dict:
    """``batch`` with its K and w2c perturbed as ``options.camera_noise`` says (the draw seeded from
    ``options.noise_seed`` and the scene ``key``); ``batch`` itself when there is no noise. Only the
    cameras change: images, depth and valid are the batch's own."""
    noise = options.camera_noise
    if noise is None or noise.is_zero:
        return batch
    generator = torch.Generator().manual_seed(scene_noise_seed(options.noise_seed, key))
    K, w2c = perturb_cameras(batch["K"], batch["w2c"], rotation_deg=noise.rotation_deg,
                             translation=noise.translation, focal=noise.focal, generator=generator)
    return {**batch, "K": K, "w2c": w2c}


def _predict_scenes(model, loader, options: EvalOptions, global_value: dict, panel_keys: Collection[str],
                    progress: bool, worst: WorstImages, partial: PartialEvaluation | None) -> list[SceneRecord]:
    """Pass 2: run the model on this process's scenes; returns one record per scene, each also kept
    in ``partial``; offers every scene to ``worst``; renders the panels of the scenes in ``panel_keys``."""
    from tqdm.auto import tqdm

    records = []
    for batch in tqdm(loader, desc="eval pass 2/2 (model)", disable=not progress, unit="scene"):
        name, scene = (x if isinstance(x, str) else x[0] for x in (batch["dataset"], batch["scene"]))
        record, entered = SceneRecord(key=f"{name}/{scene}", dataset=name, scene=scene), []
        if batch["error"] is not None:  # an unusable scene comes as the item itself (plain strings)
            record.failure = batch["error"]
        else:
            pred, entered = _score_scene(model, batch, record, options, global_value.get(name), worst)
            if record.key in panel_keys:
                record.panel_image = _panel(batch, pred)
        if partial is not None:
            partial.keep(record, entered)
        records.append(record)
    return records


def _score_scene(model, batch: dict, record: SceneRecord, options: EvalOptions, global_value: float | None,
                 worst: WorstImages) -> tuple[torch.Tensor, list[dict]]:
    """Predict one usable scene (a ``collate_eval`` batch) and fill ``record``'s frames, metric rows
    (with the baselines; ``global_value``: the dataset's global-constant depth) and loss terms.
    Returns (the predicted depth (S, H, W) on the CPU, the images of it that entered ``worst``)."""
    record.frames = [int(i) for i in batch["frames"][0]]
    out = scene_prediction(model, noisy_cameras(batch, options, record.key), options.dtype)
    pred = out["depth"][0].cpu()
    gt, valid = batch["depth"][0], batch["valid"][0]
    if options.loss_fn is not None:
        conf = out.get("conf")
        record.loss = options.loss_fn(out["depth"].cpu(), gt[None], valid[None], None if conf is None else conf.cpu())
    rows = scene_rows(pred, gt, valid, dataset=record.dataset, scene=record.scene)
    entered = worst.offer(rows, batch["images"][0], gt, pred, valid, record.frames)
    rows += baseline_rows(gt, valid, global_constant_value=global_value, dataset=record.dataset, scene=record.scene)
    record.rows = [{**r, "views": len(record.frames)} for r in rows]
    return pred, entered


def _panel(batch: dict, pred: torch.Tensor):
    """The RGB | GT | prediction | error panel (uint8 (H, W, 3)) of a scored batch's first 4 views
    (``pred``: its predicted depth, (S, H, W))."""
    from ..report.viz import views_grid

    return views_grid(batch["images"][0], batch["depth"][0], pred, batch["valid"][0], max_views=4,
                      channels_first=False)
