"""``depthpe plot`` for the output folders of ``depthpe study correspondence``: the learning curves
of the global attention's matching, one colour per encoding (``correspondence_compare.encoding_label``).

One figure per evaluation setting (``correspondence_<setting>.png`` and ``.svg``): top-1, within-1
and the lift above the same-position lift (smallest radius) at the last global layer against the
training step; per group the mean over its seeds (line), ± the sample std (band), the chance level
of top-1 dashed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from depthpe.config import ConfigError
from depthpe.studies.correspondence.compare import group_correspondence_runs
from depthpe.analysis.plotting import CurveFigure, finish_figure
from depthpe.analysis.settings import GROUP_BY

__all__ = ["plot_correspondence", "CORRESPONDENCE_PANELS"]

# (title, row key or None for the lift at the smallest radius)
CORRESPONDENCE_PANELS = (("top-1 (last layer)", "top1"), ("within-1 (last layer)", "within1"),
                         ("lift − same-position lift (last layer)", None))


def _curve(runs: list[dict], setting: str, key: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values (seeds, steps)) of ``key`` at the last layer in ``setting``."""
    steps = np.array([point["step"] for point in runs[0]["curve"]], dtype=np.float64)
    values = np.array([[np.nan if point["settings"][setting][-1].get(key) is None
                        else float(point["settings"][setting][-1][key]) for point in run["curve"]] for run in runs])
    return steps, values


def _draw(ax, groups: dict[str, list[dict]], colours: dict, setting: str, key: str) -> int:
    for label, runs in groups.items():
        steps, values = _curve(runs, setting, key)
        mean = np.nanmean(values, axis=0)
        ax.plot(steps, mean, "o-", color=colours[label], linewidth=1.6, markersize=3, label=label)
        if len(runs) > 1:
            std = np.nanstd(values, axis=0, ddof=1)
            ax.fill_between(steps, mean - std, mean + std, color=colours[label], alpha=0.15, linewidth=0)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small")
    return len(groups)


def plot_correspondence(paths: Sequence[str], out_dir: str | Path, *, group_by: str = GROUP_BY) -> list[CurveFigure]:
    """Draw the curves of the correspondence folders ``paths`` (``depthpe plot CORR_DIR ... --out``);
    the runs must share their evaluation steps and settings (else a ``ConfigError``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grouped, meta = group_correspondence_runs(paths, group_by)
    groups = {label: [run for _, doc in members for run in doc["runs"]] for label, members in grouped.items()}
    every = {tuple(p["step"] for p in run["curve"]) for runs in groups.values() for run in runs}
    if len(every) != 1:
        raise ConfigError("the correspondence runs were evaluated at different steps; plot runs made with the same "
                          "--steps and --eval-steps")
    palette = plt.get_cmap("tab10")
    colours = {label: palette(i % 10) for i, label in enumerate(groups)}
    r0 = min(meta["radii"])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures = []
    for setting in (s["name"] for s in meta["settings"]):
        fig, axes = plt.subplots(1, len(CORRESPONDENCE_PANELS), figsize=(4.6 * len(CORRESPONDENCE_PANELS), 3.6),
                                 squeeze=False)
        lines = []
        for ax, (title, key) in zip(axes[0], CORRESPONDENCE_PANELS):
            lines.append(_draw(ax, groups, colours, setting, key or f"lift_minus_same_r{r0}"))
            ax.set_title(title if key else f"{title}, r={r0}")
        axes[0][0].axhline(meta["chance_top1"], color="grey", linestyle="--", linewidth=1)
        fig.suptitle(f"correspondence task, setting {setting} (mean ± std over seeds)")
        figures.append(finish_figure(fig, out, "correspondence", setting, lines))
    return figures
