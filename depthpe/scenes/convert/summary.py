"""The summary of a conversion: counts of scenes and frames, skip and drop reasons, throughput
(``convert_summary.json``) and its human-readable form (``format_summary``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from pathlib import Path

from ..format.image_bytes import orientation_notes

__all__ = ["SUMMARY_FILE", "format_summary"]

SUMMARY_FILE = "convert_summary.json"


def _summarize(module, src, out, options, refs, results, entries, split_info, wall) -> dict:
    """The summary dict of a conversion (saved as ``convert_summary.json``) from its ``convert_scene``
    results, the index entries per split, the split file info and the wall time (seconds)."""
    dropped: Counter = Counter()
    skip_reasons: Counter = Counter()
    written = [r for r in results if r["status"] == "written"]
    for r in results:
        dropped.update(r["dropped"] if r["status"] != "existing" else {})
        if r["status"] == "skipped":
            skip_reasons[r["kind"]] += 1
    frames_written = sum(r["frames"] for r in written)
    busy = sum(r["seconds"] for r in written)
    opts = asdict(options)
    return {
        "dataset": module.NAME,
        "src": str(src),
        "out": str(Path(out) / module.NAME),
        "options": opts,
        "scenes_found": len(refs),
        "scenes_processed": len(results),
        "scenes_written": len(written),
        "scenes_existing": sum(r["status"] == "existing" for r in results),
        "scenes_skipped": sum(r["status"] == "skipped" for r in results),
        "skip_reasons": dict(skip_reasons),
        "skipped": [{"scene_id": r["scene_id"], "reason": r["reason"]} for r in results
                    if r["status"] == "skipped"],
        "frames_written": frames_written,
        "frames_dropped": dict(dropped),
        "exif_orientation_ignored": sum(r.get("exif_orientation_ignored", 0) for r in results),
        "splits": {s: {"scenes": len(e), "frames": sum(x["num_frames"] for x in e)}
                   for s, e in sorted(entries.items())},
        "split_file": split_info,
        "wall_s": wall,
        "frames_per_s": frames_written / wall if wall > 0 else 0.0,
        "frames_per_s_per_worker": frames_written / busy if busy > 0 else 0.0,
    }


def format_summary(summary: dict) -> str:
    """Human-readable multi-line summary of ``convert_dataset``'s result."""
    lines = [
        f"{summary['dataset']}: {summary['scenes_found']} scenes found, {summary['scenes_processed']} processed: "
        f"{summary['scenes_written']} written, {summary['scenes_existing']} already done, "
        f"{summary['scenes_skipped']} skipped",
        f"frames written: {summary['frames_written']}; dropped: "
        + (", ".join(f"{k} {v}" for k, v in sorted(summary["frames_dropped"].items())) or "none"),
    ]
    lines += [f"note: {line}" for line in orientation_notes(summary.get("exif_orientation_ignored", 0))]
    for split, st in summary["splits"].items():
        lines.append(f"  {split}: {st['scenes']} scenes, {st['frames']} frames in index "
                     f"-> {summary['out']}/{split}")
    for item in summary["skipped"][:20]:
        lines.append(f"  skipped {item['scene_id']}: {item['reason']}")
    if len(summary["skipped"]) > 20:
        lines.append(f"  ... {len(summary['skipped']) - 20} more skipped scenes in {SUMMARY_FILE}")
    lines.append(
        f"time {summary['wall_s']:.1f} s, {summary['frames_per_s']:.1f} frames/s "
        f"({summary['frames_per_s_per_worker']:.1f} frames/s per worker); split: {summary['split_file']['file']}"
    )
    return "\n".join(lines)
