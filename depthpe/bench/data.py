"""``depthpe bench data``: training data loader throughput (samples/s, images/s, images/s per worker)
per worker count, optionally on scene files it writes itself (``--format jpeg``: stored frames like
the converters write them) and next to the raw OpenCV decode + resize rate of the same images on one
core (``--raw``), the physical limit of a loader worker; ``--depth-codecs`` times reading the stored
depth with each codec of ``write_scene`` (and its size), ``--profile`` shows where the time of
building a batch goes (cProfile, in this process)."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ..config.options import add_plain_options, option
from depthpe.scenes.format.depth_codecs import DEFAULT_DEPTH_COMPRESSION, DEPTH_COMPRESSIONS
from ..files import atomic_write_bytes
from .settings import JSON_HELP, BenchedRun, config_option, overrides_option

BENCH_SOURCE = "bench"  # source name (and dataset folder) of the scene files written by --format
NOISE_STD = 3.0  # grey levels of pixel noise added to the rendered images (photo-like JPEG sizes)
SENSOR_NOISE, SENSOR_HOLES = 0.005, 0.05  # relative noise, hole fraction: --depth-codecs' sensor-like depth


@dataclass
class DataSettings(BenchedRun):
    """``depthpe bench data``: the training loader of the run ``config`` (its data section, with
    ``overrides``, ``image_width`` and ``views``) timed over ``batches`` batches per count of
    ``workers``. ``format``: read ``scenes`` procedural scenes of ``frames`` frames of
    ``frame_size`` = (H, W) written in this image format with ``depth_compression`` (in
    ``scene_dir``, else a temporary folder) instead of data.sources; ``raw``, ``depth_codecs``,
    ``profile``: the extra tables."""

    config: str = config_option("run config (its data section): a YAML file or a shipped config name")
    overrides: list[str] = overrides_option("dotted config overrides, e.g. data.image_width=224")
    workers: list[int] = option(default_factory=lambda: [0, 1, 2], nargs="+", help="worker counts to measure")
    batches: int = option(30, help="batches timed per worker count (after warm-up)")
    image_width: Optional[int] = option(None, help="training image width (none: the config's data.image_width)")
    views: Optional[tuple[int, int]] = option(None, metavar=("MIN", "MAX"),
                                              help="views per sample (none: the config's data.views)")
    format: Optional[str] = option(None, choices=("jpeg", "png"), help="write procedural scene files with images "
                                   "in this format and read them instead of data.sources (stored like the "
                                   "converters write them: JPEG quality 95, float16 depth; none: read data.sources)")
    frame_size: tuple[int, int] = option((480, 640), metavar=("H", "W"), help="stored frame size of the written "
                                         "scenes (what a converter's --max-side 640 keeps of 4:3 frames)")
    depth_compression: str = option(DEFAULT_DEPTH_COMPRESSION, choices=DEPTH_COMPRESSIONS, help="HDF5 codec of "
                                    "the written scenes' depth (write_scene's depth_compression, as the converters "
                                    "write)")
    depth_codecs: bool = option(False, store_true=True, help="also time reading the stored depth frames with each "
                                "depth codec (ms and KB per frame), as stored and with sensor-like noise")
    profile: bool = option(False, store_true=True, help="also profile building the batches in this process "
                           "(cProfile of MultiViewDataset.__getitems__ over --batches batches): share of each step")
    scenes: int = option(3, help="scenes written with --format")
    frames: int = option(32, help="frames per written scene")
    scene_dir: Optional[str] = option(None, help="folder for the written scenes, reused when it already holds "
                                      "them (none: a temporary folder)")
    raw: bool = option(False, store_true=True,
                       help="also measure cv2.imdecode + cv2.resize of the stored images on one core")
    json: Optional[str] = option(None, help=JSON_HELP + " (the unrounded numbers of every table)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_plain_options(parser, DataSettings)


def measure_loader(data_cfg, *, num_workers: int, batches: int, seed: int = 0) -> dict:
    """Time ``batches`` batches of the training loader after a warm-up of ``max(2, num_workers)``
    batches. Returns samples/s, images/s, images/s per worker (the main process counts as one
    worker when ``num_workers`` is 0) and seconds per batch, and what they are made of: the samples
    and images of the timed batches and their seconds."""
    from depthpe.loader.loaders import build_train_loader

    warmup = max(2, num_workers)
    loader = build_train_loader(data_cfg, seed=seed, num_workers=num_workers, num_steps=warmup + batches)
    it = iter(loader)
    for _ in range(warmup):
        next(it)
    samples = images = 0
    t0 = time.perf_counter()
    for batch in it:
        samples += batch["images"].shape[0]
        images += batch["images"].shape[0] * batch["images"].shape[1]
    dt = time.perf_counter() - t0
    return {"samples_per_s": samples / dt, "images_per_s": images / dt,
            "images_per_s_per_worker": images / dt / max(1, num_workers), "s_per_batch": dt / batches,
            "samples": samples, "images": images, "seconds": dt}


def write_bench_scenes(root: Path, *, scenes: int, frames: int, frame_hw: tuple[int, int], fmt: str,
                       seed: int = 0, depth_compression: str = DEFAULT_DEPTH_COMPRESSION) -> Path:
    """Write ``scenes`` procedural scenes of ``frames`` frames at ``frame_hw`` = (H, W) pixels to
    ``root/bench/train`` (images in ``fmt``, JPEG quality 95, float16 depth stored with
    ``depth_compression``: the converters' defaults) unless its index.json exists. Scenes are
    rendered at half size and enlarged 2x (K exactly, depth nearest) with pixel noise of
    ``NOISE_STD`` grey levels, which makes their JPEG sizes photo-like. Returns the split folder."""
    import cv2
    import torch

    from depthpe.scenes.format.scene_file import write_index, write_scene
    from depthpe.scenes.synth import generate_scene
    from ..geometry import resize_intrinsics

    split_dir = root / BENCH_SOURCE / "train"
    if (split_dir / "index.json").is_file():
        return split_dir
    split_dir.mkdir(parents=True, exist_ok=True)
    (h, w), rng, entries = frame_hw, np.random.default_rng(seed), []
    for i in range(scenes):
        s = generate_scene(seed + i, frames, max(8, h // 2), max(8, w // 2))
        fy, fx = h / s["depth"].shape[1], w / s["depth"].shape[2]
        images = [np.clip(cv2.resize(im, (w, h), interpolation=cv2.INTER_LINEAR)
                          + rng.normal(0, NOISE_STD, (h, w, 3)), 0, 255).astype(np.uint8) for im in s["images"]]
        depth = np.stack([cv2.resize(d, (w, h), interpolation=cv2.INTER_NEAREST_EXACT) for d in s["depth"]])
        K = resize_intrinsics(torch.from_numpy(s["K"]), fx, fy).numpy()
        entries.append(write_scene(split_dir / f"scene_{i:03d}.h5", images=images, depth=depth, K=K, w2c=s["w2c"],
                                   dataset=BENCH_SOURCE, scene_id=f"scene_{i:03d}", split="train", metric=False,
                                   depth_units="scene", image_format=fmt, depth_compression=depth_compression))
    write_index(split_dir, entries, dataset=BENCH_SOURCE, split="train")
    return split_dir


def _write_in_child(root: Path, **kwargs) -> None:
    """``write_bench_scenes(root, **kwargs)`` in a spawned process, so that writing (resizing and
    encoding 480x640 frames with OpenCV's thread pool) leaves neither its memory nor a live OpenCV
    pool in the process whose loader workers are then measured. (Forking after OpenCV used its pool
    once hung the workers; ``depthpe.loader.workers`` now shrinks the pool around every fork, so this
    is a second line of defence, not the only one.) The executor ends its worker by a message, not
    a signal: ``multiprocessing.Pool``'s exit sends SIGTERM and waits without a limit, which once
    hung a CI run for 10 minutes on a worker that did not die."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(write_bench_scenes, root, **kwargs).result()


def stored_images(split_dir: Path, limit: int = 200) -> list[bytes]:
    """The encoded image bytes of up to ``limit`` frames of the scene files listed in ``split_dir``."""
    import h5py

    from depthpe.scenes.format.scene_file import read_index

    out: list[bytes] = []
    for entry in read_index(split_dir):
        with h5py.File(split_dir / entry["path"], "r") as f:
            out += [np.asarray(b).tobytes() for b in f["images"][: max(0, limit - len(out))]]
    return out


def raw_decode_rate(encoded: list[bytes], width: int, repeats: int = 3) -> float:
    """Images/s of ``cv2.imdecode`` + ``cv2.resize`` (INTER_AREA, to ``width`` at the stored aspect)
    of the encoded images on one core (OpenCV with one thread): the least work a loader does per view."""
    import cv2

    from depthpe.scenes.threads import one_thread

    with one_thread():
        t0 = time.perf_counter()
        for _ in range(repeats):
            for data in encoded:
                img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
                cv2.resize(img, (width, round(width * img.shape[0] / img.shape[1])), interpolation=cv2.INTER_AREA)
        return repeats * len(encoded) / (time.perf_counter() - t0)


def stored_depth(split_dir: Path, limit: int = 96) -> np.ndarray:
    """The stored depth (N, H, W) of up to ``limit`` frames of the scene files listed in ``split_dir``."""
    import h5py

    from depthpe.scenes.format.scene_file import read_index

    out: list[np.ndarray] = []
    for entry in read_index(split_dir):
        with h5py.File(split_dir / entry["path"], "r") as f:
            out += list(f["depth"][: max(0, limit - len(out))])
    return np.stack(out)


def sensor_like(depth: np.ndarray, seed: int = 0) -> np.ndarray:
    """``depth`` with the texture of sensor depth, in its own dtype: relative noise of
    ``SENSOR_NOISE`` and ``SENSOR_HOLES`` of the pixels set to 0 (smooth rendered depth compresses
    far better than measured depth)."""
    rng = np.random.default_rng(seed)
    noisy = depth.astype(np.float32) * (1 + SENSOR_NOISE * rng.standard_normal(depth.shape, dtype=np.float32))
    noisy[rng.random(depth.shape) < SENSOR_HOLES] = 0
    return noisy.astype(depth.dtype)


def depth_codec_rates(depth: np.ndarray, folder: Path, repeats: int = 3) -> dict[str, tuple[float, float]]:
    """For each depth codec of ``write_scene``: (ms to read one frame of ``depth`` (N, H, W) stored
    with it, the median over ``repeats`` passes; KB per frame in the file)."""
    import h5py

    from depthpe.scenes.format.scene_file import depth_filters

    out = {}
    for codec in DEPTH_COMPRESSIONS:
        path = folder / f"depth_{codec}.h5"
        with h5py.File(path, "w") as f:
            f.create_dataset("depth", data=depth, chunks=(1, *depth.shape[1:]), **depth_filters(codec))
        times = []
        with h5py.File(path, "r") as f:
            node = f["depth"]
            for _ in range(repeats):
                t0 = time.perf_counter()
                for i in range(len(depth)):
                    node[i]
                times.append((time.perf_counter() - t0) / len(depth))
        out[codec] = (1e3 * float(np.median(times)), path.stat().st_size / len(depth) / 1e3)
    return out


def depth_codec_table(split_dirs: list[Path], folder: Path) -> dict:
    """``--depth-codecs``: the stored depth frames of ``split_dirs`` read back with each codec, as
    stored and sensor-like -> {"frames", "height", "width", "dtype", "rates": {variant: {codec:
    {"ms_per_frame", "kb_per_frame"}}}} (``depth_codec_rates``, files written in ``folder``)."""
    depth = np.concatenate([stored_depth(d) for d in split_dirs])
    rates = {name: {codec: {"ms_per_frame": ms, "kb_per_frame": kb}
                    for codec, (ms, kb) in depth_codec_rates(variant, folder).items()}
             for name, variant in (("as stored", depth), ("sensor-like", sensor_like(depth)))}
    return {"frames": len(depth), "height": depth.shape[1], "width": depth.shape[2], "dtype": str(depth.dtype),
            "rates": rates}


def _print_depth_codecs(table: dict) -> None:
    print(f"\nreading {table['frames']} stored {table['dtype']} depth frames of {table['height']}x{table['width']} "
          "per codec (ms per frame / KB per frame):")
    print("| depth | " + " | ".join(DEPTH_COMPRESSIONS) + " |")
    print("|---|" + "---|" * len(DEPTH_COMPRESSIONS))
    for name, rates in table["rates"].items():
        print(f"| {name} | " + " | ".join(f"{r['ms_per_frame']:.2f} ms / {r['kb_per_frame']:.0f} KB"
                                          for r in rates.values()) + " |")


# --profile: step of building a batch -> the functions whose cumulative time it is (cProfile names)
PROFILE_STEPS = {
    "JPEG decoding (cv2.imdecode)": ("<imdecode>",),
    "image bytes read + checks": ("read_image",),  # minus the decoding inside it
    "depth read + float16 -> float32": ("read_depth",),
    "crop + resize (image, depth, mask)": ("crop_and_resize",),
    "colour jitter": ("jitter_views",),
    "uint8 -> float32 images": ("_images_to_float",),
    "depth / scale": ("_scaled_depth",),
    "normalization (cameras, median depth)": ("_normalize_views",),
}


PROFILE_REST = "rest (stacking, masking, Python)"  # the last row of the --profile table


def profile_batches(data_cfg, *, batches: int, seed: int = 0) -> tuple[int, float, dict[str, float]]:
    """cProfile of ``MultiViewDataset.__getitems__`` over ``batches`` training batches (after one
    warm-up batch) in this process, OpenCV and torch with one thread as in a worker -> (images,
    seconds in ``__getitems__``, seconds per ``PROFILE_STEPS`` step)."""
    import cProfile
    import pstats

    from depthpe.loader.datasets import MultiViewDataset
    from depthpe.loader.sampling import DynamicBatchSampler
    from depthpe.scenes.threads import one_thread

    dataset = MultiViewDataset(data_cfg, train=True)
    keys = list(DynamicBatchSampler(data_cfg, dataset.scene_counts, seed=seed, num_steps=batches + 1))
    dataset.__getitems__(keys[0])
    profiler = cProfile.Profile()
    with one_thread():
        profiler.runcall(lambda: [dataset.__getitems__(k) for k in keys[1:]])
    stats = pstats.Stats(profiler).stats  # (file, line, name) -> (calls, prim. calls, tottime, cumtime, callers)
    cumulative = {name: 0.0 for names in PROFILE_STEPS.values() for name in names}
    total = 0.0
    for (_, _, name), (_, _, _, cum, _) in stats.items():
        if name in cumulative:
            cumulative[name] += cum
        if name == "__getitems__":
            total = max(total, cum)
    steps = {step: sum(cumulative[n] for n in names) for step, names in PROFILE_STEPS.items()}
    steps["image bytes read + checks"] -= steps["JPEG decoding (cv2.imdecode)"]
    images = sum(k.num_views for batch in keys[1:] for k in batch)
    return images, total, steps


def _print_profile(profile: dict, batches: int) -> None:
    """The table of ``profile_table``'s result."""
    images, total, steps = profile["images"], profile["seconds"], profile["steps"]
    print(f"\nbuilding {batches} batches in this process (cProfile, MultiViewDataset.__getitems__): {images} images, "
          f"{total:.2f} s, {1e3 * total / images:.2f} ms per image")
    print("| step | share | ms per image |")
    print("|---|---|---|")
    for step, seconds in [*steps.items(), (PROFILE_REST, profile["rest_seconds"])]:
        print(f"| {step} | {100 * seconds / total:.1f}% | {1e3 * seconds / images:.2f} |")


def profile_table(data_cfg, batches: int, seed: int) -> dict:
    """``--profile``: ``profile_batches`` -> {"images", "seconds", "steps": {step: s}, "rest_seconds"
    (``PROFILE_REST``: the seconds no step accounts for)}."""
    images, total, steps = profile_batches(data_cfg, batches=batches, seed=seed)
    return {"images": images, "seconds": total, "steps": steps, "rest_seconds": total - sum(steps.values())}


def _overrides(args: argparse.Namespace, scene_root: Path | None) -> list[str]:
    """Config overrides of the command line flags (width, views, the written scenes as the only source)."""
    out = list(args.overrides)
    if args.image_width is not None:
        out.append(f"data.image_width={args.image_width}")
    if args.views is not None:
        out.append(f"data.views=[{args.views[0]},{args.views[1]}]")
    if scene_root is not None:
        out.append(f"data.sources=[{{name: {BENCH_SOURCE}, root: '{scene_root}', split: train}}]")
    return out


def loader_rows(measured: list[tuple[int, dict]], raw: float | None) -> list[dict]:
    """The rows of the loader table: per (worker count, ``measure_loader`` result) in the given
    order, that result with ``workers``, ``x_first_row`` (samples/s over the first row's) and, with
    ``raw`` (images/s of ``raw_decode_rate``), ``per_worker_over_raw``."""
    base = measured[0][1]["samples_per_s"]
    rows = []
    for workers, result in measured:
        row = {"workers": workers, **result, "x_first_row": result["samples_per_s"] / base}
        if raw:
            row["per_worker_over_raw"] = result["images_per_s_per_worker"] / raw
        rows.append(row)
    return rows


def _print_table(args, cfg, rows: list[dict], raw: float | None, split_dirs: list[Path]) -> None:
    print(f"data loader, {args.config}: width {cfg.data.image_width}, views {cfg.data.views}, aspect "
          f"{cfg.data.aspect}, {cfg.data.max_images_per_batch} images per batch")
    if raw is not None:
        print(f"raw OpenCV decode + resize to width {cfg.data.image_width} of the stored images, one core: "
              f"{raw:.1f} images/s ({', '.join(str(d) for d in split_dirs)})")
    print("| workers | samples/s | images/s | images/s per worker | s/batch | x first row |"
          + (" per worker / raw |" if raw else ""))
    print("|---|---|---|---|---|---|" + ("---|" if raw else ""))
    for r in rows:
        print(f"| {r['workers']} | {r['samples_per_s']:.1f} | {r['images_per_s']:.1f} | "
              f"{r['images_per_s_per_worker']:.1f} | {r['s_per_batch']:.3f} | {r['x_first_row']:.2f} |"
              + (f" {r['per_worker_over_raw']:.2f} |" if raw else ""))


def _write_json(path: str, args, cfg, result: dict) -> None:
    """``--json``: the run, its data settings and every table's unrounded numbers, written atomically."""
    doc = {"config": args.config, "overrides": list(args.overrides),
           "data": {"image_width": cfg.data.image_width, "views": list(cfg.data.views),
                    "aspect": list(cfg.data.aspect), "max_images_per_batch": cfg.data.max_images_per_batch},
           **result}
    atomic_write_bytes(path, (json.dumps(doc, indent=2) + "\n").encode())


def run(args: argparse.Namespace) -> int:
    from ..run import load_run_config
    from ..run.preflight import check_data_sources

    with tempfile.TemporaryDirectory(prefix="depthpe_bench_data_") as tmp:
        scene_root = None
        if args.format:
            scene_root = Path(args.scene_dir or tmp)
            _write_in_child(scene_root, scenes=args.scenes, frames=args.frames, frame_hw=tuple(args.frame_size),
                            fmt=args.format, depth_compression=args.depth_compression)
        cfg = load_run_config(args.config, _overrides(args, scene_root))
        check_data_sources(cfg, validation=False)
        split_dirs = [s.split_dir for s in cfg.data.sources]
        # Measure with workers first, before this process decodes anything itself (0 workers, --raw), so
        # that every worker setting starts from the same parent state (no warm OpenCV pool or page cache
        # of decoded frames in the parent).
        order = sorted(args.workers, key=lambda w: w == 0)
        measured = {w: measure_loader(cfg.data, num_workers=w, batches=args.batches, seed=cfg.seed) for w in order}
        raw = None
        if args.raw:
            raw = raw_decode_rate([b for d in split_dirs for b in stored_images(d)], cfg.data.image_width)
        result = {"rows": loader_rows([(w, measured[w]) for w in args.workers], raw), "raw_images_per_s": raw}
        _print_table(args, cfg, result["rows"], raw, split_dirs)
        if args.depth_codecs:
            result["depth_codecs"] = depth_codec_table(split_dirs, Path(tmp))
            _print_depth_codecs(result["depth_codecs"])
        if args.profile:
            result["profile"] = profile_table(cfg.data, args.batches, cfg.seed)
            _print_profile(result["profile"], args.batches)
    if args.json:
        _write_json(args.json, args, cfg, result)
    return 0
