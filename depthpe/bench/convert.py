"""``depthpe bench convert``: converter throughput (frames/s per worker) on fake native datasets."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from ..config.options import add_plain_options, option
from depthpe.scenes.convert.options import ConvertOptions
from ..testing.fake_datasets import WRITERS

DESCRIPTION = """\
Render procedural scenes once, write them in the native layout of each dataset (CO3D JPEG + float16
depth PNGs + annotation .jgz, WildRGB-D PNG + mm depth, ARKitScenes PNG + mm depth + .traj/.pincam,
MegaSynth RGBA PNG + OpenEXR depth) into a temporary folder, then convert each with
depthpe.scenes.convert and report, per dataset: frames converted, wall time, frames/s and frames/s per
worker (frames divided by the summed busy time of the scenes), and the stored bytes per frame.
Rendering and writing the fake raw data are not timed. Real datasets have larger source images
(CO3D ~1-2k px JPEGs, MegaSynth 512x512): pass --height/--width to approach them; decode and resize
time grows with the source size."""


@dataclass
class ConvertSettings:
    """``depthpe bench convert``: ``scenes`` fake scenes of ``views`` frames at ``height`` x ``width``
    (from ``seed``) in the layout ``dataset`` (``all``: every layout of ``WRITERS``), converted with
    ``max_side`` and ``workers`` as ``depthpe convert`` does."""

    dataset: str = option("all", choices=("all", *sorted(WRITERS)), help="which layout to benchmark")
    scenes: int = option(4, help="scenes per dataset")
    views: int = option(12, help="frames per scene")
    height: int = option(192, help="source image height")
    width: int = option(256, help="source image width")
    max_side: int = option(ConvertOptions.max_side, help="converter --max-side")
    workers: int = option(1, help="converter worker processes")
    seed: int = option(0, help="scene seed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_plain_options(parser, ConvertSettings)


def format_table(rows: list[dict]) -> str:
    """Markdown table of per-dataset benchmark rows."""
    header = "| dataset | source HxW | stored HxW | frames | wall s | frames/s | frames/s per worker | KB/frame |"
    lines = [header, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['src_size']} | {r['out_size']} | {r['frames']} | {r['wall_s']:.2f} "
            f"| {r['fps']:.1f} | {r['fps_worker']:.1f} | {r['kb_per_frame']:.0f} |"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    import tempfile
    from pathlib import Path

    from depthpe.scenes.convert import convert
    from depthpe.scenes.format.scene_file import read_index
    from ..testing import fake_datasets as fake

    names = sorted(fake.WRITERS) if args.dataset == "all" else [args.dataset]
    scenes = fake.make_scenes(args.scenes, args.views, args.height, args.width, seed=args.seed)
    rows = []
    with tempfile.TemporaryDirectory(prefix="depthpe-bench-convert-") as tmp:
        for name in names:
            raw, out = Path(tmp) / "raw" / name, Path(tmp) / "out"
            fake.WRITERS[name](raw, scenes)
            options = ConvertOptions(max_side=args.max_side, workers=args.workers, val_scenes=0,
                                     progress=False)
            summary = convert(name, raw, out, options)
            nbytes = sum(p.stat().st_size for p in (out / name).glob("*/*.h5"))
            entries = [e for s in summary["splits"] for e in read_index(out / name / s)]
            frames = max(1, summary["frames_written"])
            rows.append({
                "dataset": name,
                "src_size": f"{args.height}x{args.width}",
                "out_size": f"{entries[0]['height']}x{entries[0]['width']}" if entries else "-",
                "frames": summary["frames_written"],
                "wall_s": summary["wall_s"],
                "fps": summary["frames_per_s"],
                "fps_worker": summary["frames_per_s_per_worker"],
                "kb_per_frame": nbytes / frames / 1024,
            })
    print(format_table(rows))
    print(f"{args.scenes} scenes x {args.views} frames per dataset, {args.workers} worker(s); "
          "rendering the fake raw data is not timed.")
    return 0
