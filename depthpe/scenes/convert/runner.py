"""Converting a whole download (``convert_dataset``): list the scenes, fix the split, convert the
scenes in ``--workers`` processes (``parallel.parallel_map``, results as they finish), write an
``index.json`` per split and the summary."""

from __future__ import annotations

import importlib
import json
import os
import time
from pathlib import Path

from ...files import atomic_write_bytes, safe_component
from ..format.scene_file import write_index
from ..parallel import parallel_map
from .contract import ConvertError, SceneRef
from .options import ConvertOptions, resolve_workers
from .scene import _existing_entry, _skipped_result, convert_scene
from .splits import load_or_create_split
from .summary import SUMMARY_FILE, _summarize

__all__ = ["convert_dataset"]


def _convert_job(job: tuple) -> dict:
    """Worker: ``convert_scene(*job)``, job = (module name, SceneRef, split, split folder, options)."""
    return convert_scene(*job)




def convert_dataset(module_name: str, src: str | os.PathLike, out: str | os.PathLike,
                    options: ConvertOptions | None = None) -> dict:
    """Convert a raw dataset into ``out/<NAME>/<split>/*.h5`` plus ``index.json`` per split.

    module_name: a converter module (``depthpe.scenes.convert.co3d`` ...). The split comes from
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
    shard = options.shard_of_run()
    mine = jobs_refs if shard is None else jobs_refs[shard[0]::shard[1]]
    jobs = [(module_name, r, assignment[r.scene_id], str(dataset_dir / assignment[r.scene_id]), options)
            for r in mine]

    results = [] if shard is not None and shard[0] > 0 else [
        _skipped_result(r.scene_id, "", "not in the official split", "not in the official split") for r in unassigned]
    _run_jobs(jobs, options, module.NAME, results)
    if shard is None:
        entries = _write_indexes(dataset_dir, module.NAME, results, refs[len(jobs_refs):], assignment, options)
    else:  # the run without --shard writes the index of all shards
        entries = _entries_by_split(results)
    wall = time.perf_counter() - t0
    summary = _summarize(module, src, out, options, refs + unassigned, results, entries, split_info, wall)
    summary["shard"] = None if shard is None else list(shard)
    if shard is None:
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
    appending each result to ``results`` as it finishes; shows a progress bar if ``options.progress``.
    Raises ``parallel.WorkerDied`` naming the scene when a worker process is killed."""
    done = {"frames": 0, "skipped": sum(r["status"] == "skipped" for r in results)}

    def record(res: dict) -> dict:
        """Keep one result; the bar's postfix: frames written and scenes skipped so far."""
        results.append(res)
        done["frames"] += res["frames"] if res["status"] == "written" else 0
        done["skipped"] += res["status"] == "skipped"
        return dict(done)

    parallel_map(_convert_job, jobs, ordered=False, on_result=record, workers=resolve_workers(options.workers),
                 chunk=1, progress=options.progress, desc=f"convert {name}", unit="scene",
                 describe=lambda job: f"scene {job[1].scene_id}",
                 hint="rerun the same command to resume (finished scenes are kept), with fewer --workers")


def _entries_by_split(results: list[dict]) -> dict[str, list[dict]]:
    """``{split: [index entry]}`` of the scenes ``convert_scene`` finished (written or existing)."""
    entries: dict[str, list[dict]] = {}
    for res in results:
        if res["entry"] is not None:
            entries.setdefault(res["split"], []).append(res["entry"])
    return entries


def _write_indexes(dataset_dir: Path, name: str, results: list[dict], later_refs: list[SceneRef],
                   assignment: dict[str, str], options: ConvertOptions) -> dict[str, list[dict]]:
    """Write ``index.json`` of every split folder that has finished scenes or exists: the scenes of
    this run plus those of ``later_refs`` (outside --limit) finished by earlier runs with the same
    settings. Returns ``{split: entries}``."""
    settings = json.dumps(options.content_settings(), sort_keys=True)
    entries = _entries_by_split(results)
    for r in later_refs:
        split = assignment[r.scene_id]
        entry = _existing_entry(dataset_dir / split / f"{safe_component(r.scene_id)}.h5", settings, options.min_frames)
        if entry is not None:
            entries.setdefault(split, []).append(entry)
    for split in sorted(set(assignment.values())):
        split_dir = dataset_dir / split
        if entries.get(split) or split_dir.is_dir():
            write_index(split_dir, entries.get(split, []), dataset=name, split=split)
    return entries
