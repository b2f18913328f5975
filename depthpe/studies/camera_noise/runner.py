"""``depthpe study camera-noise``: how each model degrades when its input cameras are wrong.

Every model is evaluated (``depthpe eval``, ``evaluation.command.run_evaluation``) at every noise
level of the sweep, all on one manifest (the first evaluation's, or ``--manifest``), into
``OUT/<model label>/level_<i>/``; then the table (``compare.md``, ``compare.json``,
``report.html``, as ``depthpe compare OUT``) and the figure (``noise_<dataset>.png``, as ``depthpe
plot OUT``) are written (``depthpe.studies.camera_noise.sweep``). Each evaluation resumes or is skipped
when complete, so rerunning the command finishes an interrupted sweep.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from depthpe.config import require
from depthpe.config.camera_noise import check_levels
from depthpe.config.inference import EvalConfig, HeldOutScenes
from depthpe.config.options import REQUIRED, option, overwrite_option
from depthpe.analysis.settings import BOOTSTRAP, GROUP_BY

__all__ = ["CameraNoiseSweepConfig", "model_labels", "run_sweep", "write_sweep_outputs"]

DESCRIPTION = """\
Evaluate each MODEL at a list of input-camera noise levels and tabulate how it degrades.

Level i perturbs the cameras the model is given (never the ground truth) by --rotation-levels[i]
degrees, --translation-levels[i] x the mean baseline and --focal-levels[i] x the focal length at
once, as `depthpe eval --rotation-noise/--translation-noise/--focal-noise` do (a list of one value
is used at every level). Every evaluation is a `depthpe eval` folder OUT/<model>/level_<i>/, all on
one manifest; OUT/sweep.json lists them. Then writes compare.md / compare.json / report.html (per
group of --group-by and level: mean ± std over seeds, the per-scene paired change of native AbsRel
against the first level and against --reference at the same level, with bootstrap 95% intervals)
and noise_<dataset>.png/.svg (metric vs level). `depthpe compare OUT` and `depthpe plot OUT --out
DIR` read the folder again. Rerun the same command to finish an interrupted sweep."""

MODEL_HELP = "exported model folders (runs/NAME/final) or Hub repo ids; runs of one config that differ by seed form a group"


@dataclass
class CameraNoiseSweepConfig(HeldOutScenes):
    """``depthpe study camera-noise``: the held-out scenes of ``HeldOutScenes`` (data, split, views,
    seed, manifest, ...) evaluated for every model of ``model`` at every level (rotation_levels[i]
    degrees, translation_levels[i] and focal_levels[i] fractions; a list of one value is used at
    every level) with perturbation seed ``noise_seed``; group_by / reference / bootstrap: the table
    (as ``depthpe compare``); num_workers: data loader workers of each evaluation."""

    model: list[str] = option(REQUIRED, positional=True, metavar="MODEL", help=MODEL_HELP)
    rotation_levels: list[float] = option(default_factory=lambda: [0.0, 1.0, 2.0, 5.0, 10.0], nargs="+",
                                          metavar="DEG", help="rotation noise of each level in degrees")
    translation_levels: list[float] = option(default_factory=lambda: [0.0, 0.02, 0.05, 0.1, 0.2], nargs="+",
                                             metavar="FRAC", help="translation noise of each level (x the mean baseline)")
    focal_levels: list[float] = option(default_factory=lambda: [0.0], nargs="+", metavar="FRAC",
                                       help="focal noise of each level (fraction of the focal length)")
    noise_seed: int = option(0, help="seed of the camera perturbation (the same directions at every level)")
    group_by: str = option(GROUP_BY, help="dotted run-config key whose value names the group")
    reference: Optional[str] = option(None, help="group the others are paired with at each level (none: the first)")
    bootstrap: int = option(BOOTSTRAP, metavar="N", help="bootstrap resamples of the paired intervals")
    num_workers: int = option(0, help="data loader workers of each evaluation")
    overwrite: bool = overwrite_option()

    def __post_init__(self) -> None:
        self._check_held_out()
        require(len(self.model) >= 1, "MODEL: give at least one model folder or Hub id")
        lengths = {len(v) for v in (self.rotation_levels, self.translation_levels, self.focal_levels)} - {1}
        require(len(lengths) <= 1, "--rotation-levels, --translation-levels and --focal-levels must list one value "
                f"each or the same number of levels, got {len(self.rotation_levels)}, {len(self.translation_levels)} "
                f"and {len(self.focal_levels)}")
        for level in self.levels():
            check_levels(tuple(level.values()), ("--rotation-levels", "--translation-levels", "--focal-levels"))
        require(self.bootstrap >= 1 and self.num_workers >= 0, "--bootstrap must be >= 1 and --num-workers >= 0")

    def levels(self) -> list[dict]:
        """The levels in order: [{"rotation_deg", "translation", "focal"}], one-value lists repeated."""
        n = max(len(self.rotation_levels), len(self.translation_levels), len(self.focal_levels))
        pick = lambda values, i: float(values[i] if len(values) > 1 else values[0])  # noqa: E731
        return [{"rotation_deg": pick(self.rotation_levels, i), "translation": pick(self.translation_levels, i),
                 "focal": pick(self.focal_levels, i)} for i in range(n)]

    def eval_config(self, model: str, level: dict, out: Path, manifest: str | None) -> EvalConfig:
        """The ``depthpe eval`` settings of ``model`` at ``level`` into ``out`` (no panels, no worst images)."""
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(HeldOutScenes)}
        return EvalConfig(**{**shared, "model": model, "out": str(out), "manifest": manifest}, panels=0, worst=0,
                          num_workers=self.num_workers, rotation_noise=level["rotation_deg"],
                          translation_noise=level["translation"], focal_noise=level["focal"],
                          noise_seed=self.noise_seed)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from depthpe.config.command_line import add_config_arguments

    add_config_arguments(parser, CameraNoiseSweepConfig)


def run(args: argparse.Namespace) -> int:
    from depthpe.config.command_line import run_config_command

    return run_config_command(args, CameraNoiseSweepConfig, run_sweep)


def model_labels(models: list[str]) -> list[tuple[str, str]]:
    """(label, model) per model: the run folder's name for ``runs/NAME/final``, else the folder's or
    the Hub repo's name, as one safe path component (``depthpe.files.safe_component``), made unique
    by ``-2``, ``-3``, ... in order."""
    from depthpe.files import safe_component

    out, seen = [], set()
    for model in models:
        path = Path(model)
        base = safe_component((path.parent.name if path.name == "final" else path.name) or "model")
        label, k = base, 2
        while label in seen:
            label, k = f"{base}-{k}", k + 1
        seen.add(label)
        out.append((label, model))
    return out


def run_sweep(cfg: CameraNoiseSweepConfig) -> dict:
    """The sweep (module docstring); returns the table's result (``noise_sweep.sweep_result``). The
    folder is owned through ``depthpe.files.output_folder`` (other levels, models or data: refused unless
    ``--overwrite``)."""
    from depthpe.files.output_folder import owned_output_folder, settings_fingerprint

    with owned_output_folder(cfg.out, "depthpe study camera-noise", settings_fingerprint(cfg), replace=cfg.overwrite):
        return _sweep_into(cfg)


def _sweep_into(cfg: CameraNoiseSweepConfig) -> dict:
    """``run_sweep`` in the owned ``cfg.out``: the plan (sweep.json) is written only after the owner
    accepted the folder, so a rerun with other levels is refused before it changes anything."""
    from depthpe.studies.camera_noise.sweep import level_label, write_sweep_plan
    from depthpe.evaluation.command import run_evaluation

    out, levels, models = Path(cfg.out), cfg.levels(), model_labels(cfg.model)
    write_sweep_plan(out, levels, cfg.noise_seed, models)
    manifest, total, done = cfg.manifest, len(models) * len(levels), 0
    for label, model in models:
        for i, level in enumerate(levels):
            done += 1
            print(f"[{done}/{total}] {label} at level {i} ({level_label(level)})", flush=True)
            eval_dir = out / label / f"level_{i}"
            run_evaluation(cfg.eval_config(model, level, eval_dir, manifest))
            if manifest is None:  # the first evaluation chooses the views of all the others
                shutil.copyfile(eval_dir / "manifest.json", out / "manifest.json")
                manifest = str(out / "manifest.json")
    return write_sweep_outputs(cfg, out)


def write_sweep_outputs(cfg: CameraNoiseSweepConfig, out: Path) -> dict:
    """The figures (as ``depthpe plot OUT --out OUT``) and the tables (as ``depthpe compare OUT --out OUT``:
    compare.md, compare.json, report.html with the figures) of the sweep in ``out``; returns the
    table's result."""
    from depthpe.analysis.comparison_files import Comparison, write_comparison
    from depthpe.analysis.settings import CompareConfig, PlotConfig
    from .sweep import SWEEP_COLUMNS, run_sweep_compare, run_sweep_plot, sweep_cells

    plot = PlotConfig(runs=[str(out)], out=str(out), group_by=cfg.group_by)
    figures = run_sweep_plot(plot.runs, plot.out, group_by=plot.group_by, metrics=plot.metrics, rows=plot.rows)
    for figure in figures:
        print(f"wrote {figure.png} and {figure.svg}")
    compare = CompareConfig(inputs=[str(out)], group_by=cfg.group_by, reference=cfg.reference, dataset=cfg.datasets,
                            out=str(out), bootstrap=cfg.bootstrap)
    result, markdown, meta = run_sweep_compare(compare.inputs, datasets=compare.dataset, group_by=compare.group_by,
                                               reference=compare.reference, n_boot=compare.bootstrap, seed=compare.seed)
    return write_comparison(Comparison(result, markdown, meta, SWEEP_COLUMNS, sweep_cells(result)), str(out), figures)
