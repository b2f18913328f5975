"""Validation curves of training runs: ``depthpe plot`` (docs/compare.md).

Each run folder's ``val_history.jsonl`` holds one JSON line per validation and dataset
({"step", "dataset", "metrics": {row: {metric: value, ...}}, "loss": {"l1", "gradient", "total"}}).
Per dataset one figure: one panel per metric (and row), one line per run, one colour per group
(runs of a group share it), the raw points faint and the smoothed curve (``ema``) on top. Written as
PNG and SVG with matplotlib's Agg backend. ``write_curves`` draws the runs of a ``depthpe compare``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..config import ConfigError
from ..files import safe_component
from .settings import GROUP_BY, PLOT_METRICS, PLOT_ROWS
from ..run.validation import VAL_HISTORY, read_val_history

__all__ = ["ema", "read_history", "series", "panel_specs", "CurveRun", "CurveFigure", "plot_curves", "run_plot",
           "write_curves", "finish_figure", "save_figure"]


def ema(steps: Sequence[float], values: Sequence[float], decay: float = 0.95, every: float = 1000.0) -> np.ndarray:
    """Bias-corrected exponential moving average for irregular steps.

    With ``a_i = decay ** ((s_i - s_{i-1}) / every)`` (the weight of the previous average),
    ``m_i = a_i * m_{i-1} + (1 - a_i) * x_i`` and ``c_i = a_i * c_{i-1} + (1 - a_i)`` from
    ``m_0 = c_0 = 0``, the smoothed value is ``m_i / c_i``. The average starts at step 0
    (``s_0 = 0``, the start of training); a first point at a step <= 0 uses ``s_0 = s_1 - every``.
    Steps must increase strictly; non-finite values are skipped (their smoothed value is NaN).
    """
    out = np.full(len(values), math.nan)
    m = c = 0.0
    prev = None
    for i, (step, value) in enumerate(zip(steps, values)):
        if not math.isfinite(value):
            continue
        if prev is None:
            prev = 0.0 if step > 0 else step - every
        a = decay ** ((step - prev) / every)
        m, c, prev = a * m + (1 - a) * value, a * c + (1 - a), step
        out[i] = m / c
    return out


def read_history(run_dir: str | Path) -> list[dict]:
    """The lines of ``run_dir/val_history.jsonl`` (``depthpe.run.validation.read_val_history``) sorted
    by step; a line without step or dataset is skipped and a (step, dataset) that appears twice keeps
    its later line (a resumed run that validated again). ConfigError when the run has no such file."""
    if not (Path(run_dir) / VAL_HISTORY).is_file():
        raise ConfigError(f"{run_dir}: no {VAL_HISTORY} (validation curves are written by `depthpe train` with "
                          "val.sources set)")
    latest: dict[tuple, dict] = {}
    for line in read_val_history(run_dir):
        try:
            latest[(int(line["step"]), str(line["dataset"]))] = line
        except (ValueError, KeyError, TypeError):
            continue
    return [latest[key] for key in sorted(latest)]


def series(history: Sequence[dict], dataset: str, metric: str, row: str = "native") -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of one curve: ``loss`` is the total validation loss, ``loss.TERM`` one of its
    terms, anything else ``metrics[row][metric]`` (NaN where a line lacks it)."""
    steps, values = [], []
    for line in history:
        if line.get("dataset") != dataset:
            continue
        if metric == "loss" or metric.startswith("loss."):
            value = (line.get("loss") or {}).get(metric.partition(".")[2] or "total")
        else:
            value = ((line.get("metrics") or {}).get(row) or {}).get(metric)
        steps.append(float(line["step"]))
        values.append(float(value) if value is not None else math.nan)
    return np.asarray(steps), np.asarray(values)


def panel_specs(metrics: Sequence[str], rows: Sequence[str]) -> list[tuple[str, str, str]]:
    """(title, metric, row) of each panel: a loss metric once, any other metric once per row."""
    specs = []
    for metric in metrics:
        if metric == "loss" or metric.startswith("loss."):
            specs.append((f"validation {metric}", metric, ""))
        else:
            specs += [(f"{row} {metric}", metric, row) for row in rows]
    return specs


@dataclass
class CurveRun:
    """One run to draw: its name, group label and parsed history."""

    name: str
    group: str
    history: list[dict]


@dataclass
class CurveFigure:
    """What ``plot_curves`` drew for one dataset: the files, panel titles and lines per panel."""

    dataset: str
    png: Path
    svg: Path
    panels: list[str]
    lines: int  # smoothed lines per panel (one per run with data)


def _draw_panel(ax, runs: Sequence[CurveRun], colours: dict, dataset: str, spec: tuple, decay: float,
                every: float) -> int:
    """One panel: per run the raw points (faint) and the smoothed curve; returns the number of curves."""
    title, metric, row = spec
    drawn, labelled = 0, set()
    for run in runs:
        steps, values = series(run.history, dataset, metric, row or "native")
        if not np.isfinite(values).any():
            continue
        colour = colours[run.group]
        ax.plot(steps, values, "o-", color=colour, alpha=0.2, markersize=2, linewidth=0.8)
        label = run.group if run.group not in labelled else None
        labelled.add(run.group)
        ax.plot(steps, ema(steps, values, decay, every), "-", color=colour, linewidth=1.6, label=label)
        drawn += 1
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    if drawn:
        ax.legend(fontsize="small")
    return drawn


def plot_curves(runs: Sequence[CurveRun], out_dir: str | Path, *, metrics: Sequence[str] = ("abs_rel", "delta1", "loss"),
                rows: Sequence[str] = ("native",), decay: float = 0.95, every: float = 1000.0) -> list[CurveFigure]:
    """Draw one figure per dataset (``curves_<dataset>.png`` and ``.svg`` in ``out_dir``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    groups = list(dict.fromkeys(run.group for run in runs))
    palette = plt.get_cmap("tab10")
    colours = {group: palette(i % 10) for i, group in enumerate(groups)}
    specs = panel_specs(metrics, rows)
    figures = []
    for dataset in sorted({line["dataset"] for run in runs for line in run.history}):
        fig, axes = plt.subplots(1, len(specs), figsize=(4.2 * len(specs), 3.4), squeeze=False)
        lines = [_draw_panel(ax, runs, colours, dataset, spec, decay, every) for ax, spec in zip(axes[0], specs)]
        fig.suptitle(f"{dataset}: validation (smoothed: decay {decay} per {every:g} steps)")
        figures.append(finish_figure(fig, out, "curves", dataset, lines))
    return figures


def finish_figure(fig, out: Path, prefix: str, dataset: str, lines: Sequence[int]) -> CurveFigure:
    """Lay out ``fig``, save it as ``out/<prefix>_<dataset>.png`` and ``.svg`` (one safe file-name
    component), close it; returns what was drawn (``lines``: the lines drawn per panel)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    stem = safe_component(f"{prefix}_{dataset}")
    png, svg = out / f"{stem}.png", out / f"{stem}.svg"
    save_figure(fig, png, svg)
    figure = CurveFigure(dataset, png, svg, [ax.get_title() for ax in fig.axes], max(lines, default=0))
    plt.close(fig)
    return figure


def save_figure(fig, png: Path, svg: Path) -> None:
    """Save ``fig`` as PNG and SVG, each written atomically."""
    import io

    from ..files import atomic_write_bytes

    for path, fmt in ((png, "png"), (svg, "svg")):
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=110)
        atomic_write_bytes(path, buf.getvalue())


def run_plot(paths: Sequence[str], out_dir: str | Path, *, group_by: str = GROUP_BY,
             metrics: Sequence[str] = PLOT_METRICS, rows: Sequence[str] = PLOT_ROWS) -> list[CurveFigure]:
    """``depthpe plot``: read every run folder's history and config, group, draw."""
    from .compare import group_label, lookup_key, run_config_values

    runs = []
    for path in paths:
        folder = Path(path)
        if not (folder / "config.yaml").is_file():
            raise ConfigError(f"{path}: not a run folder (no config.yaml)")
        label = group_label(lookup_key(run_config_values(folder), group_by, folder / "config.yaml"))
        runs.append(CurveRun(folder.name, label, read_history(folder)))
    if not any(run.history for run in runs):
        raise ConfigError(f"no validation line in the {VAL_HISTORY} of {', '.join(paths)}")
    return plot_curves(runs, out_dir, metrics=metrics, rows=rows)


def write_curves(meta: dict, out_dir: str | Path) -> list:
    """``depthpe compare --out``'s validation curves (``plot_curves``, default metrics) of the runs in
    ``depthpe.analysis.compare.run_compare``'s ``meta`` that have a ``val_history.jsonl``, into
    ``out_dir/curves``; returns the figures (an empty list when no run has a history)."""
    runs = [CurveRun(Path(i["run_dir"]).name, i["group"], read_history(i["run_dir"])) for i in meta["inputs"]
            if i["run_dir"] and (Path(i["run_dir"]) / VAL_HISTORY).is_file()]
    return plot_curves(runs, Path(out_dir) / "curves") if runs else []
