"""The dataset writer of ``depthpe synth``: one scene file per (split, index), resumable, rendered by
``--workers`` processes (``parallel.parallel_map``), an ``index.json`` per split and the summary
(with the scenes stored as float32 and the parallax of the written scenes)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..parallel import parallel_map
from .generate import generate_scene
from .parallax import parallax_patches, parallax_quantiles, quantile_sketch
from .params import (DEFAULT_PARAMS, PATCH_PX, SynthParams, params_json, scene_params, scene_seed, shift_label,
                     style_params)

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


LABELS = ("shift", "style", "rig", "texture")  # the labels of a scene of another distribution than the default


def _scene_id(split: str, index: int, labels: dict | None = None) -> str:
    """``f"{split}_{index:06d}"`` for a default scene; otherwise the labels in between, in ``LABELS``
    order: ``shift-<label>``, the style, ``rig-<name>``, ``tex-<name>`` (``train_shift-fov_000003``,
    ``val_geometry_rig-stereo_tex-stripes_000000``)."""
    labels = labels or {}
    prefix = {"shift": "shift-", "style": "", "rig": "rig-", "texture": "tex-"}
    parts = [prefix[key] + labels[key] for key in LABELS if labels.get(key) is not None]
    return "_".join([split, *parts, f"{index:06d}"])


def _existing_entry(path: Path, seed: int, views: int, height: int, width: int, labels: dict | None = None,
                    params: SynthParams = DEFAULT_PARAMS) -> dict | None:
    """Index entry of a complete scene file made by this generator with the same seed, shape,
    labels and parameters, or None if the file is missing, unreadable or was made with other
    settings (then it is redone): ``scene_file.finished_entry``."""
    from depthpe.scenes.format.scene_file import finished_entry

    labels = labels or {}
    expected = _label_attrs(labels, params)

    def same(attrs: dict) -> bool:
        return (attrs.get("source") == SOURCE and attrs.get("synth_seed") == seed
                and (attrs["num_frames"], attrs["height"], attrs["width"]) == (views, height, width)
                and all(attrs.get(key) == expected.get(key) for key in (*LABELS, "synth_params")))

    entry = finished_entry(path, same)
    return None if entry is None else _with_labels(entry, labels)


def _with_labels(entry: dict, labels: dict) -> dict:
    """The index entry with the scene's labels (``LABELS`` that are set) added; unchanged for a
    default scene."""
    return {**entry, **{key: labels[key] for key in LABELS if labels.get(key) is not None}}


def _label_attrs(labels: dict, params: SynthParams) -> dict:
    """Extra scene-file attributes of a scene of another distribution than the default: its labels
    and ``synth_params`` (``params_json``); none for a default scene, whose files stay as they always
    were."""
    set_labels = {key: labels[key] for key in LABELS if labels.get(key) is not None}
    if not set_labels and params == DEFAULT_PARAMS:
        return {}
    return {**set_labels, "synth_params": params_json(params)}


def _scene_labels_and_params(shift: Sequence[str], style: str, knobs: dict) -> tuple[dict, SynthParams]:
    """The labels (``LABELS``: None where unset) and ``SynthParams`` of a run: ``style_params`` with
    the knobs applied (``scene_params``: rig, depth_ratio, rotation_jitter, texture, texture_period).
    A rig is labelled only when it changes the style's paths (``--style geometry --rig curve`` is
    the geometry style); a texture other than "mixed" always. ValueError for a bad combination."""
    base, params = style_params(style, shift), scene_params(style, shift, **knobs)
    labels = {"shift": shift_label(shift), "style": None if style == "default" else style,
              "rig": knobs.get("rig") if params.paths != base.paths else None,
              "texture": None if params.texture == "mixed" else params.texture}
    return labels, params


def _storage_dtype(depth) -> str:
    """"float16" (the format's default) when it holds every frame of ``depth`` (V, H, W), else
    "float32": e.g. a camera facing a wall head-on sees depths so alike that float16 would merge
    them (``limits.depth_storage_problem``); such a scene is counted in the summary."""
    from depthpe.scenes.format.limits import depth_storage_problem

    return "float16" if depth_storage_problem(depth, "float16") is None else "float32"


def _make_scene_file(job: tuple) -> tuple:
    """Worker: render and write one scene unless a complete file exists.

    Returns (split, index entry, "written" | "skipped", render seconds, write seconds, details):
    details of a written scene are ``depth_dtype`` and ``parallax`` (a ``quantile_sketch`` of its
    ``parallax_patches``), empty for a skipped one.
    """
    from depthpe.scenes.format.scene_file import write_scene

    split_dir, split, index, seed, views, height, width, labels, params = job
    scene_id = _scene_id(split, index, labels)
    path = Path(split_dir) / f"{scene_id}.h5"
    entry = _existing_entry(path, seed, views, height, width, labels, params)
    if entry is not None:
        return split, entry, "skipped", 0.0, 0.0, {}
    t0 = time.perf_counter()
    out = generate_scene(scene_seed(seed, split, index), views, height, width, params)
    t1 = time.perf_counter()
    depth_dtype = _storage_dtype(out["depth"])
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
        depth_dtype=depth_dtype,
        extra_attrs={"synth_seed": int(seed), "synth_index": int(index), **_label_attrs(labels, params)},
    )
    t2 = time.perf_counter()
    details = {"depth_dtype": depth_dtype,
               "parallax": quantile_sketch(parallax_patches(out["depth"], out["K"], out["w2c"]))}
    return split, _with_labels(entry, labels), "written", t1 - t0, t2 - t1, details


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
    rig: str | None = None,
    depth_ratio: Sequence[float] | None = None,
    rotation_jitter: float | None = None,
    texture: str = "mixed",
    texture_period: Sequence[float] | None = None,
) -> dict:
    """Write ``out_dir/synth/{train,val}/<scene_id>.h5`` and an ``index.json`` per split.

    Scene ``i`` of split ``split`` is ``generate_scene(scene_seed(seed, split, i), ...)``, with
    scene id ``f"{split}_{i:06d}"``. With ``shift`` (names of ``SHIFTS`` or "all") the scenes are
    drawn from ``shift_params(shift)`` with the same random streams, their id is
    ``f"{split}_shift-{label}_{i:06d}"`` (label: ``shift_label``), and the label is recorded as the
    ``shift`` attribute of the file (with the parameters as ``synth_params``) and of its index entry.
    With ``style`` other than "default" (``STYLES``; not combined with ``shift``) the scenes are
    drawn from ``style_params(style)``, named ``f"{split}_{style}_{i:06d}"`` and labelled ``style``
    the same way. The knobs ``rig``, ``depth_ratio``, ``rotation_jitter``, ``texture`` and
    ``texture_period`` change the parameters further (``params.knob_params``; a rig not with
    ``shift``); a rig that changes the paths and a texture other than "mixed" are labels too
    (``rig-<name>``, ``tex-<name>`` in the id: ``_scene_id``).
    Files are written atomically by ``scene_file.write_scene``
    (attrs dataset="synth", metric=False, depth_units="scene", source=SOURCE, plus synth_seed and
    synth_index), depth as float16, or float32 for a scene float16 cannot hold (``_storage_dtype``);
    an existing complete file with the same seed, frame count, size, labels and parameters is
    skipped, so an interrupted run can be resumed (a file made with other settings is regenerated).
    ``workers > 1`` renders scenes in that many processes; a killed one (out of memory) raises
    ``parallel.WorkerDied`` naming its scene, the finished files kept for a rerun. Returns a summary
    dict with, per split, the number of scenes written, skipped and stored as float32 and the summed
    render/write seconds; the run's settings, the parallax of the written scenes (``_parallax``)
    and the wall time.
    """
    if train_scenes < 0 or val_scenes < 0:
        raise ValueError(f"scene counts must be >= 0, got train={train_scenes}, val={val_scenes}")
    if views < 2:
        raise ValueError(f"views must be >= 2 for a multi-view dataset, got {views}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    knobs = {"rig": rig, "depth_ratio": depth_ratio, "rotation_jitter": rotation_jitter, "texture": texture,
             "texture_period": texture_period}
    labels, params = _scene_labels_and_params(shift, style, knobs)  # ValueError before any work
    root = Path(out_dir) / DATASET_NAME
    summary: dict = {"root": str(root), "views": views, "height": height, "width": width, "seed": seed,
                     **{key: labels[key] for key in ("shift", "style") if labels[key] is not None},
                     **{key: (list(v) if isinstance(v, (tuple, list)) else v) for key, v in knobs.items()
                        if v is not None and not (key == "texture" and v == "mixed")}}
    t_start = time.perf_counter()
    counts = {"train": train_scenes, "val": val_scenes}
    jobs = [(str(root / split), split, i, seed, views, height, width, labels, params)
            for split, count in counts.items() for i in range(count)]
    for split in counts:
        (root / split).mkdir(parents=True, exist_ok=True)
    results = _make_scene_files(jobs, workers, progress)
    summary["splits"] = {split: _write_split(root / split, split, count, results) for split, count in counts.items()}
    summary["parallax"] = _parallax(results)
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
    _, split, index, *_, labels, _params = job
    return f"scene {_scene_id(split, index, labels)}"


def _write_split(split_dir: Path, split: str, count: int, results: list[tuple]) -> dict:
    """Write the ``index.json`` of one split from the ``_make_scene_file`` results of all splits
    (``(split, entry, status, render s, write s, details)``); returns the split's stats (scenes,
    written, skipped, float32: written scenes whose depth is stored as float32, render_s, write_s)."""
    from depthpe.scenes.format.scene_file import write_index

    stats = {"scenes": count, "written": 0, "skipped": 0, "float32": 0, "render_s": 0.0, "write_s": 0.0}
    entries = []
    for job_split, entry, status, t_render, t_write, details in results:
        if job_split != split:
            continue
        entries.append(entry)
        stats[status] += 1
        stats["float32"] += details.get("depth_dtype") == "float32"
        stats["render_s"] += t_render
        stats["write_s"] += t_write
    write_index(split_dir, entries, dataset=DATASET_NAME, split=split)
    return stats


def _parallax(results: list[tuple]) -> dict | None:
    """``parallax_quantiles`` (p10, p50, p90 in patches) of the written scenes' view pairs, each
    scene weighted equally (their ``quantile_sketch`` pooled), with ``scenes``: how many; None when
    this run wrote none with parallax (all skipped)."""
    sketches = [r[5]["parallax"] for r in results if len(r[5].get("parallax", ()))]
    quantiles = parallax_quantiles(np.concatenate(sketches)) if sketches else None
    return None if quantiles is None else {**quantiles, "scenes": len(sketches)}


def format_summary(summary: dict) -> str:
    """The human-readable lines of a ``write_synth_dataset`` summary: one per split, the scenes
    stored as float32 (if any), the parallax of the written scenes, the settings and the wall time."""
    lines = []
    for split, st in summary["splits"].items():
        lines.append(
            f"{split}: {st['scenes']} scenes ({st['written']} written, {st['skipped']} skipped) "
            f"-> {summary['root']}/{split}"
        )
    float32 = sum(st.get("float32", 0) for st in summary["splits"].values())
    if float32:
        lines.append(f"{float32} scene(s) store depth as float32, not float16: float16 would merge the depths of "
                     "a frame (a camera facing a wall head-on); they read like the others")
    parallax = summary.get("parallax")
    if parallax:
        lines.append(f"parallax between views, in patches of {PATCH_PX} px: p10 {parallax['p10']:.2f}, "
                     f"p50 {parallax['p50']:.2f}, p90 {parallax['p90']:.2f} ({parallax['scenes']} scene(s) "
                     "written by this run)")
    keys = ("views", "height", "width", "seed", "shift", "style", "rig", "depth_ratio", "rotation_jitter",
            "texture", "texture_period")
    settings = json.dumps({k: summary[k] for k in keys if k in summary})
    lines.append(f"{settings}  {summary['wall_s']:.1f}s")
    return "\n".join(lines)
