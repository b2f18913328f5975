"""The dataset writer of ``depthpe synth``: one scene file per (split, index), resumable, rendered by
``--workers`` processes (``parallel.parallel_map``), an ``index.json`` per split and the summary."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from ..parallel import parallel_map
from .generate import generate_scene
from .params import DEFAULT_PARAMS, SynthParams, scene_seed, shift_label, style_params

__all__ = ["DATASET_NAME", "SOURCE", "DEFAULT_HEIGHT", "DEFAULT_WIDTH", "DEFAULT_VIEWS", "DEFAULT_TRAIN_SCENES",
           "DEFAULT_VAL_SCENES", "write_synth_dataset", "format_summary"]

DATASET_NAME = "synth"
SOURCE = "depthpe procedural v1"
# Defaults: 140 px = 1.25 x 112, so a 0.8-scale augmentation crop still covers a 112 px training
# image without upsampling (the quickstart trains at 112); 12 views per scene.
DEFAULT_HEIGHT = 140
DEFAULT_WIDTH = 140
DEFAULT_VIEWS = 12
DEFAULT_TRAIN_SCENES = 64
DEFAULT_VAL_SCENES = 16


def _scene_id(split: str, index: int, shift: str | None = None, style: str | None = None) -> str:
    """``f"{split}_{index:06d}"``, ``f"{split}_shift-{shift}_{index:06d}"`` for a shifted scene or
    ``f"{split}_{style}_{index:06d}"`` for a scene of another style than the default."""
    if style is not None:
        return f"{split}_{style}_{index:06d}"
    return f"{split}_{index:06d}" if shift is None else f"{split}_shift-{shift}_{index:06d}"


def _existing_entry(path: Path, seed: int, views: int, height: int, width: int,
                    shift: str | None = None, style: str | None = None) -> dict | None:
    """Index entry of a complete scene file made by this generator with the same seed, shape,
    shift and style, or None if the file is missing, unreadable or was made with other settings
    (then it is redone): ``scene_file.finished_entry``."""
    from depthpe.data.format.scene_file import finished_entry

    def same(attrs: dict) -> bool:
        return (attrs.get("source") == SOURCE and attrs.get("synth_seed") == seed
                and (attrs["num_frames"], attrs["height"], attrs["width"]) == (views, height, width)
                and attrs.get("shift") == shift and attrs.get("style") == style)

    entry = finished_entry(path, same)
    return None if entry is None else _with_labels(entry, shift, style)


def _with_labels(entry: dict, shift: str | None, style: str | None) -> dict:
    """The index entry with ``"shift": shift`` / ``"style": style`` added for a shifted scene or one
    of another style (unchanged for a default one)."""
    labels = {key: value for key, value in (("shift", shift), ("style", style)) if value is not None}
    return {**entry, **labels}


def _label_attrs(shift: str | None, style: str | None) -> dict:
    """Extra scene-file attributes of a shifted scene or one of another style: ``shift`` / ``style``
    (the labels) and ``synth_params`` (the full ``SynthParams`` as JSON); none for a default scene,
    whose files stay as they always were."""
    if shift is None and style is None:
        return {}
    labels = {key: value for key, value in (("shift", shift), ("style", style)) if value is not None}
    return {**labels, "synth_params": json.dumps(asdict(_label_params(shift, style)))}


def _label_params(shift: str | None, style: str | None = None) -> SynthParams:
    """The ``SynthParams`` of a ``shift_label`` and a style (None, None: the default distribution)."""
    if shift is None and style is None:
        return DEFAULT_PARAMS
    return style_params(style or "default", [] if shift is None else shift.split("-"))


def _make_scene_file(job: tuple) -> tuple[dict, str, float, float]:
    """Worker: render and write one scene unless a complete file exists.

    Returns (split, index entry, "written" | "skipped", render seconds, write seconds).
    """
    from depthpe.data.format.scene_file import write_scene

    split_dir, split, index, seed, views, height, width, shift, style = job
    scene_id = _scene_id(split, index, shift, style)
    path = Path(split_dir) / f"{scene_id}.h5"
    entry = _existing_entry(path, seed, views, height, width, shift, style)
    if entry is not None:
        return split, entry, "skipped", 0.0, 0.0
    t0 = time.perf_counter()
    out = generate_scene(scene_seed(seed, split, index), views, height, width, _label_params(shift, style))
    t1 = time.perf_counter()
    entry = write_scene(
        path,
        images=out["images"],
        depth=out["depth"],
        K=out["K"],
        w2c=out["w2c"],
        dataset=DATASET_NAME,
        scene_id=scene_id,
        split=split,
        metric=False,
        depth_units="scene",
        source=SOURCE,
        extra_attrs={"synth_seed": int(seed), "synth_index": int(index), **_label_attrs(shift, style)},
    )
    return split, _with_labels(entry, shift, style), "written", t1 - t0, time.perf_counter() - t1


def write_synth_dataset(
    out_dir: str | os.PathLike,
    *,
    train_scenes: int = DEFAULT_TRAIN_SCENES,
    val_scenes: int = DEFAULT_VAL_SCENES,
    views: int = DEFAULT_VIEWS,
    height: int = DEFAULT_HEIGHT,
    width: int = DEFAULT_WIDTH,
    seed: int = 0,
    workers: int = 1,
    progress: bool = True,
    shift: Sequence[str] = (),
    style: str = "default",
) -> dict:
    """Write ``out_dir/synth/{train,val}/<scene_id>.h5`` and an ``index.json`` per split.

    Scene ``i`` of split ``split`` is ``generate_scene(scene_seed(seed, split, i), ...)``, with
    scene id ``f"{split}_{i:06d}"``. With ``shift`` (names of ``SHIFTS`` or "all") the scenes are
    drawn from ``shift_params(shift)`` with the same random streams, their id is
    ``f"{split}_shift-{label}_{i:06d}"`` (label: ``shift_label``), and the label is recorded as the
    ``shift`` attribute of the file (with the parameters as ``synth_params``) and of its index entry.
    With ``style`` other than "default" (``STYLES``; not combined with ``shift``) the scenes are
    drawn from ``style_params(style)``, named ``f"{split}_{style}_{i:06d}"`` and labelled ``style``
    the same way.
    Files are written atomically by ``scene_file.write_scene``
    (attrs dataset="synth", metric=False, depth_units="scene", source=SOURCE, plus synth_seed and
    synth_index); an existing complete file with the same seed, frame count and size is skipped, so
    an interrupted run can be resumed (a file made with other settings is regenerated).
    ``workers > 1`` renders scenes in that many processes; a killed one (out of memory) raises
    ``parallel.WorkerDied`` naming its scene, the finished files kept for a rerun. Returns a summary dict with, per split, the
    number of scenes written and skipped, and the summed render/write seconds and wall time.
    """
    if train_scenes < 0 or val_scenes < 0:
        raise ValueError(f"scene counts must be >= 0, got train={train_scenes}, val={val_scenes}")
    if views < 2:
        raise ValueError(f"views must be >= 2 for a multi-view dataset, got {views}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    label = shift_label(shift)
    style_params(style, shift)  # unknown style or style with shift: ValueError before any work
    style_label = None if style == "default" else style
    root = Path(out_dir) / DATASET_NAME
    summary: dict = {
        "root": str(root), "views": views, "height": height, "width": width, "seed": seed, "splits": {}
    }
    if label is not None:
        summary["shift"] = label
    if style_label is not None:
        summary["style"] = style_label
    t_start = time.perf_counter()
    counts = {"train": train_scenes, "val": val_scenes}
    jobs = [(str(root / split), split, i, seed, views, height, width, label, style_label)
            for split, count in counts.items() for i in range(count)]
    for split in counts:
        (root / split).mkdir(parents=True, exist_ok=True)
    results = _make_scene_files(jobs, workers, progress)
    summary["splits"] = {split: _write_split(root / split, split, count, results) for split, count in counts.items()}
    summary["wall_s"] = time.perf_counter() - t_start
    return summary


def _make_scene_files(jobs: list[tuple], workers: int, progress: bool) -> list[tuple]:
    """``_make_scene_file`` of every job, in ``workers`` processes, the results as they finish
    (``parallel.parallel_map``); raises ``WorkerDied`` naming the scene of a killed worker."""
    return parallel_map(_make_scene_file, jobs, ordered=False, workers=workers, chunk=1, progress=progress,
                        desc="synth", unit="scene", describe=_job_name,
                        hint="rerun the same command to resume (finished scenes are kept), "
                             "with fewer --workers if memory is short")


def _job_name(job: tuple) -> str:
    """``"scene <scene id>"`` of a ``_make_scene_file`` job: the item a dead worker was on."""
    _, split, index, *_, shift, style = job
    return f"scene {_scene_id(split, index, shift, style)}"


def _write_split(split_dir: Path, split: str, count: int, results: list[tuple]) -> dict:
    """Write the ``index.json`` of one split from the ``_make_scene_file`` results of all splits
    (``(split, entry, status, render s, write s)``); returns the split's stats (scenes, written,
    skipped, render_s, write_s)."""
    from depthpe.data.format.scene_file import write_index

    stats = {"scenes": count, "written": 0, "skipped": 0, "render_s": 0.0, "write_s": 0.0}
    entries = []
    for job_split, entry, status, t_render, t_write in results:
        if job_split != split:
            continue
        entries.append(entry)
        stats[status] += 1
        stats["render_s"] += t_render
        stats["write_s"] += t_write
    write_index(split_dir, entries, dataset=DATASET_NAME, split=split)
    return stats


def format_summary(summary: dict) -> str:
    """One human-readable line per split of a ``write_synth_dataset`` summary."""
    lines = []
    for split, st in summary["splits"].items():
        lines.append(
            f"{split}: {st['scenes']} scenes ({st['written']} written, {st['skipped']} skipped) "
            f"-> {summary['root']}/{split}"
        )
    keys = ("views", "height", "width", "seed", "shift", "style")
    settings = json.dumps({k: summary[k] for k in keys if k in summary})
    lines.append(f"{settings}  {summary['wall_s']:.1f}s")
    return "\n".join(lines)
