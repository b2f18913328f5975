"""The evaluation loop: depth metrics of a model on held-out scenes (``depthpe eval`` calls it).

Protocol (docs/evaluation.md):

* Each scene contributes one sample of ``views`` frames chosen by
  ``depthpe.data.sampling.eval_view_indices`` from (seed, "<dataset>/<scene_id>"), or taken from a
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
* Two passes over the scenes: the first collects the GT median per dataset for the
  global-constant baseline (a histogram, exact to 3e-4 relative), the second runs the model.
* Several processes (``accelerate launch``) split the scenes round-robin; rows are gathered and
  aggregated after sorting, so the table is the same for any number of processes.
"""

from __future__ import annotations

import csv
import io
import json
import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Collection, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader

from ..data.config import SourceConfig
from ..data.batching import collate_eval
from ..data.datasets import SceneEvalDataset
from ..data.loaders import loader_kwargs
from .partial import PartialEvaluation, eval_fingerprint
from ..files import atomic_write_bytes
from ..config.choices import DTYPES
from ..config.inference import EvalConfig
from ..model.inference import predict_depth
from .worst import WorstImages
from ..metrics import BASELINE_MODES, MIN_VALID_FRACTION, MODES, StreamingMedian, aggregate, baseline_rows, scene_rows

__all__ = ["EvalResult", "evaluate", "format_summary", "write_outputs", "load_manifest", "discover_sources",
           "usable_sources", "input_size", "run_evaluation", "scene_indices", "scene_loader",
           "model_scale_reference"]

ROW_ORDER = (*MODES, *BASELINE_MODES)


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


def write_manifest(path: str | Path, scenes: dict, *, seed=None, views=None) -> Path:
    """Write an evaluation manifest {"seed", "views", "scenes": {"<source>/<scene_id>": [frames]}} atomically."""
    doc = {"seed": seed, "views": views, "scenes": scenes}
    return atomic_write_bytes(Path(path), json.dumps(doc, indent=1).encode())


def load_manifest(path: str | Path | None) -> dict | None:
    """Read a ``manifest.json`` written by an earlier evaluation ({"scenes": {key: frames}})."""
    if path is None:
        return None
    doc = json.loads(Path(path).read_text())
    scenes = doc.get("scenes") if isinstance(doc, dict) else None
    if not isinstance(scenes, dict):
        raise ValueError(f"{path}: not a depthpe evaluation manifest (no 'scenes' mapping)")
    return scenes


SELECTIONS = ("first", "random")


def scene_indices(dataset: SceneEvalDataset, max_scenes: int | None, selection: str = "first", seed: int = 0,
                   scenes: Collection[str] | None = None) -> list[int]:
    """Item indices to evaluate, in index order. Per source: at most ``source.max_scenes`` (if set,
    else ``max_scenes``; None = all) scenes, the first ones (``selection="first"``) or a random draw
    seeded by (``seed``, source name) (``"random"``: the same draw on every machine and run).
    ``scenes``: only these "<source>/<scene_id>" keys (a fixed manifest), before the limit."""
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
    per_source: dict[int, list[int]] = {}
    for i, (src, _) in enumerate(dataset.items):
        if scenes is None or dataset.scene_key(i) in scenes:
            per_source.setdefault(src, []).append(i)
    out = []
    for src, items in per_source.items():
        limit = dataset.sources[src].max_scenes
        limit = max_scenes if limit is None else limit
        if limit is not None and limit < len(items):
            if selection == "random":
                rng = np.random.default_rng([seed, zlib.crc32(dataset.sources[src].name.encode())])
                items = [items[j] for j in sorted(rng.choice(len(items), size=limit, replace=False))]
            else:
                items = items[:limit]
        out += items
    return sorted(out)


def _gather(obj, accelerator):
    """All processes' python objects concatenated (a list), or the object itself on one process."""
    if accelerator is None or accelerator.num_processes == 1:
        return obj
    from accelerate.utils import gather_object

    return gather_object(obj)


@torch.no_grad()
def evaluate(
    model,
    sources: Sequence[SourceConfig | dict],
    *,
    views: int = 8,
    seed: int = 0,
    image_width: int = 518,
    aspect: float | None = None,
    max_scenes: int | None = None,
    manifest: dict | None = None,
    accelerator=None,
    num_workers: int = 0,
    panels: int = 0,
    progress: bool = True,
    dtype: str = "fp32",
    selection: str = "first",
    scenes: Collection[str] | None = None,
    loss_fn: Callable | None = None,
    scale_reference: str = "others",
    worst: int = 0,
    min_valid_fraction: float = MIN_VALID_FRACTION,
    partial: PartialEvaluation | None = None,
) -> EvalResult:
    """Evaluate ``model`` (a ``DepthModel``, possibly wrapped) on the scenes of ``sources``.

    sources: ``SourceConfig``s (or dicts) naming ``root/<name>/<split>``; views: frames per scene;
    max_scenes: scenes per source (None = all; a source's own ``max_scenes`` wins), the first ones
    or, with ``selection="random"``, a draw seeded by ``seed`` and the source name; scenes: evaluate
    only these "<source>/<scene_id>" keys; manifest: fixed frames per scene;
    accelerator: an ``accelerate.Accelerator`` to split scenes across processes (None = one process);
    panels: the first ``panels`` scenes of the evaluation (in order, whatever the number of
    processes; a skipped one has none) rendered as RGB | GT | prediction | error panels; dtype:
    "fp32" or "bf16" (the model runs under
    ``torch.autocast`` with bfloat16 on the model's device, CPU or GPU; metrics in float32). A
    scene with fewer frames than ``views`` is evaluated with all its frames (``views_used``).
    loss_fn(pred, gt, valid, conf) -> {term: float}: the training loss terms of one scene (normalized
    units; (1, S, H, W) tensors), averaged over scenes into ``summary[dataset]["loss"]``.
    scale_reference: the unit GT is normalized to; use the model's own (training_inputs.json).
    worst: keep the panels of this many images with the largest native AbsRel (``EvalResult.worst``).
    min_valid_fraction: the valid depth a scene's views need together, and each image to be scored
    (at least ``metrics.MIN_VALID_PIXELS`` pixels too; a source's own ``min_valid_fraction`` wins);
    sparser images are left out (``n_empty_images``), a scene without a scored image is skipped
    and listed in ``failures`` like an unusable file (``SceneEvalDataset``).
    partial: the ``PartialEvaluation`` of an output folder (``depthpe eval``): the scenes and pass-1
    medians it holds are not computed again, every finished scene is added to it; the result is
    the same as without an interruption (None = keep nothing).
    Returns an ``EvalResult`` (see ``write_outputs``); its summary holds only defined (finite)
    values: a metric without any scored image is left out, never NaN.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    rank = accelerator.process_index if accelerator is not None else 0
    world = accelerator.num_processes if accelerator is not None else 1
    dataset = SceneEvalDataset(
        sources, views=views, seed=seed, image_width=image_width, aspect=aspect, manifest=manifest,
        scale_reference=scale_reference, min_valid_fraction=min_valid_fraction,
    )
    order = scene_indices(dataset, max_scenes, selection, seed, scenes)
    position = {dataset.scene_key(i): p for p, i in enumerate(order)}
    done, todo = _resume_split(dataset, order, partial, accelerator, announce=rank == 0)
    show = progress and rank == 0
    global_value = _pass_one(dataset, order[rank::world], num_workers, accelerator, show, partial)
    was_training = model.training
    model.eval()
    try:
        worst_images = WorstImages(worst)
        records = _predict_scenes(model, scene_loader(dataset, todo[rank::world], num_workers), dtype,
                                  global_value, {dataset.scene_key(i) for i in order[:panels]}, show, loss_fn,
                                  worst_images, partial)
    finally:
        model.train(was_training)
        if partial is not None:
            partial.close()
    records = sorted([*done, *_gather(records, accelerator)], key=lambda r: position[r["key"]])
    result = _result_from_records(records, global_value, partial)
    result.worst = _worst_of_all(worst, _gather([worst_images], accelerator), done, partial)
    return result


def _resume_split(dataset, order: list[int], partial: PartialEvaluation | None, accelerator,
                  announce: bool) -> tuple[list[dict], list[int]]:
    """(records of the scenes of ``order`` that ``partial`` already holds, item indices still to
    evaluate, in order). Every process has read the finished scenes before this returns (none adds
    to them earlier); ``announce`` prints the "resuming" line when some were finished."""
    wanted = {dataset.scene_key(i) for i in order}
    done = [r for r in partial.records() if r["key"] in wanted] if partial is not None else []
    finished = {r["key"] for r in done}
    todo = [i for i in order if dataset.scene_key(i) not in finished]
    _wait(accelerator)
    if done and announce:
        print(f"resuming: {len(done):,} of {len(order):,} scenes already evaluated in {partial.out}", flush=True)
    return done, todo


def _wait(accelerator) -> None:
    if accelerator is not None and accelerator.num_processes > 1:
        accelerator.wait_for_everyone()


def scene_loader(dataset, indices: list[int], num_workers: int) -> DataLoader:
    """One scene per batch, in the order of ``indices``; workers end with the pass."""
    loader_kw = loader_kwargs(num_workers, False, 2)
    loader_kw["persistent_workers"] = False
    return DataLoader(dataset, batch_size=1, sampler=indices, collate_fn=collate_eval, **loader_kw)


def _result_from_records(records: list[dict], global_value: dict, partial) -> EvalResult:
    """One ``EvalResult`` from the scene records (``_keep``) of every process, in evaluation
    order; panels of records read back from ``partial`` come from its PNG files."""
    rows, failures, frames, losses, panels = [], [], {}, [], []
    for record in records:
        if record.get("failure") is not None:
            failures.append({"scene": record["key"], "error": record["failure"]})
            continue
        rows += record["rows"]
        frames[record["key"]] = record["frames"]
        if record.get("loss") is not None:
            losses.append((record["dataset"], record["loss"]))
        panel = record.get("panel_image")
        if panel is None and record.get("panel_file"):
            panel = partial.load_png(record["panel_file"])
        if panel is not None:
            panels.append((f"{record['dataset']}_{record['scene']}", panel))
    summary = aggregate(rows) if rows else {}
    for name, value in global_value.items():
        summary.setdefault(name, {}).setdefault("global_constant", {})["value"] = value
    _add_mean_losses(summary, losses)
    return EvalResult(summary=finite_values(summary), rows=rows, manifest=dict(sorted(frames.items())),
                      failures=failures, panels=panels)


def _worst_of_all(k: int, collectors: list, done: list[dict], partial) -> list[dict]:
    """The ``k`` worst images of every process's collector and of the finished scenes of an
    interrupted run (their candidates' panels read back from ``partial``)."""
    merged = WorstImages(k).merge(collectors)
    for record in done:
        for item in record.get("worst", []):
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
        return {k: finite_values(v) for k, v in tree.items() if not _non_finite(v)}
    if isinstance(tree, (list, tuple)):
        return [None if _non_finite(v) else finite_values(v) for v in tree]
    return tree


def _non_finite(value) -> bool:
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


def _predict_scenes(model, loader, dtype: str, global_value: dict, panel_keys: Collection[str], progress: bool,
                    loss_fn=None, worst: WorstImages | None = None, partial: PartialEvaluation | None = None):
    """Pass 2: run the model on this process's scenes; returns one record per scene
    (``_keep``), each also added to ``partial``; offers every scene to ``worst``; renders
    the panels of the scenes in ``panel_keys``."""
    from tqdm.auto import tqdm

    records = []
    for batch in tqdm(loader, desc="eval pass 2/2 (model)", disable=not progress, unit="scene"):
        name, scene = (x if isinstance(x, str) else x[0] for x in (batch["dataset"], batch["scene"]))
        record = {"key": f"{name}/{scene}", "dataset": name, "scene": scene}
        if batch["error"] is not None:  # an unusable scene comes as the item itself (plain strings)
            records.append(_keep({**record, "failure": batch["error"]}, [], partial))
            continue
        frames = [int(i) for i in batch["frames"][0]]
        out = scene_prediction(model, batch, dtype)
        pred = out["depth"][0].cpu()
        gt, valid = batch["depth"][0], batch["valid"][0]
        if loss_fn is not None:
            conf = out.get("conf")
            record["loss"] = loss_fn(out["depth"].cpu(), gt[None], valid[None], None if conf is None else conf.cpu())
        new = scene_rows(pred, gt, valid, dataset=name, scene=scene)
        entered = worst.offer(new, batch["images"][0], gt, pred, valid, frames) if worst is not None else []
        new += baseline_rows(gt, valid, global_constant_value=global_value.get(name), dataset=name, scene=scene)
        record.update(frames=frames, rows=[{**r, "views": len(frames)} for r in new])
        if record["key"] in panel_keys:
            from ..report.viz import views_grid

            record["panel_image"] = views_grid(batch["images"][0], gt, pred, valid, max_views=4, channels_first=False)
        records.append(_keep(record, entered, partial))
    return records


def _keep(record: dict, entered: list[dict], partial: PartialEvaluation | None) -> dict:
    """A scene's record: {key, dataset, scene, failure (error text) or frames, rows, loss; panel_image
    (in memory) and panel_file, worst (the images that entered the worst list, with panel_file)
    when kept}. Added to ``partial`` (its panels as PNG files first); returns the record."""
    if partial is None:
        return record
    stem = f"{record['dataset']}_{record['scene']}"
    if record.get("panel_image") is not None:
        record["panel_file"] = partial.save_png(f"panel_{stem}", record["panel_image"])
    record["worst"] = [{**{k: v for k, v in item.items() if k != "panel"},
                        "panel_file": partial.save_png(f"worst_{stem}_v{item['image']}", item["panel"])}
                       for item in entered]
    partial.append({k: v for k, v in record.items() if k != "panel_image"})
    return record


def format_summary(summary: dict, keys: Sequence[str] = ("abs_rel", "delta1", "delta2", "delta3", "rmse", "log_rmse")) -> str:
    """Markdown table: one row per (dataset, mode), modes in protocol order."""
    header = "| dataset | rows | scenes | images | " + " | ".join(keys) + " |"
    lines = [header, "|" + "---|" * (4 + len(keys))]
    for dataset in sorted(summary):
        for mode in ROW_ORDER:
            entry = summary[dataset].get(mode)
            if not entry or "n_scenes" not in entry:
                continue
            vals = " | ".join(_cell(entry.get(k)) for k in keys)
            lines.append(f"| {dataset} | {mode} | {entry['n_scenes']} | {entry['n_images']} | {vals} |")
    return "\n".join(lines)


def _cell(value) -> str:
    """A table cell: the value to 4 decimals, ``-`` where it is undefined (missing, None or NaN)."""
    return "-" if value is None or _non_finite(value) else f"{value:.4f}"


def write_outputs(result: EvalResult, out_dir: str | Path, *, meta: dict | None = None,
                  fingerprint: dict | None = None) -> dict[str, Path]:
    """Write ``summary.json``, ``metrics_per_image.csv``, ``manifest.json``, ``summary.md`` and
    ``panels/*.png`` into ``out_dir`` (atomically, file by file). Returns the paths written.
    fingerprint: ``eval_partial.eval_fingerprint`` of the settings, kept in summary.json so that a
    rerun with the same settings knows the evaluation is complete."""
    from ..report.viz import save_png

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    requested = (meta or {}).get("views")
    doc = {"meta": meta or {}, "summary": result.summary, "failures": result.failures,
           "views": {"requested": requested, "per_scene": result.views_used(),
                     "fewer_than_requested": result.short_scenes(requested) if requested else {}}}
    if fingerprint is not None:
        doc["fingerprint"] = fingerprint
    text = json.dumps(finite_values(doc), indent=1, default=float, allow_nan=False)  # strict JSON: no NaN
    paths["summary"] = atomic_write_bytes(out / "summary.json", text.encode())
    buf = io.StringIO()
    if result.rows:
        fieldnames = list(result.rows[0].keys())
        writer = csv.DictWriter(buf, fieldnames=fieldnames)
        writer.writeheader()
        for row in sorted(result.rows, key=lambda r: (r["dataset"], r["scene"], ROW_ORDER.index(r["mode"]), r["image"])):
            writer.writerow(row)
    paths["rows"] = atomic_write_bytes(out / "metrics_per_image.csv", buf.getvalue().encode())
    paths["manifest"] = write_manifest(out / "manifest.json", result.manifest, seed=(meta or {}).get("seed"),
                                       views=(meta or {}).get("views"))
    paths["table"] = atomic_write_bytes(out / "summary.md", (format_summary(result.summary) + "\n").encode())
    for name, panel in result.panels:
        paths[f"panel_{name}"] = save_png(out / "panels" / f"{name}.png", panel)
    paths.update(_write_worst(result.worst, out))
    from ..report.eval_report import write_eval_report

    paths["report"] = write_eval_report(out)
    return paths


def _write_worst(items: list[dict], out: Path) -> dict[str, Path]:
    """``worst/NN_<dataset>_<scene>_v<image>.png`` panels and ``worst.json`` (their metrics and files)."""
    from ..report.viz import save_png

    listed, paths = [], {}
    for rank, item in enumerate(items):
        name = f"worst/{rank:02d}_{item['dataset']}_{item['scene']}_v{item['image']}.png"
        paths[f"worst_{rank}"] = save_png(out / name, item["panel"])
        listed.append({**{k: v for k, v in item.items() if k != "panel"}, "file": name})
    paths["worst"] = atomic_write_bytes(out / "worst.json", json.dumps(listed, indent=1).encode())
    return paths


def discover_sources(root: str | Path, split: str, datasets: Sequence[str] | None = None) -> list[SourceConfig]:
    """Sources for every ``root/<dataset>/<split>/index.json`` (or only ``datasets``), sorted by name."""
    root = Path(root)
    names = list(datasets) if datasets else sorted(p.parent.parent.name for p in root.glob(f"*/{split}/index.json"))
    if not names:
        raise FileNotFoundError(
            f"no dataset with a '{split}' split under {root} (expected {root}/<dataset>/{split}/index.json); "
            "generate data with `depthpe synth --out ROOT` or convert one with `depthpe convert`"
        )
    for name in names:
        if not (root / name / split / "index.json").is_file():
            raise FileNotFoundError(f"{root / name / split / 'index.json'} not found")
    return [SourceConfig(name=n, root=str(root), split=split) for n in names]


def input_size(model: str, revision: str | None, image_width: int | None) -> tuple[int, float | None, str]:
    """(image width, fixed aspect or None, a note saying where they come from) for evaluating
    ``model``: ``image_width`` if given, else the width the model was trained at
    (``training_inputs.json``), else 518. The aspect is the model's one training aspect ratio, if it
    had one (None = each scene's own aspect)."""
    from ..config import ConfigError
    from ..model.training_inputs import read_training_inputs

    if image_width is not None and (image_width <= 0 or image_width % 14):
        raise ConfigError(f"--image-width must be a positive multiple of 14, got {image_width} (e.g. 518 = 37 * 14)")
    inputs = read_training_inputs(model, revision)
    aspect = inputs.fixed_aspect if inputs else None
    if image_width is not None:
        return image_width, aspect, f"image width {image_width} (--image-width)"
    if inputs is None:
        return 518, None, "image width 518 (the model records no training inputs; pass --image-width)"
    return inputs.image_width, aspect, (f"image width {inputs.image_width} and aspect {aspect or 'of each scene'} "
                                        "from the model's training inputs (training_inputs.json)")


def model_scale_reference(model: str, revision: str | None) -> str:
    """The scene unit the model was trained in (training_inputs.json; ``others`` without one)."""
    from ..model.training_inputs import read_training_inputs

    inputs = read_training_inputs(model, revision)
    return inputs.scale_reference if inputs else "others"


def usable_sources(sources: Sequence[SourceConfig], *, named: bool) -> tuple[list[SourceConfig], list[str]]:
    """The sources whose index lists at least one scene of two or more frames, and one warning per
    empty source left out. ``named``: the user named the datasets (``--datasets``), so an empty one
    is an error rather than a warning. Raises ``ConfigError`` for an unreadable index, an empty
    named source, or when no source is left."""
    from ..config import ConfigError
    from ..data.format.scene_file import SceneFileError, read_index

    kept, warnings = [], []
    for src in sources:
        try:
            n = sum(int(e["num_frames"]) >= 2 for e in read_index(src.split_dir))
        except SceneFileError as err:
            raise ConfigError(f"{err} (rebuild it with `depthpe index {src.split_dir}`)") from None
        if n:
            kept.append(src)
            continue
        problem = f"dataset {src.name!r} has no scene with 2 or more frames in its '{src.split}' split ({src.split_dir})"
        if named:
            raise ConfigError(f"{problem}; nothing to evaluate there")
        warnings.append(f"warning: skipping {problem}")
    if not kept:
        raise ConfigError(f"nothing to evaluate: {'; '.join(w.removeprefix('warning: skipping ') for w in warnings)}")
    return kept, warnings


def _report(result: EvalResult, cfg: EvalConfig) -> None:
    """Print the table, skipped scenes and scenes evaluated with fewer views than --views (main
    process)."""
    print(format_summary(result.summary))
    for failure in result.failures:
        print(f"skipped {failure['scene']}: {failure['error']}")
    short = result.short_scenes(cfg.views)
    if short:
        listed = ", ".join(f"{k} ({n})" for k, n in list(short.items())[:5]) + (", ..." if len(short) > 5 else "")
        print(f"warning: {len(short)} scene(s) have fewer frames than --views {cfg.views} and were evaluated "
              f"with all their frames: {listed}; the counts are in summary.json (views.per_scene) and the "
              "views column of metrics_per_image.csv")
    print(f"wrote {cfg.out}/summary.json, metrics_per_image.csv, manifest.json, summary.md, panels/, worst/, "
          "report.html (open it in a browser)")


def run_evaluation(cfg: EvalConfig) -> EvalResult | None:
    """``depthpe eval``: evaluate ``cfg.model`` on ``cfg.data`` and write the outputs to ``cfg.out``
    (main process writes). Resumes the partial evaluation of an interrupted run in ``cfg.out`` with
    the same settings (``eval_partial``); returns None without evaluating when ``cfg.out`` already
    holds a complete evaluation with these settings (unless ``cfg.restart``). Errors (no or empty
    dataset, nothing evaluable, a partial evaluation with other settings) raise ``ConfigError``."""
    from accelerate import Accelerator

    from ..config import ConfigError
    from ..model import DepthModel

    try:
        sources = discover_sources(cfg.data, cfg.split, cfg.datasets)
    except FileNotFoundError as err:
        raise ConfigError(str(err)) from None
    sources, warnings = usable_sources(sources, named=bool(cfg.datasets))
    width, aspect, note = input_size(cfg.model, cfg.revision, cfg.image_width)
    scale_reference = model_scale_reference(cfg.model, cfg.revision)
    accelerator = Accelerator(cpu=cfg.cpu)
    fingerprint = eval_fingerprint(cfg, sources, image_width=width, aspect=aspect, scale_reference=scale_reference,
                                   device=accelerator.device.type)
    partial = _open_partial(cfg, fingerprint, accelerator)
    if partial is None:
        return None
    model = DepthModel.from_pretrained(cfg.model, revision=cfg.revision).to(accelerator.device)
    if accelerator.is_main_process:
        for line in warnings:
            print(line, flush=True)
        print(f"evaluating at {note}" + (", bf16 autocast" if cfg.dtype == "bf16" else ""), flush=True)
    result = evaluate(model, sources, views=cfg.views, seed=cfg.seed, image_width=width, aspect=aspect,
                      max_scenes=cfg.max_scenes, manifest=load_manifest(cfg.manifest), accelerator=accelerator,
                      num_workers=cfg.num_workers, panels=cfg.panels, dtype=cfg.dtype, scale_reference=scale_reference,
                      worst=cfg.worst, min_valid_fraction=cfg.min_valid_fraction, partial=partial)
    if accelerator.is_main_process:
        meta = {"model": cfg.model, "revision": cfg.revision, "data": cfg.data, "split": cfg.split,
                "views": cfg.views, "seed": cfg.seed, "image_width": width, "aspect": aspect,
                "global_pe": model.config.global_pe, "processes": accelerator.num_processes, "dtype": cfg.dtype,
                "scale_reference": scale_reference, "min_valid_fraction": cfg.min_valid_fraction}
        write_outputs(result, cfg.out, meta=meta, fingerprint=fingerprint)
        partial.discard()
        _report(result, cfg)
    accelerator.wait_for_everyone()
    if not result.rows:
        raise ConfigError(f"no scene could be evaluated: all {len(result.failures)} were skipped (listed above)")
    return result


def _open_partial(cfg: EvalConfig, fingerprint: dict, accelerator) -> PartialEvaluation | None:
    """The partial evaluation of ``cfg.out`` to continue (or a new one), after every process checked
    it; None when ``cfg.out`` holds a complete evaluation with these settings (said on the console).
    ``cfg.restart`` discards partial results; other settings than theirs raise ``ConfigError``."""
    partial = PartialEvaluation(cfg.out, accelerator.process_index)
    complete = not partial.exists() and _completed_fingerprint(cfg.out) == fingerprint
    if complete and not cfg.restart:
        if accelerator.is_main_process:
            print(f"{cfg.out} already holds a complete evaluation with these settings (summary.json); nothing to "
                  "do. Pass --restart to evaluate again.", flush=True)
        return None
    if partial.exists() and not cfg.restart:
        partial.check(fingerprint)
    accelerator.wait_for_everyone()  # every process has looked before the main one changes anything
    if accelerator.is_main_process:
        if cfg.restart:
            partial.discard()
        if not partial.exists():
            partial.start(fingerprint)
    accelerator.wait_for_everyone()
    return partial


def _completed_fingerprint(out: str | Path) -> dict | None:
    """The settings fingerprint of the complete evaluation in ``out`` (summary.json), if any."""
    try:
        return json.loads((Path(out) / "summary.json").read_text()).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        return None
