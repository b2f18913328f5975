"""``depthpe bench synth``: speed of the procedural scene generator against its 60 s target."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from ..config.options import add_plain_options, option

DESCRIPTION = """\
Generate scenes into a temporary folder with depthpe.scenes.synth.write_synth_dataset and report the
render time (ray casting and shading) and the write time (JPEG + HDF5) summed over scenes, the
wall time, the CPU time of this process and its workers, scenes/s, views/s and the ratio of the
wall time to the target: 64 scenes x 12 views at 112x112 in under 60 s on 2 CPU cores (the target
is scaled linearly with --scenes x --views x pixels for other sizes). All scenes go to the train
split. On a shared machine compare the CPU time too: the wall time includes waiting for a core."""

REFERENCE_WORK = 64 * 12 * 112 * 112  # pixels rendered by the reference run

TARGET_S = 60.0


@dataclass
class SynthSettings:
    """``depthpe bench synth``: generate ``scenes`` scenes of ``views`` views at ``height`` x ``width``
    with ``workers`` processes from ``seed``, against ``target_s`` seconds for the reference size."""

    scenes: int = option(64, help="scenes to generate")
    views: int = option(12, help="views per scene")
    height: int = option(112, help="image height")
    width: int = option(112, help="image width")
    workers: int = option(1, help="worker processes")
    seed: int = option(0, help="dataset seed")
    target_s: float = option(TARGET_S, help="target wall time in seconds for 64 scenes x 12 views at 112x112, "
                             "scaled linearly for other sizes")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_plain_options(parser, SynthSettings)


def format_table(summary: dict, scenes: int, views: int, target_s: float, cpu_s: float) -> str:
    """Markdown table of a write_synth_dataset summary; ``target_s`` is already scaled to this run."""
    st = summary["splits"]["train"]
    wall = summary["wall_s"]
    rows = [
        ("scenes x views", f"{scenes} x {views} at {summary['height']}x{summary['width']}"),
        ("render (sum over scenes)", f"{st['render_s']:.2f} s"),
        ("write (sum over scenes)", f"{st['write_s']:.2f} s"),
        ("wall", f"{wall:.2f} s"),
        ("CPU (process + workers)", f"{cpu_s:.2f} s"),
        ("scenes/s", f"{scenes / wall:.2f}"),
        ("views/s", f"{scenes * views / wall:.1f}"),
        ("wall / target", f"{wall / target_s:.2f} (target {target_s:.3g} s; < 1 meets it)"),
        ("CPU / target", f"{cpu_s / target_s:.2f}"),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [f"| {'quantity':<{width}} | value |", f"|{'-' * (width + 2)}|-------|"]
    lines += [f"| {k:<{width}} | {v} |" for k, v in rows]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    import resource
    import tempfile

    from depthpe.scenes.synth import write_synth_dataset

    def cpu_seconds() -> float:
        total = 0.0
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
            r = resource.getrusage(who)
            total += r.ru_utime + r.ru_stime
        return total

    cpu0 = cpu_seconds()
    with tempfile.TemporaryDirectory(prefix="depthpe-bench-synth-") as tmp:
        summary = write_synth_dataset(
            tmp,
            train_scenes=args.scenes,
            val_scenes=0,
            views=args.views,
            height=args.height,
            width=args.width,
            seed=args.seed,
            workers=args.workers,
            progress=False,
        )
    cpu_s = cpu_seconds() - cpu0
    target = args.target_s * args.scenes * args.views * args.height * args.width / REFERENCE_WORK
    print(format_table(summary, args.scenes, args.views, target, cpu_s))
    return 0
