"""What ``depthpe probe attention`` writes: tables (CSV, JSON, Markdown) and figures (PNG, SVG).

In the output folder: ``lift.csv`` (one row per dataset, layer, head and radius), ``summary.json``
(the settings and, per dataset, the layer table, the scalars and URoPE's anchor table),
``summary.md`` (the tables as Markdown), ``lift_<dataset>.png/.svg`` (lift per layer: every head
as a dot, the head average as a line, the same-position control dashed, uniform attention at 1)
and for URoPE ``anchors_<dataset>.png/.svg`` (per layer, the lift of each head group on the matches
nearest each anchor). Every file is written atomically.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from ..files import atomic_target, atomic_write_bytes, safe_component
from .lift import LiftAccumulator

__all__ = ["write_probe_outputs", "format_layer_table", "LIFT_COLUMNS"]

LIFT_COLUMNS = ("dataset", "layer", "head", "radius", "pairs", "mass", "lift", "same_position_lift", "view_lift")


def write_probe_outputs(found: dict[str, LiftAccumulator], out_dir: str | Path, meta: dict) -> dict[str, Path]:
    """Write the tables and figures of ``found`` ({dataset: accumulator}) and ``meta`` (settings) to
    ``out_dir``; returns {name: path}."""
    out = Path(out_dir)
    paths = {}
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=LIFT_COLUMNS)
    writer.writeheader()
    for name, acc in sorted(found.items()):
        for row in acc.lift_rows():
            writer.writerow({"dataset": name, **{k: _num(v) for k, v in row.items()}})
    paths["csv"] = atomic_write_bytes(out / "lift.csv", buf.getvalue().encode())
    doc = {"meta": meta, "datasets": {name: {"scalars": acc.scalars(), "layers": acc.layer_rows(),
                                             "anchors": acc.anchor_rows(), "samples": acc.samples}
                                      for name, acc in sorted(found.items())}}
    paths["json"] = atomic_write_bytes(out / "summary.json", json.dumps(doc, indent=1, default=_json).encode())
    paths["md"] = atomic_write_bytes(out / "summary.md", _markdown(found, meta).encode())
    for name, acc in sorted(found.items()):
        paths[f"lift_{name}"] = _plot_lift(acc, name, out / safe_component(f"lift_{name}"))
        if acc.anchor_rows():
            paths[f"anchors_{name}"] = _plot_anchors(acc, name, out / safe_component(f"anchors_{name}"))
    return paths


def format_layer_table(acc: LiftAccumulator) -> str:
    """The layer table of one dataset as Markdown: lift (head average), best head, controls."""
    lines = ["| layer | r | matches | lift | best head (lift) | same-position lift | view lift |",
             "|---:|---:|---:|---:|---|---:|---:|"]
    for row in acc.layer_rows():
        lines.append(f"| {row['layer']} | {row['radius']} | {row['pairs']} | {row['lift']:.2f} | "
                     f"{row['best_head']} ({row['best_head_lift']:.2f}) | {row['same_position_lift']:.2f} | "
                     f"{row['view_lift']:.2f} |")
    return "\n".join(lines)


def _anchor_table(acc: LiftAccumulator) -> str:
    rows = acc.anchor_rows()
    if not rows:
        return ""
    lines = ["| layer | r | anchor | matches | lift per head group | winner | own group wins |",
             "|---:|---:|---:|---:|---|---:|---|"]
    for row in rows:
        lifts = ", ".join(f"{x:.2f}" for x in row["group_lift"])
        wins = "-" if row["own_wins"] is None else ("yes" if row["own_wins"] else "no")
        lines.append(f"| {row['layer']} | {row['radius']} | {row['anchor']:.3g} | {row['pairs']} | {lifts} | "
                     f"{'-' if row['winner'] is None else row['winner']} | {wins} |")
    return "\n".join(lines)


def _markdown(found: dict[str, LiftAccumulator], meta: dict) -> str:
    parts = [f"# Correspondence lift: {meta.get('model', '')} ({meta.get('global_pe', '')})", ""]
    for name, acc in sorted(found.items()):
        parts += [f"## {name} ({acc.samples} scenes)", "", format_layer_table(acc), ""]
        anchors = _anchor_table(acc)
        if anchors:
            parts += ["URoPE: lift per head group on the matches nearest each depth anchor", "", anchors, ""]
    return "\n".join(parts)


def _plot_lift(acc: LiftAccumulator, dataset: str, stem: Path) -> Path:
    """One panel per radius: lift per layer (dots: heads; line: head average; dashed: same position)."""
    plt = _pyplot()
    rows = acc.lift_rows()
    layers = acc.layer_rows()
    fig, axes = plt.subplots(1, len(acc.radii), figsize=(4.2 * len(acc.radii), 3.4), squeeze=False)
    for ax, r in zip(axes[0], acc.radii):
        heads = [row for row in rows if row["radius"] == r]
        mine = [row for row in layers if row["radius"] == r]
        ax.plot([h["layer"] for h in heads], [h["lift"] for h in heads], "o", color="0.6", markersize=3,
                label="heads")
        ax.plot([m["layer"] for m in mine], [m["lift"] for m in mine], "-o", color="C0", label="head average")
        ax.plot([m["layer"] for m in mine], [m["same_position_lift"] for m in mine], "--", color="C1",
                label="same position (control)")
        ax.axhline(1.0, color="k", linewidth=0.8, alpha=0.5)
        ax.set_title(f"radius {r}")
        ax.set_xlabel("global layer")
        ax.set_xticks(sorted({m["layer"] for m in mine}))
        ax.set_ylabel("correspondence lift")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(f"{dataset}: attention on true correspondences / uniform ({acc.samples} scenes)")
    fig.tight_layout()
    return _save(plt, fig, stem)


def _plot_anchors(acc: LiftAccumulator, dataset: str, stem: Path) -> Path:
    """URoPE: per layer a heatmap of group lift (rows: head group = anchor, columns: depth bin), largest radius."""
    import numpy as np

    plt = _pyplot()
    r = max(acc.radii)
    rows = [row for row in acc.anchor_rows() if row["radius"] == r]
    layers = sorted({row["layer"] for row in rows})
    G = len(acc.anchors)
    fig, axes = plt.subplots(1, len(layers), figsize=(2.6 * len(layers) + 1, 2.8), squeeze=False)
    labels = [f"{a:.2g}" for a in acc.anchors]
    for ax, layer in zip(axes[0], layers):
        grid = np.full((G, G), np.nan)
        for row in rows:
            if row["layer"] == layer:
                grid[:, row["bin"]] = row["group_lift"]
        image = ax.imshow(grid, cmap="viridis")
        ax.set_xticks(range(G), labels)
        ax.set_yticks(range(G), labels)
        ax.set_xlabel("nearest anchor of the match depth")
        ax.set_title(f"layer {layer}")
        fig.colorbar(image, ax=ax, fraction=0.046)
    axes[0][0].set_ylabel("anchor of the head group")
    fig.suptitle(f"{dataset}: URoPE lift per head group and depth (radius {r})")
    fig.tight_layout()
    return _save(plt, fig, stem)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, stem: Path) -> Path:
    """Write ``stem``.png and .svg atomically, close the figure; returns the PNG path. The suffix is
    appended, never swapped for a dot in the name (``lift_synth.v2`` -> ``lift_synth.v2.png``)."""
    for suffix in ("png", "svg"):
        with atomic_target(stem.with_name(f"{stem.name}.{suffix}")) as tmp:
            fig.savefig(tmp, format=suffix, dpi=110)
    plt.close(fig)
    return stem.with_name(f"{stem.name}.png")


def _num(value):
    return "" if isinstance(value, float) and math.isnan(value) else value


def _json(value):
    return float(value)
