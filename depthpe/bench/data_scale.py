"""``depthpe bench data-scale``: the data tools at paper size (100,000 scenes and more).

For each N of ``--scenes`` a data root of N scenes is built from a few real scene files
(``depthpe synth`` writes ``--seed-scenes`` of them once; the N files are hard links ``os.link`` to
them and one ``index.json`` lists all N under their own ids). Builds are cached under ``--out``. Then:

* **memory per DataLoader worker**: in a fresh spawned process, the training dataset
  (``MultiViewDataset``) and sampler are built as training builds them, with 2 loader workers; each
  worker reads its own ``/proc/self/status`` (VmRSS) and ``/proc/self/smaps_rollup`` (Pss, private =
  Private_Clean + Private_Dirty) after ``--batches`` batches, again after ``gc.collect()`` (a full
  collection writes to every container object the worker inherited) and again after reading every
  scene entry (as a long run's samples reach every scene): then each page of the index is the
  worker's private copy, the steady state. The index's share is that private memory minus the same
  figure for a root of the seed scenes alone; the target is < 100 MB.
* **the validation draw** of the paper protocol: 2 sources of N scenes with ``max_scenes`` 2000 each
  (CO3D and MegaSynth), drawn at random as ``val.selection: random`` does (``evaluation``'s scene
  selection), the views of attempt 0 of every drawn scene (no file is opened) and the manifest written
  (``write_manifest``); drawn twice with the seed (identical files) and once with another seed.
* **``depthpe index`` and ``depthpe check`` throughput** (scenes/s) with each ``--workers`` count,
  the speed-up against linear in the workers and the rate against the smallest N (linear in scenes:
  1.0). ``index`` runs dry (the hard links share their scene ids, so all but the seed files are
  skipped as repeats: same work per file); ``check`` checks the first ``--check-scenes`` scenes
  (``--limit``: a scene takes 0.1-1 s, so all 100,000 would take hours) and compares the reports.

Timed benchmarks, not unit tests; on a shared machine the throughput suffers, the memory does not.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..config.options import add_plain_options, option, overwrite_option
from depthpe.scenes.synth import DEFAULT_HEIGHT, DEFAULT_WIDTH
from ..files import atomic_write_bytes
from .settings import JSON_HELP

DESCRIPTION = """\
Measure the data tools at paper size. For each N of --scenes, a data root of N scenes is built in
--out from --seed-scenes real scene files (hard links, one index.json listing all N; kept and reused)
and three tables are printed: the memory of each of 2 DataLoader workers of the training dataset
(RSS, private memory before and after a full garbage collection, the index's share against the
100 MB target), the paper protocol's random validation draw of 2 x --val-scenes scenes and its
manifest (times, and that the same seed writes the same file), and the throughput of `depthpe index`
and `depthpe check` (the first --check-scenes scenes) with each --workers count (speed-up against
linear, rate against the smallest N, identical results). 11 minutes at the defaults on a busy
2-core machine, most of it indexing 100,000 files; `--scenes 1000` alone takes about a minute."""

DATASET, SPLIT = "scale", "train"  # where the N scenes of a built root live: ROOT/scale/train
TARGET_INDEX_MB = 100.0  # the index's share of one loader worker's private memory
VAL_SOURCES = 2  # the paper protocol draws from CO3D and from MegaSynth
LOADER_WORKERS = 2


@dataclass
class DataScaleSettings:
    """``depthpe bench data-scale``: roots of each N of ``scenes`` scenes built in ``out`` from
    ``seed_scenes`` synthetic scenes of ``views`` frames of ``size`` = (H, W); the loader workers'
    memory over ``batches`` batches, the validation draw of ``val_scenes`` per source from ``seed``,
    and index / check (``check_scenes`` scenes) with each count of ``workers``."""

    scenes: list[int] = option(default_factory=lambda: [1000, 10000, 100000], nargs="+", metavar="N",
                               help="data root sizes to measure")
    out: str = option(str(Path(tempfile.gettempdir()) / "depthpe-bench-data-scale"), metavar="DIR",
                      help="where the roots are built and kept for the next run")
    overwrite: bool = overwrite_option()
    seed_scenes: int = option(4, metavar="K", help="real scene files written by `depthpe synth`, linked N/K times each")
    views: int = option(12, help="frames per seed scene")
    size: tuple[int, int] = option((DEFAULT_HEIGHT, DEFAULT_WIDTH), metavar=("H", "W"),
                                   help="seed scene frame size, `depthpe synth`'s")
    workers: list[int] = option(default_factory=lambda: [1, 2], nargs="+", metavar="K",
                                help="worker counts of index and check")
    check_scenes: int = option(64, metavar="M", help="scenes checked per N (`depthpe check --limit M`)")
    batches: int = option(4, help="batches each loader worker loads")
    val_scenes: int = option(2000, metavar="M", help="validation scenes drawn per source, the paper's")
    seed: int = option(0, help="validation seed")
    json: Optional[str] = option(None, help=JSON_HELP + " (the unrounded numbers of every table)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_plain_options(parser, DataScaleSettings)


def run(args: argparse.Namespace) -> int:
    from ..config import ConfigError

    if min(args.scenes) < 1 or args.seed_scenes < 1 or min(args.workers) < 1 or args.check_scenes < 1:
        raise ConfigError("--scenes, --seed-scenes, --workers and --check-scenes must be >= 1")
    from ..files.output_folder import owned_output_folder, settings_fingerprint

    fingerprint = settings_fingerprint(args, leave_out=("scenes", "check_scenes", "batches", "json", "val_scenes", "seed"))
    with owned_output_folder(args.out, "depthpe bench data-scale", fingerprint, replace=args.overwrite):
        return _measure(args)


def _measure(args: argparse.Namespace) -> int:
    """``run`` in the owned ``args.out``."""
    out = Path(args.out)
    seed_dir = build_seed_scenes(out, args.seed_scenes, args.views, tuple(args.size))
    memory = [("seed", args.seed_scenes, measure_worker_memory_in_child(seed_dir.parent.parent, seed_dir.parent.name,
                                                                        args.batches))]
    validation, throughput = [], []
    for n in sorted(set(args.scenes)):
        root, build_s, reused = build_root(out, n, seed_dir)
        _say(f"N={n}: root {'reused' if reused else f'built in {build_s:.1f} s'}: {root}")
        memory.append((n, n, measure_worker_memory_in_child(root, DATASET, args.batches)))
        validation.append(measure_val_draw(root, n, args.val_scenes, args.seed, out))
        throughput += measure_throughput(root, n, args.workers, args.check_scenes)
    print(format_memory_table(memory, args.batches))
    print()
    print(format_val_table(validation, args.val_scenes))
    print()
    print(format_throughput_table(throughput))
    if args.json:
        doc = {"memory": memory_rows(memory), "validation": validation, "throughput": throughput}
        atomic_write_bytes(args.json, (json.dumps(doc, indent=2) + "\n").encode())
    return 0


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Building the roots
# --------------------------------------------------------------------------------------------

def build_seed_scenes(out: Path, scenes: int, views: int, hw: tuple[int, int]) -> Path:
    """``depthpe synth`` ``scenes`` training scenes of ``views`` frames at ``hw`` = (H, W) into
    ``out/seed-<scenes>x<views>-<H>x<W>`` (kept: a rerun skips them); returns their split folder."""
    from depthpe.scenes.synth import DATASET_NAME, write_synth_dataset

    root = out / f"seed-{scenes}x{views}-{hw[0]}x{hw[1]}"
    write_synth_dataset(root, train_scenes=scenes, val_scenes=0, views=views, height=hw[0], width=hw[1],
                        workers=1, progress=False)
    return root / DATASET_NAME / "train"


def build_root(out: Path, n: int, seed_dir: Path) -> tuple[Path, float, bool]:
    """The data root of ``n`` scenes made of the seed scenes of ``seed_dir``: ``ROOT/scale/train``
    holds ``s0000000.h5`` ... hard links (``os.link``; scene i links seed file i mod K) and an
    ``index.json`` listing each under its own scene id. Reused when its index lists ``n`` scenes
    (the folder name carries the seed folder's, so other seed settings build another root).
    Returns ``(root, seconds spent building, reused)``."""
    from depthpe.scenes.format.scene_file import SceneFileError, read_index, write_index

    root = out / f"n{n}-{seed_dir.parent.parent.name}"
    split_dir = root / DATASET / SPLIT
    try:
        if len(read_index(split_dir)) == n:
            return root, 0.0, True
    except SceneFileError:
        pass
    t0 = time.perf_counter()
    seeds = read_index(seed_dir)
    split_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for i in range(n):
        seed = seeds[i % len(seeds)]
        name = f"s{i:07d}"
        target = split_dir / f"{name}.h5"
        if not target.exists():  # a build interrupted before its index keeps the links it made
            os.link(seed_dir / seed["path"], target)
        entries.append({**seed, "path": target.name, "scene_id": name})
    write_index(split_dir, entries, dataset=DATASET, split=SPLIT)  # last: a root without it is rebuilt
    return root, time.perf_counter() - t0, False


# --------------------------------------------------------------------------------------------
# Memory per loader worker
# --------------------------------------------------------------------------------------------

def process_memory() -> dict:
    """This process's memory in MB: ``rss`` (VmRSS of /proc/self/status), ``pss`` and ``private``
    (Private_Clean + Private_Dirty of /proc/self/smaps_rollup: pages no other process shares). NaN
    where /proc does not have them (not Linux)."""
    fields = {}
    for name in ("/proc/self/status", "/proc/self/smaps_rollup"):
        try:
            for line in Path(name).read_text().splitlines():
                key, _, value = line.partition(":")
                if value.strip().endswith("kB"):
                    fields[key] = int(value.split()[0]) / 1024
        except OSError:
            pass
    private = fields.get("Private_Clean", math.nan) + fields.get("Private_Dirty", math.nan)
    return {"rss": fields.get("VmRSS", math.nan), "pss": fields.get("Pss", math.nan), "private": private}


_batches_served = 0  # per process: batches this loader worker has collated
_report_after = 0  # set in the measuring process before its workers fork


def _collate_and_measure(samples):
    """The training ``collate``, plus in a loader worker, at its ``_report_after``-th batch, the
    worker's ``process_memory()`` as it is, after ``gc.collect()`` and after reading every scene entry
    of the dataset (``batch["memory"]``)."""
    from torch.utils.data import get_worker_info

    from depthpe.loader.batching import collate

    global _batches_served
    batch = collate(samples)
    _batches_served += 1
    if _batches_served == _report_after:
        info = get_worker_info()
        before = process_memory()
        gc.collect()
        after_gc = process_memory()
        _touch_every_entry(info.dataset)
        batch["memory"] = {"worker": info.id, "before": before, "after_gc": after_gc, "after_touch": process_memory()}
    return batch


def _touch_every_entry(dataset) -> int:
    """Read the path and id of every scene entry of a ``MultiViewDataset``: what a long run does as its
    samples reach every scene (each read writes the objects' reference counts, so their pages become
    the worker's private copies)."""
    return sum(len(e.path) + len(e.scene_id) for entries in dataset.entries for e in entries)


def measure_worker_memory(root: str, dataset: str, batches: int) -> dict:
    """Build the training dataset of ``root/dataset/train`` and its sampler as ``build_train_loader``
    does (tiny 56 px samples of 2 views), load ``batches`` batches in each of ``LOADER_WORKERS``
    workers and return what they measured, with the index's load time and Python heap (tracemalloc).
    Run it in a fresh process (``measure_worker_memory_in_child``): the workers fork from it."""
    import tracemalloc

    from torch.utils.data import DataLoader

    from depthpe.loader.config import DataConfig
    from depthpe.loader.datasets import MultiViewDataset
    from depthpe.loader.loaders import loader_kwargs
    from depthpe.loader.sampling import DynamicBatchSampler

    global _report_after
    cfg = DataConfig.from_dict({"sources": [{"name": dataset, "root": str(root)}], "views": [2, 2],
                                "aspect": [1, 1], "image_width": 56, "max_images_per_batch": 4})
    tracemalloc.start()
    traced = MultiViewDataset(cfg)
    heap_mb = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    del traced
    gc.collect()
    t0 = time.perf_counter()
    data = MultiViewDataset(cfg)
    load_s = time.perf_counter() - t0
    sampler = DynamicBatchSampler(cfg, data.scene_counts, seed=0, num_steps=batches * LOADER_WORKERS)
    _report_after = batches
    loader = DataLoader(data, batch_sampler=sampler, collate_fn=_collate_and_measure,
                        multiprocessing_context="fork",  # as training's on Linux (a spawned process defaults to spawn)
                        **loader_kwargs(LOADER_WORKERS))
    workers = [batch["memory"] for batch in loader if "memory" in batch]
    return {"load_s": load_s, "heap_mb": heap_mb, "workers": sorted(workers, key=lambda w: w["worker"])}


def measure_worker_memory_in_child(root: Path, dataset: str, batches: int) -> dict:
    """``measure_worker_memory`` in a spawned process, so that what this process holds (the results
    of the other measurements) is not inherited by the loader workers."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    _say(f"memory: {root}")
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(measure_worker_memory, str(root), dataset, batches).result()


# --------------------------------------------------------------------------------------------
# The validation draw and its manifest
# --------------------------------------------------------------------------------------------

def _draw_and_write(root: Path, per_source: int, seed: int, path: Path) -> dict:
    """The paper protocol's draw from ``VAL_SOURCES`` sources of ``root``'s scenes (``max_scenes``
    ``per_source`` each, ``selection: random``), the views of every drawn scene and the manifest
    written to ``path``; returns the seconds of each step, the scenes drawn and the file's digest."""
    from depthpe.loader.config import SourceConfig
    from depthpe.loader.datasets import SceneEvalDataset
    from ..evaluation.protocol import scene_indices, write_manifest

    sources = [SourceConfig(name=f"val{j}", root=str(root), split=SPLIT, dataset=DATASET, max_scenes=per_source)
               for j in range(VAL_SOURCES)]
    t0 = time.perf_counter()
    data = SceneEvalDataset(sources, views=8, seed=seed)
    t1 = time.perf_counter()
    drawn = scene_indices(data, None, "random", seed)
    t2 = time.perf_counter()
    manifest = {data.scene_key(i): data.view_indices(i, data.items[i][1].num_frames) for i in drawn}
    t3 = time.perf_counter()
    write_manifest(path, manifest, seed=seed, views=8)
    t4 = time.perf_counter()
    return {"load_s": t1 - t0, "draw_s": t2 - t1, "views_s": t3 - t2, "write_s": t4 - t3, "drawn": len(drawn),
            "kb": path.stat().st_size / 1024, "digest": hashlib.sha256(path.read_bytes()).hexdigest()}


def measure_val_draw(root: Path, n: int, per_source: int, seed: int, out: Path) -> dict:
    """``_draw_and_write`` twice with ``seed`` and once with ``seed + 1``: the first's figures, and
    whether the same seed wrote the same file and another seed another file."""
    _say(f"N={n}: validation draw")
    path = out / "val_manifest.json"
    first = _draw_and_write(root, per_source, seed, path)
    again = _draw_and_write(root, per_source, seed, path)
    other = _draw_and_write(root, per_source, seed + 1, path)
    return {**first, "scenes": n, "same_seed_identical": again["digest"] == first["digest"],
            "other_seed_differs": other["digest"] != first["digest"]}


# --------------------------------------------------------------------------------------------
# index and check throughput
# --------------------------------------------------------------------------------------------

def measure_throughput(root: Path, n: int, workers: list[int], check_scenes: int) -> list[dict]:
    """Rows of ``depthpe index`` (dry run, every file) and ``depthpe check`` (the first
    ``check_scenes`` scenes) on ``root`` with each worker count: files, seconds, processes used,
    and whether the results equal those of the first worker count."""
    import json
    from dataclasses import asdict

    from depthpe.scenes.format.check import SCENES_PER_WORKER, check_root
    from depthpe.scenes.parallel import workers_used
    from depthpe.scenes.format.reindex import FILES_PER_WORKER, rebuild_indexes

    rows, first = [], {}
    for task in ("index", "check"):
        for w in workers:
            _say(f"N={n}: {task} with {w} worker(s)")
            t0 = time.perf_counter()
            if task == "index":
                result = rebuild_indexes(root, dry_run=True, workers=w)
                files, per_worker = sum(len(r.entries) + len(r.skipped) for r in result), FILES_PER_WORKER
            else:
                reports, problems = check_root(root, limit=check_scenes, progress=False, workers=w)
                result = json.dumps([[asdict(r) for r in reports], problems])
                files, per_worker = len(reports), SCENES_PER_WORKER
            seconds = time.perf_counter() - t0
            first.setdefault(task, result)
            rows.append({"scenes": n, "task": task, "files": files, "workers": w, "seconds": seconds,
                         "used": workers_used(w, files, per_worker), "same": result == first[task],
                         "failed": sum(not r.ok for r in reports) if task == "check" else None})
    return rows


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------

def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def memory_rows(memory: list[tuple]) -> list[dict]:
    """The loader workers' memory per root (``(label, scenes, measure_worker_memory)``; the first is
    the baseline of the seed scenes alone), each a mean over the workers in MB: ``rss`` and
    ``private`` before reading, ``private_after_gc``, ``private_after_touch`` (after reading every
    entry), ``pss``, and ``index_mb``: private after every entry minus the seed root's (None for it)."""
    base = _mean_worker(memory[0][2], "after_touch", "private")
    rows = []
    for label, scenes, m in memory:
        after = _mean_worker(m, "after_touch", "private")
        rows.append({"label": label, "scenes": scenes, "load_s": m["load_s"], "heap_mb": m["heap_mb"],
                     "rss": _mean_worker(m, "before", "rss"), "private": _mean_worker(m, "before", "private"),
                     "private_after_gc": _mean_worker(m, "after_gc", "private"), "private_after_touch": after,
                     "pss": _mean_worker(m, "after_touch", "pss"), "index_mb": None if label == "seed" else after - base})
    return rows


def format_memory_table(memory: list[tuple], batches: int) -> str:
    """Markdown table of ``memory_rows``."""
    rows = [[f"{r['scenes']} ({r['label']})" if r["index_mb"] is None else str(r["scenes"]), f"{r['load_s']:.2f}",
             f"{r['heap_mb']:.1f}", f"{r['rss']:.0f}", f"{r['private']:.1f}", f"{r['private_after_gc']:.1f}",
             f"{r['private_after_touch']:.1f}", f"{r['pss']:.0f}",
             "-" if r["index_mb"] is None else f"{r['index_mb']:.1f} ({r['index_mb'] / TARGET_INDEX_MB:.2f})"]
            for r in memory_rows(memory)]
    title = (f"memory per loader worker ({LOADER_WORKERS} workers, {batches} batches each; MB, mean of the workers; "
             "index share = private after reading every entry minus the seed root's; ratio to the "
             f"{TARGET_INDEX_MB:.0f} MB target)")
    header = ["scenes", "index load s", "index heap MB", "worker RSS", "worker private", "private after gc",
              "private after every entry", "PSS then", "index share MB (/target)"]
    return title + "\n\n" + _table(header, rows)


def _mean_worker(m: dict, when: str, key: str) -> float:
    values = [w[when][key] for w in m["workers"]]
    return sum(values) / len(values) if values else math.nan


def format_val_table(validation: list[dict], per_source: int) -> str:
    """Markdown table of ``measure_val_draw`` per root."""
    rows = [[str(v["scenes"]), f"{VAL_SOURCES} x {min(per_source, v['scenes'])}", str(v["drawn"]),
             f"{v['load_s']:.2f}", f"{v['draw_s']:.3f}", f"{v['views_s']:.3f}", f"{v['write_s']:.3f}",
             f"{v['kb']:.0f}", "yes" if v["same_seed_identical"] else "NO",
             "yes" if v["other_seed_differs"] else "no"] for v in validation]
    header = ["scenes per source", "drawn (sources x scenes)", "manifest scenes", "index load s", "draw s",
              "views s", "write s", "manifest KB", "same seed: same file", "other seed: other file"]
    title = (f"validation draw (the paper protocol: {VAL_SOURCES} sources, max_scenes {per_source} each, "
             "selection random; views of attempt 0)")
    return title + "\n\n" + _table(header, rows)


def format_throughput_table(rows: list[dict]) -> str:
    """Markdown table of ``measure_throughput`` rows: scenes/s, against the first worker count of
    the same N and task (``vs linear`` = speed-up / workers) and against the smallest N."""
    base_worker = {(r["scenes"], r["task"]): r for r in rows if r["workers"] == rows[0]["workers"]}
    smallest = min(r["scenes"] for r in rows)
    out = []
    for r in rows:
        rate = r["files"] / r["seconds"]
        one = base_worker[(r["scenes"], r["task"])]
        speedup = rate / (one["files"] / one["seconds"])
        ref = next(s for s in rows if (s["scenes"], s["task"], s["workers"]) == (smallest, r["task"], r["workers"]))
        files = f"{r['files']} (first {r['files']} of {r['scenes']})" if r["task"] == "check" else str(r["files"])
        out.append([str(r["scenes"]), r["task"], files, f"{r['workers']} ({r['used']} used)", f"{r['seconds']:.1f}",
                    f"{rate:.1f}", f"{speedup:.2f}", f"{speedup * one['workers'] / r['workers']:.2f}",
                    f"{rate / (ref['files'] / ref['seconds']):.2f}", "yes" if r["same"] else "NO"])
    header = ["scenes", "task", "files", "workers", "seconds", "scenes/s", "speed-up", "vs linear",
              "rate vs smallest N", "same results"]
    title = ("`depthpe index` (dry run, every file) and `depthpe check` (--limit) throughput; speed-up against "
             f"{rows[0]['workers']} worker(s) of the same N")
    return title + "\n\n" + _table(header, out)
