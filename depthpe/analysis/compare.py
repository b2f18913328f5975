"""Comparing runs honestly: ``depthpe compare`` (docs/compare.md).

Inputs are evaluation folders (``summary.json``, ``metrics_per_image.csv``, ``manifest.json`` written
by ``depthpe eval``) or run folders (``runs/NAME`` holding ``config.yaml`` and exactly one
``eval*/summary.json``). Each evaluation is tied to its run's ``config.yaml`` (the run folder given,
or the folder above ``meta.model`` such as ``runs/NAME/final``), which supplies the grouping key
(any dotted config key, default ``model.global_pe``) and the training ``seed``.

Runs are grouped by the key; the runs of one group must agree on every other config key except
``seed``, ``output_dir``, ``hub.*`` and ``val.manifest`` (else a ``ConfigError`` names the differing key: a group is
"one configuration, several seeds"). Per dataset and group the result holds mean and sample std
(n-1) over seeds of native and scene-aligned AbsRel and delta1 and of the ratios of native AbsRel to
the two constant baselines, and paired comparisons with a reference group: per-scene differences of
native and of scene-aligned AbsRel (group minus reference; per scene the mean over its images,
averaged over a group's seeds), their mean and a seeded bootstrap 95% interval over scenes.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..config import ConfigError
from .settings import BOOTSTRAP, GROUP_BY

__all__ = ["EvalInput", "resolve_input", "resolve_inputs", "run_config_values", "config_value", "lookup_key",
           "group_label", "group_inputs",
           "check_manifests", "mean_std", "bootstrap_interval", "scene_values", "compare_groups", "format_compare",
           "write_compare", "run_compare", "IGNORED_KEYS", "STAT_KEYS"]

# Config keys in which the runs of one group may differ ("hub." is a prefix): where a run goes and
# is pushed, its seed, and which file names its validation views (the views themselves are
# compared through the evaluation manifests).
IGNORED_KEYS = ("seed", "output_dir", "hub.", "val.manifest")
# (name, summary row, metric) of the per-seed statistics in the table.
STAT_KEYS = (("native_abs_rel", "native", "abs_rel"), ("native_delta1", "native", "delta1"),
             ("scene_aligned_abs_rel", "scene_aligned", "abs_rel"), ("scene_aligned_delta1", "scene_aligned", "delta1"))
RATIO_KEYS = (("ratio_global_constant", "global_constant"), ("ratio_scene_constant", "scene_constant"))


@dataclass
class EvalInput:
    """One evaluation to compare: its folder, parsed summary.json, manifest scenes and run config."""

    path: str  # as given on the command line
    eval_dir: Path
    summary: dict
    manifest: dict | None
    run_dir: Path | None = None
    config: dict | None = None  # flattened run config {dotted key: value}
    seed: int | None = None
    group: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        """A short name: the run folder's name, else the evaluation folder's."""
        return (self.run_dir or self.eval_dir).name


def _read_json(path: Path) -> dict:
    """A JSON file as a dict; a ``ConfigError`` naming the file if it is unreadable."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read {path}: {err}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return doc


def _run_eval_dir(run_dir: Path) -> Path:
    """The one ``eval*/`` folder with a summary.json inside a run folder (else a ``ConfigError``)."""
    found = sorted(p.parent for p in run_dir.glob("eval*/summary.json"))
    if len(found) == 1:
        return found[0]
    if not found:
        raise ConfigError(f"run folder {run_dir} has no eval*/summary.json (evaluate it with `depthpe eval --model "
                          f"{run_dir}/final --data ROOT --out {run_dir}/eval`, or pass an evaluation folder)")
    names = ", ".join(str(p) for p in found)
    raise ConfigError(f"run folder {run_dir} has several evaluations ({names}); pass the evaluation folder to compare")


def _find_run_dir(eval_dir: Path, meta: dict) -> Path | None:
    """The run folder of an evaluation: the folder with a config.yaml above ``meta.model``
    (``runs/NAME/final`` or ``runs/NAME/checkpoints/step_N/model``), else the folder above the
    evaluation folder if it holds a config.yaml; None when neither exists."""
    model = meta.get("model")
    candidates = []
    if isinstance(model, str) and model:
        path = Path(model)
        candidates.append(path.parent)
        if path.parent.parent.name == "checkpoints":
            candidates.append(path.parent.parent.parent)
    candidates.append(eval_dir.resolve().parent)
    for folder in candidates:
        if (folder / "config.yaml").is_file():
            return folder
    return None


def flatten(mapping: dict, prefix: str = "") -> dict:
    """{dotted key: value} of a nested dict (lists stay values)."""
    out = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def run_config_values(run_dir: Path) -> dict:
    """The flattened run config of ``run_dir/config.yaml``. A ``ConfigError`` names the file once:
    reading it (``read_yaml_chain``) names the file at fault itself, a value the schema refuses
    (``build_run_config``) gets the path in front."""
    from ..config import read_yaml_chain
    from ..run.schema import build_run_config

    path = run_dir / "config.yaml"
    layers = [read_yaml_chain(path)]
    try:
        cfg = build_run_config(layers, ())
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None
    return flatten(cfg.to_dict())


def resolve_input(path: str) -> EvalInput:
    """An ``EvalInput`` for an evaluation folder or a run folder (see the module docstring)."""
    folder = Path(path)
    run_dir = None
    if not (folder / "summary.json").is_file() and (folder / "config.yaml").is_file():
        run_dir, folder = folder, _run_eval_dir(folder)
    if not (folder / "summary.json").is_file():
        raise ConfigError(f"{path}: neither an evaluation folder (summary.json) nor a run folder (config.yaml)")
    doc = _read_json(folder / "summary.json")
    manifest = _read_json(folder / "manifest.json").get("scenes") if (folder / "manifest.json").is_file() else None
    run_dir = run_dir or _find_run_dir(folder, doc.get("meta") or {})
    item = EvalInput(path=path, eval_dir=folder, summary=doc, manifest=manifest, run_dir=run_dir)
    if run_dir is not None:
        item.config = run_config_values(run_dir)
        item.seed = item.config.get("seed")
    return item


def config_value(item: EvalInput, key: str):
    """The value of the dotted config ``key`` for ``item``. Without a run config only
    ``model.global_pe`` can be answered (from the evaluation's ``meta.global_pe``)."""
    if item.config is None:
        meta = item.summary.get("meta") or {}
        if key == "model.global_pe" and "global_pe" in meta:
            return meta["global_pe"]
        raise ConfigError(f"{item.path}: no run config.yaml found (meta.model={meta.get('model')!r}) to read "
                          f"{key!r}; pass the run folder, or group by model.global_pe")
    return lookup_key(item.config, key, item.run_dir / "config.yaml")


def lookup_key(config: dict, key: str, where) -> object:
    """``config[key]`` of a flattened run config; for a mapping that was flattened (``model.pe_options``)
    the mapping of its keys below ``key``; a ``ConfigError`` naming ``where`` if absent."""
    below = {k[len(key) + 1:]: v for k, v in config.items() if k.startswith(key + ".")}
    if key not in config and below:
        return below
    if key not in config:
        from ..config import did_you_mean

        hint = did_you_mean(key, sorted(config))
        raise ConfigError(f"--group-by {key!r}: no such key in {where}"
                          f"{' (' + hint + ')' if hint else ' (a dotted key such as model.global_pe or optim.lr)'}")
    return config[key]


def group_label(value) -> str:
    """The group label of a config value (strings as they are, anything else as compact JSON)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))


def _ignored(key: str, group_by: str) -> bool:
    """Whether runs of one group may differ in ``key``."""
    return key == group_by or key.startswith(group_by + ".") or any(key == k or (k.endswith(".") and key.startswith(k)) for k in IGNORED_KEYS)


def _differing_key(a: dict, b: dict, group_by: str) -> str | None:
    """The first config key (sorted) other than the ignored ones in which ``a`` and ``b`` differ."""
    for key in sorted(set(a) | set(b)):
        if not _ignored(key, group_by) and a.get(key) != b.get(key):
            return key
    return None


def _check_group(label: str, items: list[EvalInput], group_by: str) -> None:
    """Refuse a group whose runs differ in more than the seed, or that holds one seed twice."""
    with_config = [it for it in items if it.config is not None]
    for other in with_config[1:]:
        key = _differing_key(with_config[0].config, other.config, group_by)
        if key is not None:
            raise ConfigError(f"group {label!r}: runs {with_config[0].name} and {other.name} differ in {key} "
                              f"({with_config[0].config.get(key)!r} vs {other.config.get(key)!r}), not only in the "
                              f"seed; compare them with --group-by {key}, or compare one configuration at a time")
    seen: dict = {}
    for it in items:
        key = ("seed", it.seed) if it.seed is not None else ("eval", str(it.eval_dir.resolve()))
        if key in seen:
            raise ConfigError(f"group {label!r}: {seen[key].path} and {it.path} are the same seed "
                              f"({it.seed}); give each run once")
        seen[key] = it


def group_inputs(items: Sequence[EvalInput], group_by: str) -> dict[str, list[EvalInput]]:
    """{label: inputs} in order of first appearance; checks that each group differs only by seed."""
    groups: dict[str, list[EvalInput]] = {}
    for item in items:
        item.group = group_label(config_value(item, group_by))
        groups.setdefault(item.group, []).append(item)
    for label, members in groups.items():
        _check_group(label, members, group_by)
    return groups


def differing_across_groups(groups: dict[str, list[EvalInput]], group_by: str) -> list[str]:
    """Config keys (besides the grouping key, seed, output_dir, hub.*, val.manifest) whose value differs between
    groups: what else than the grouping key the comparison varies."""
    configs = [members[0].config for members in groups.values() if members[0].config is not None]
    out = []
    for key in sorted({k for c in configs for k in c}):
        values = {json.dumps(c.get(key), sort_keys=True, default=str) for c in configs}
        if not _ignored(key, group_by) and len(values) > 1:
            out.append(key)
    return out


def check_manifests(items: Sequence[EvalInput], allow_different: bool) -> bool:
    """Whether all evaluations used the same manifest (``scenes`` mapping); refuses (``ConfigError``)
    when they did not, unless ``allow_different``."""
    first = items[0]
    for item in items[1:]:
        if item.manifest != first.manifest:
            if allow_different:
                return False
            detail = _manifest_difference(first.manifest or {}, item.manifest or {})
            raise ConfigError(f"{item.path} and {first.path} were evaluated on different manifests ({detail}); "
                              "evaluate every run with --manifest of one evaluation, or pass "
                              "--allow-different-manifests (paired on the common scenes)")
    return True


def _manifest_difference(a: dict, b: dict) -> str:
    """A few words on how two manifests differ (scenes only in one, or other frames)."""
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    if only_a or only_b:
        return f"{len(only_a)} scene(s) only in the first, {len(only_b)} only in the other, e.g. {(only_a + only_b)[0]}"
    other = sorted(k for k in a if a[k] != b[k])
    return f"other frames in {len(other)} scene(s), e.g. {other[0]}"


def resolve_inputs(paths: Sequence[str], group_by: str) -> dict[str, list[EvalInput]]:
    """Resolve and group the command-line inputs."""
    return group_inputs([resolve_input(p) for p in paths], group_by)


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (n-1) of the finite ``values``; the std is None for a
    single value, and the mean NaN for none."""
    arr = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if arr.size == 0:
        return math.nan, None
    return float(arr.mean()), (float(arr.std(ddof=1)) if arr.size > 1 else None)


def row_value(item: EvalInput, dataset: str, row: str, metric: str) -> float:
    """``summary[dataset][row][metric]`` of an evaluation (NaN where missing)."""
    entry = (item.summary.get("summary") or {}).get(dataset, {}).get(row) or {}
    value = entry.get(metric)
    return float(value) if value is not None else math.nan


def seed_stats(items: Sequence[EvalInput], dataset: str) -> dict[str, dict]:
    """{name: {"mean", "std", "values"}} over the seeds of one group: the ``STAT_KEYS`` and the
    ratios of native AbsRel to each constant baseline's AbsRel (one ratio per seed, then averaged)."""
    per_seed = {name: [row_value(it, dataset, row, metric) for it in items] for name, row, metric in STAT_KEYS}
    native = per_seed["native_abs_rel"]
    for name, baseline in RATIO_KEYS:
        per_seed[name] = [n / row_value(it, dataset, baseline, "abs_rel") for n, it in zip(native, items)]
    out = {}
    for name, values in per_seed.items():
        mean, std = mean_std(values)
        out[name] = {"mean": mean, "std": std, "values": values}
    return out


def _csv_rows(item: EvalInput) -> list[dict]:
    """The rows of an evaluation's metrics_per_image.csv (read once, cached on the input)."""
    if "csv" not in item.extra:
        path = item.eval_dir / "metrics_per_image.csv"
        if not path.is_file():
            raise ConfigError(f"{item.path}: no metrics_per_image.csv next to summary.json (needed for the paired "
                              "per-scene comparison); evaluate again with `depthpe eval`")
        with open(path, newline="") as f:
            item.extra["csv"] = list(csv.DictReader(f))
    return item.extra["csv"]


def scene_values(item: EvalInput, dataset: str, mode: str = "native", metric: str = "abs_rel") -> dict[str, float]:
    """{scene: mean of ``metric`` over its images} for one evaluation, as the evaluation aggregates
    (images without an evaluated pixel, ``n_valid == 0``, and non-finite values left out)."""
    values: dict[str, list[float]] = {}
    for row in _csv_rows(item):
        if row.get("dataset") != dataset or row.get("mode") != mode:
            continue
        value = float(row[metric]) if row.get(metric) not in (None, "") else math.nan
        if float(row.get("n_valid") or 1) > 0 and math.isfinite(value):
            values.setdefault(row["scene"], []).append(value)
    return {scene: float(np.mean(v)) for scene, v in sorted(values.items())}


# Rows of metrics_per_image.csv compared scene by scene against the reference -> result key.
PAIRED_ROWS = {"native": "paired", "scene_aligned": "paired_scene_aligned"}


def group_scene_values(items: Sequence[EvalInput], dataset: str, mode: str = "native") -> dict[str, float]:
    """Per scene, the AbsRel of row ``mode`` (native, scene_aligned) averaged over the group's seeds
    (over the seeds that have the scene)."""
    pooled: dict[str, list[float]] = {}
    for item in items:
        for scene, value in scene_values(item, dataset, mode).items():
            pooled.setdefault(scene, []).append(value)
    return {scene: float(np.mean(v)) for scene, v in sorted(pooled.items())}


def bootstrap_interval(diffs: Sequence[float], n: int = 10_000, seed: int = 0, level: float = 0.95,
                       chunk: int = 1000) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``diffs`` (``scipy.stats.bootstrap``,
    ``method="percentile"``): ``n`` resamples of the scenes with replacement, drawn with
    ``numpy.random.default_rng(seed)`` ``chunk`` resamples at a time (scipy's ``batch``: each batch is
    ``rng.integers(0, len, (chunk, len))``), and the ``(1 - level) / 2`` and ``(1 + level) / 2``
    quantiles (linear interpolation) of the resampled means. These are the draws and quantiles of the
    hand-written loop this replaced, so every interval is the same to the last bit
    (``tests/analysis/test_compare.py``). No scene: (nan, nan); one scene: (its value, its value),
    where scipy refuses a sample of one."""
    from scipy.stats import bootstrap

    arr = np.asarray(diffs, dtype=np.float64)
    if arr.size == 0 or n < 1:
        return math.nan, math.nan
    if arr.size == 1:
        return float(arr[0]), float(arr[0])
    result = bootstrap((arr,), np.mean, n_resamples=n, batch=chunk, confidence_level=level,
                       method="percentile", rng=np.random.default_rng(seed))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def paired_comparison(group: dict[str, float], reference: dict[str, float], *, n_boot: int = BOOTSTRAP,
                      seed: int = 0) -> dict:
    """Paired per-scene comparison of two {scene: value} maps on their common scenes: differences
    ``group - reference``, their mean, the bootstrap 95% interval and whether it excludes 0."""
    scenes = sorted(set(group) & set(reference))
    diffs = [group[s] - reference[s] for s in scenes]
    mean = float(np.mean(diffs)) if diffs else math.nan
    low, high = bootstrap_interval(diffs, n=n_boot, seed=seed)
    return {"n_scenes": len(scenes), "mean": mean, "low": low, "high": high,
            "excludes_zero": bool(low > 0 or high < 0)}


def common_datasets(items: Sequence[EvalInput], wanted: Sequence[str] | None) -> list[str]:
    """The datasets to compare: ``wanted`` (each must be in every evaluation), else those that every
    evaluation has."""
    have = [set((it.summary.get("summary") or {})) for it in items]
    common = sorted(set.intersection(*have)) if have else []
    for name in wanted or ():
        for item, names in zip(items, have):
            if name not in names:
                raise ConfigError(f"--dataset {name!r}: not in the evaluation {item.path} (it has {', '.join(sorted(names))})")
    chosen = list(wanted) if wanted else common
    if not chosen:
        raise ConfigError("the evaluations have no dataset in common; pass --dataset or compare like with like")
    return chosen


def compare_groups(groups: dict[str, list[EvalInput]], *, reference: str | None = None,
                   datasets: Sequence[str] | None = None, n_boot: int = BOOTSTRAP, seed: int = 0) -> dict:
    """The comparison of ``groups`` (``group_inputs``): {"reference", "datasets": {dataset:
    {group: {"runs", "seeds", "n_seeds", "stats" (``seed_stats``), "paired"
    (``paired_comparison`` of native AbsRel against the reference; 0 for the reference itself),
    "paired_scene_aligned" (the same for scene-aligned AbsRel)}}}}."""
    if not groups:
        raise ConfigError("nothing to compare: give at least one evaluation or run folder")
    reference = reference if reference is not None else next(iter(groups))
    if reference not in groups:
        raise ConfigError(f"--reference {reference!r}: no such group (groups: {', '.join(groups)})")
    items = [it for members in groups.values() for it in members]
    out: dict = {"reference": reference, "datasets": {}}
    for dataset in common_datasets(items, datasets):
        refs = {mode: group_scene_values(groups[reference], dataset, mode) for mode in PAIRED_ROWS}
        table = {}
        for label, members in groups.items():
            table[label] = {"runs": [it.name for it in members], "seeds": [it.seed for it in members],
                            "n_seeds": len(members), "stats": seed_stats(members, dataset)}
            for mode, key in PAIRED_ROWS.items():
                table[label][key] = paired_comparison(group_scene_values(members, dataset, mode), refs[mode],
                                                      n_boot=n_boot, seed=seed)
        out["datasets"][dataset] = table
    return out


def mean_std_text(stat: dict, digits: int = 4) -> str:
    """``mean ± std`` with ``digits`` decimals ('-' for a missing std, i.e. one seed; '-' alone for no mean)."""
    if not math.isfinite(stat["mean"]):
        return "-"
    return f"{stat['mean']:.{digits}f} ± " + ("-" if stat["std"] is None else f"{stat['std']:.{digits}f}")


def paired_cells(paired: dict, is_reference: bool, digits: int = 4, unit: str = "scenes") -> list[str]:
    """Table cells of a paired comparison: mean difference, interval (with the number of paired
    ``unit``), excludes 0; ``digits`` decimals."""
    if is_reference:
        return ["(reference)", "", ""]
    if not paired["n_scenes"]:
        return ["-", f"no common {unit.rstrip('s')}", "-"]
    return [f"{paired['mean']:+.{digits}f}",
            f"[{paired['low']:+.{digits}f}, {paired['high']:+.{digits}f}] ({paired['n_scenes']} {unit})",
            "yes" if paired["excludes_zero"] else "no"]


COLUMNS = ("group", "seeds", "native AbsRel", "native δ1", "scene-aligned AbsRel", "scene-aligned δ1",
           "native / global const.", "native / scene const.", "Δ native AbsRel vs ref.", "95% interval", "excludes 0",
           "Δ scene-aligned AbsRel vs ref.", "95% interval (scene-aligned)", "excludes 0 (scene-aligned)")


def compare_cells(result: dict) -> dict[str, list[list[str]]]:
    """Per dataset, one row of text cells (``COLUMNS`` order) per group of a ``compare_groups`` result."""
    out = {}
    for dataset, table in result["datasets"].items():
        out[dataset] = []
        for label, entry in table.items():
            stats = entry["stats"]
            out[dataset].append([label, str(entry["n_seeds"]), *(mean_std_text(stats[name]) for name, _, _ in STAT_KEYS),
                                 *(mean_std_text(stats[name]) for name, _ in RATIO_KEYS),
                                 *(cell for key in PAIRED_ROWS.values()
                                   for cell in paired_cells(entry[key], label == result["reference"]))])
    return out


def markdown_tables(tables: dict[str, list[list[str]]], columns: Sequence[str], notes: Sequence[str] = ()) -> str:
    """``notes`` as lines, then one Markdown table per entry of ``tables`` ({title: rows of cells}),
    each under a ``### title`` heading with the header ``columns``."""
    lines = [*notes, ""] if notes else []
    for title, rows in tables.items():
        lines += [f"### {title}", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(cells) + " |" for cells in rows]
        lines.append("")
    return "\n".join(lines)


def format_compare(result: dict, notes: Sequence[str] = ()) -> str:
    """The Markdown of a ``compare_groups`` result: ``notes`` as lines, then one table per dataset."""
    return markdown_tables(compare_cells(result), COLUMNS, notes)


def write_compare(result: dict, markdown: str, out_dir: str | Path, meta: dict) -> dict[str, Path]:
    """Write ``compare.md`` and ``compare.json`` ({"meta", "result"}) atomically into ``out_dir``."""
    from ..files import atomic_write_bytes

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    doc = json.dumps(_finite({"meta": meta, "result": result}), indent=1, default=str)
    return {"markdown": atomic_write_bytes(out / "compare.md", markdown.encode()),
            "json": atomic_write_bytes(out / "compare.json", doc.encode())}


def _finite(value):
    """``value`` with NaN and infinite floats replaced by None (strict JSON) and numpy scalars as Python's."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, (np.floating, np.integer)):
        value = value.item()
    return None if isinstance(value, float) and not math.isfinite(value) else value


def run_compare(paths: Sequence[str], *, group_by: str = GROUP_BY, reference: str | None = None,
                datasets: Sequence[str] | None = None, allow_different_manifests: bool = False,
                n_boot: int = BOOTSTRAP, seed: int = 0) -> tuple[dict, str, dict]:
    """``depthpe compare``: (result, Markdown, meta) for the evaluation or run folders ``paths``."""
    if n_boot < 1:
        raise ConfigError(f"--bootstrap must be at least 1, got {n_boot}")
    groups = resolve_inputs(paths, group_by)
    items = [it for members in groups.values() for it in members]
    same = check_manifests(items, allow_different_manifests)
    result = compare_groups(groups, reference=reference, datasets=datasets, n_boot=n_boot, seed=seed)
    others = differing_across_groups(groups, group_by)
    notes = [f"Grouped by `{group_by}`; reference group `{result['reference']}`; Δ = group − reference per scene "
             f"(negative: lower native AbsRel than the reference); bootstrap over scenes, {n_boot} resamples, seed {seed}.",
             "Manifests: identical." if same else
             "Manifests: DIFFERENT (--allow-different-manifests); pairs use the scenes both groups have."]
    if others:
        notes.append(f"Note: the groups also differ in {', '.join(others)}.")
    meta = {"group_by": group_by, "reference": result["reference"], "bootstrap": n_boot, "seed": seed,
            "same_manifest": same, "groups_also_differ_in": others,
            "inputs": [{"path": it.path, "eval_dir": str(it.eval_dir), "run_dir": str(it.run_dir) if it.run_dir else None,
                        "group": it.group, "seed": it.seed} for it in items]}
    return result, format_compare(result, notes), meta
