"""Camera-noise sweeps (``depthpe study camera-noise``, docs/evaluation.md "Noisy cameras"): the
folder a sweep writes, its table (``depthpe compare SWEEP``) and its figure (``depthpe plot SWEEP``).

A sweep folder holds ``sweep.json`` (the levels, the perturbation seed and each model's evaluation
folders, relative to the sweep folder) and one ``depthpe eval`` folder per model and level
(``<label>/level_<i>/``), every one on the same manifest. Level ``i`` perturbs every input camera
by ``rotation_deg`` degrees, ``translation`` x the mean baseline and ``focal`` x the focal length at
once (``depthpe.config.camera_noise.CameraNoise``); the first level is the one the others are
measured against (normally no noise).

Per dataset, group (``--group-by``, default ``model.global_pe``: the seeds of one encoding) and
level, the table holds mean ± std over seeds (``compare.seed_stats``) and two paired per-scene
comparisons of native AbsRel with bootstrap 95% intervals (``compare.paired_comparison``): against
the same group at the first level (how much the noise costs) and against the reference group at the
same level (whether an encoding's edge survives the noise).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from depthpe.config import ConfigError
from depthpe.files import atomic_write_bytes, safe_component
from depthpe.analysis.compare import (common_datasets, paired_cells, mean_std_text, row_value, check_manifests, group_inputs, group_scene_values,
                      markdown_tables, paired_comparison, resolve_input, seed_stats)
from depthpe.analysis.plotting import CurveFigure, finish_figure, panel_specs
from depthpe.analysis.settings import BOOTSTRAP, GROUP_BY

__all__ = ["SWEEP_FILE", "SWEEP_COLUMNS", "NoiseSweep", "is_sweep_folder", "level_label", "write_sweep_plan",
           "read_sweeps", "sweep_result", "sweep_cells", "run_sweep_compare", "plot_sweep", "run_sweep_plot"]

SWEEP_FILE = "sweep.json"
LEVEL_KEYS = ("rotation_deg", "translation", "focal")
SWEEP_COLUMNS = ("group", "level (rotation ° / translation / focal)", "seeds", "native AbsRel", "native δ1",
                 "scene-aligned AbsRel", "Δ native AbsRel vs first level", "95% interval", "excludes 0",
                 "Δ native AbsRel vs ref.", "95% interval (vs ref.)", "excludes 0 (vs ref.)")


@dataclass
class NoiseSweep:
    """A read sweep: its folder(s), the levels ({"rotation_deg", "translation", "focal"}), the
    perturbation seed and, per level, the evaluations of every model (``compare.EvalInput``)."""

    folders: list[Path]
    levels: list[dict]
    noise_seed: int
    evals: list[list]


def is_sweep_folder(path: str | Path) -> bool:
    """Whether ``path`` is a folder written by ``depthpe study camera-noise`` (holds ``sweep.json``)."""
    return (Path(path) / SWEEP_FILE).is_file()


def level_label(level: dict) -> str:
    """``"2° / 0.05 / 0"``: a level's rotation in degrees, translation and focal fractions."""
    return f"{level['rotation_deg']:g}° / {level['translation']:g} / {level['focal']:g}"


def write_sweep_plan(folder: str | Path, levels: Sequence[dict], noise_seed: int,
                     models: Sequence[tuple[str, str]]) -> Path:
    """Write ``folder/sweep.json`` atomically: the ``levels``, ``noise_seed`` and, per (label, model)
    of ``models``, the model and its evaluation folders ``<label>/level_<i>`` (relative paths, so
    the sweep folder can be moved). Labels must be safe single path components
    (``depthpe.files.safe_component``)."""
    doc = {"levels": [{k: float(level[k]) for k in LEVEL_KEYS} for level in levels], "noise_seed": int(noise_seed),
           "models": [{"label": label, "model": model, "evals": [f"{label}/level_{i}" for i in range(len(levels))]}
                      for label, model in models]}
    return atomic_write_bytes(Path(folder) / SWEEP_FILE, json.dumps(doc, indent=1).encode())


def _read_plan(folder: Path) -> dict:
    """The checked ``sweep.json`` of one sweep folder (``ConfigError`` naming what is wrong)."""
    try:
        doc = json.loads((folder / SWEEP_FILE).read_text())
        levels = [{k: float(level[k]) for k in LEVEL_KEYS} for level in doc["levels"]]
        models = [(str(m["label"]), [str(e) for e in m["evals"]]) for m in doc["models"]]
        seed = int(doc["noise_seed"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"{folder / SWEEP_FILE}: not a camera-noise sweep file ({err}); "
                          "write it with `depthpe study camera-noise`") from None
    for label, evals in models:
        if safe_component(label) != label or len(evals) != len(levels):
            raise ConfigError(f"{folder / SWEEP_FILE}: model {label!r} is not a safe folder name or does not have "
                              f"one evaluation per level ({len(levels)})")
    return {"levels": levels, "noise_seed": seed, "models": models}


def _level_inputs(folder: Path, models: list, level: int) -> list:
    """The ``EvalInput`` of every model's evaluation at ``level`` (one line for a missing one)."""
    items = []
    for label, evals in models:
        path = folder / label / f"level_{level}"
        if not (path / "summary.json").is_file():
            raise ConfigError(f"{folder}: the evaluation of {label} at level {level} is missing ({path}/summary.json); "
                              "rerun the same `depthpe study camera-noise` command to finish the sweep")
        items.append(resolve_input(str(path)))
    return items


def read_sweeps(paths: Sequence[str | Path]) -> NoiseSweep:
    """Read one or more sweep folders into one ``NoiseSweep`` (their models side by side); they must
    have the same levels and perturbation seed (else a ``ConfigError`` naming the folder)."""
    folders = [Path(p) for p in paths]
    plans = [_read_plan(folder) for folder in folders]
    first = plans[0]
    for folder, plan in zip(folders[1:], plans[1:]):
        if (plan["levels"], plan["noise_seed"]) != (first["levels"], first["noise_seed"]):
            raise ConfigError(f"{folder}: other noise levels or seed than {folders[0]}; compare sweeps made with "
                              "the same --rotation-levels, --translation-levels, --focal-levels and --noise-seed")
    evals = [[item for folder, plan in zip(folders, plans) for item in _level_inputs(folder, plan["models"], i)]
             for i in range(len(first["levels"]))]
    return NoiseSweep(folders, first["levels"], first["noise_seed"], evals)


def _grouped_levels(sweep: NoiseSweep, group_by: str) -> list[dict]:
    """Per level, the groups of its evaluations (``compare.group_inputs``), the same groups at every level."""
    grouped = [group_inputs(items, group_by) for items in sweep.evals]
    for i, groups in enumerate(grouped[1:], start=1):
        if list(groups) != list(grouped[0]):
            raise ConfigError(f"level {i} has the groups {list(groups)}, level 0 {list(grouped[0])}: evaluate "
                              "every model at every level")
    return grouped


def sweep_result(sweep: NoiseSweep, *, group_by: str = GROUP_BY, reference: str | None = None,
                 datasets: Sequence[str] | None = None, n_boot: int = BOOTSTRAP, seed: int = 0) -> dict:
    """{"reference", "levels", "datasets": {dataset: {group: [per level {"level", "runs", "n_seeds",
    "stats" (``compare.seed_stats``), "vs_first_level", "vs_reference" (``compare.paired_comparison``
    of native AbsRel)}]}}}. All evaluations must share one manifest (``ConfigError`` otherwise)."""
    grouped = _grouped_levels(sweep, group_by)
    check_manifests([it for items in sweep.evals for it in items], allow_different=False)
    reference = reference if reference is not None else next(iter(grouped[0]))
    if reference not in grouped[0]:
        raise ConfigError(f"--reference {reference!r}: no such group (groups: {', '.join(grouped[0])})")
    out = {"reference": reference, "levels": sweep.levels, "datasets": {}}
    for dataset in common_datasets([it for items in sweep.evals for it in items], datasets):
        table = {}
        for label in grouped[0]:
            first = group_scene_values(grouped[0][label], dataset)
            table[label] = []
            for i, groups in enumerate(grouped):
                members, scenes = groups[label], group_scene_values(groups[label], dataset)
                table[label].append({
                    "level": i, "runs": [it.name for it in members], "n_seeds": len(members),
                    "stats": seed_stats(members, dataset),
                    "vs_first_level": paired_comparison(scenes, first, n_boot=n_boot, seed=seed),
                    "vs_reference": paired_comparison(scenes, group_scene_values(groups[reference], dataset),
                                                      n_boot=n_boot, seed=seed)})
        out["datasets"][dataset] = table
    return out


def sweep_cells(result: dict) -> dict[str, list[list[str]]]:
    """Per dataset, one row of text cells (``SWEEP_COLUMNS`` order) per group and level."""
    out = {}
    for dataset, table in result["datasets"].items():
        out[dataset] = []
        for label, levels in table.items():
            for entry in levels:
                stats = entry["stats"]
                out[dataset].append([
                    label, level_label(result["levels"][entry["level"]]), str(entry["n_seeds"]),
                    *(mean_std_text(stats[k]) for k in ("native_abs_rel", "native_delta1", "scene_aligned_abs_rel")),
                    *paired_cells(entry["vs_first_level"], entry["level"] == 0),
                    *paired_cells(entry["vs_reference"], label == result["reference"])])
    return out


def run_sweep_compare(paths: Sequence[str], *, group_by: str = GROUP_BY, reference: str | None = None,
                      datasets: Sequence[str] | None = None, n_boot: int = BOOTSTRAP,
                      seed: int = 0) -> tuple[dict, str, dict]:
    """``depthpe compare SWEEP ...``: (result, Markdown, meta) of the sweep folders ``paths``. The
    meta's ``inputs`` are the first level's evaluations (one per run: its validation curves)."""
    if n_boot < 1:
        raise ConfigError(f"--bootstrap must be at least 1, got {n_boot}")
    sweep = read_sweeps(paths)
    result = sweep_result(sweep, group_by=group_by, reference=reference, datasets=datasets, n_boot=n_boot, seed=seed)
    notes = [f"Camera-noise sweep (perturbation seed {sweep.noise_seed}); grouped by `{group_by}`; reference group "
             f"`{result['reference']}`. Every level perturbs the input cameras by rotation (degrees), translation "
             "(fraction of the mean baseline) and focal (fraction) at once; the ground truth is never perturbed.",
             f"Δ = per-scene native AbsRel minus that of the same group at the first level, or of the reference "
             f"group at the same level (negative: better); bootstrap over scenes, {n_boot} resamples, seed {seed}.",
             "Manifests: identical."]
    meta = {"group_by": group_by, "reference": result["reference"], "bootstrap": n_boot, "seed": seed,
            "noise_seed": sweep.noise_seed, "levels": sweep.levels, "sweeps": [str(f) for f in sweep.folders],
            "inputs": [{"path": it.path, "eval_dir": str(it.eval_dir),
                        "run_dir": str(it.run_dir) if it.run_dir else None, "group": it.group, "seed": it.seed}
                       for it in sweep.evals[0]]}
    return result, markdown_tables(sweep_cells(result), SWEEP_COLUMNS, notes), meta


def _draw_level_panel(ax, grouped: list[dict], colours: dict, dataset: str, spec: tuple) -> int:
    """One panel: per group the mean over its seeds at each level (line), ± the sample std (band) and
    each seed (faint points); returns the number of groups drawn."""
    title, metric, row = spec
    drawn = 0
    for label, colour in colours.items():
        values = np.array([[row_value(it, dataset, row, metric) for it in groups[label]] for groups in grouped])
        if not np.isfinite(values).any():
            continue
        x = np.arange(len(grouped))
        mean = np.array([np.nanmean(v) if np.isfinite(v).any() else math.nan for v in values])
        ax.plot(np.repeat(x, values.shape[1]), values.ravel(), "o", color=colour, alpha=0.25, markersize=3)
        ax.plot(x, mean, "o-", color=colour, linewidth=1.6, label=label)
        if values.shape[1] > 1:
            std = np.array([np.nanstd(v, ddof=1) if np.isfinite(v).sum() > 1 else 0.0 for v in values])
            ax.fill_between(x, mean - std, mean + std, color=colour, alpha=0.15, linewidth=0)
        drawn += 1
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if drawn:
        ax.legend(fontsize="small")
    return drawn


def plot_sweep(sweep: NoiseSweep, out_dir: str | Path, *, group_by: str = GROUP_BY,
               metrics: Sequence[str] = ("abs_rel", "delta1"), rows: Sequence[str] = ("native",)) -> list[CurveFigure]:
    """Draw one figure per dataset (``noise_<dataset>.png`` and ``.svg`` in ``out_dir``): one panel per
    metric and row (validation losses, which an evaluation has not, are left out), x the levels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grouped = _grouped_levels(sweep, group_by)
    specs = [spec for spec in panel_specs(metrics, rows) if spec[2]]
    if not specs:
        raise ConfigError("--metrics: name at least one metric of the evaluation table (e.g. abs_rel delta1); "
                          "a sweep has no validation loss")
    palette = plt.get_cmap("tab10")
    colours = {label: palette(i % 10) for i, label in enumerate(grouped[0])}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures = []
    for dataset in common_datasets([it for items in sweep.evals for it in items], None):
        fig, axes = plt.subplots(1, len(specs), figsize=(4.6 * len(specs), 3.6), squeeze=False)
        lines = [_draw_level_panel(ax, grouped, colours, dataset, spec) for ax, spec in zip(axes[0], specs)]
        for ax in axes[0]:
            ax.set_xticks(range(len(sweep.levels)), [level_label(level) for level in sweep.levels],
                          rotation=30, fontsize="small")
            ax.set_xlabel("noise: rotation ° / translation / focal")
        fig.suptitle(f"{dataset}: metric vs input-camera noise (mean ± std over seeds)")
        figures.append(finish_figure(fig, out, "noise", dataset, lines))
    return figures


def run_sweep_plot(paths: Sequence[str], out_dir: str | Path, *, group_by: str = GROUP_BY,
                   metrics: Sequence[str] = ("abs_rel", "delta1"), rows: Sequence[str] = ("native",)) -> list[CurveFigure]:
    """``depthpe plot SWEEP ... --out DIR``: read the sweep folders, draw ``plot_sweep``."""
    return plot_sweep(read_sweeps(paths), out_dir, group_by=group_by, metrics=metrics, rows=rows)
