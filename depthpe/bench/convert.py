"""``depthpe bench convert``: converter throughput (frames/s per worker) on fake native datasets."""

from __future__ import annotations

import argparse

DESCRIPTION = """\
Render procedural scenes once, write them in the native layout of each dataset (CO3D JPEG + float16
depth PNGs + annotation .jgz, WildRGB-D PNG + mm depth, ARKitScenes PNG + mm depth + .traj/.pincam,
MegaSynth RGBA PNG + OpenEXR depth) into a temporary folder, then convert each with
depthpe.data.convert and report, per dataset: frames converted, wall time, frames/s and frames/s per
worker (frames divided by the summed busy time of the scenes), and the stored bytes per frame.
Rendering and writing the fake raw data are not timed. Real datasets have larger source images
(CO3D ~1-2k px JPEGs, MegaSynth 512x512): pass --height/--width to approach them; decode and resize
time grows with the source size."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..testing.fake_datasets import WRITERS

    parser.add_argument("--dataset", choices=["all", *sorted(WRITERS)], default="all",
                        help="which layout to benchmark (default all)")
    parser.add_argument("--scenes", type=int, default=4, help="scenes per dataset (default 4)")
    parser.add_argument("--views", type=int, default=12, help="frames per scene (default 12)")
    parser.add_argument("--height", type=int, default=192, help="source image height (default 192)")
    parser.add_argument("--width", type=int, default=256, help="source image width (default 256)")
    parser.add_argument("--max-side", type=int, default=640, help="converter --max-side (default 640)")
    parser.add_argument("--workers", type=int, default=1, help="converter worker processes (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="scene seed (default 0)")


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

    from ..data.convert import convert
    from ..data.convert.common import ConvertOptions
    from ..data.format.scene_file import read_index
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
