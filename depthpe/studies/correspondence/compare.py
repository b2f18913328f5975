"""``depthpe compare`` for the output folders of ``depthpe study correspondence`` (docs/correspondence.md).

Each folder's ``results.json`` holds one run per seed; the runs are grouped by their encoding (the
default ``--group-by model.global_pe``: ``meta.pe``, with the URoPE anchors, their assignment, the
Plücker input and a depth-loss weight appended when set, e.g. ``urope/anchors=1``, ``rope+plucker``)
or by any other key of ``meta`` (``--group-by lr``). Per evaluation setting (``base``, ``views4``,
...) and group, at the last step and the last global layer: mean ± sample std over seeds of top-1,
within-1 and the lift above the same-position lift at the smallest radius, and the paired
per-scene difference of top-1 against the reference group (per scene the fraction of its true
matches found, averaged over the group's seeds) with the bootstrap 95% interval of ``compare``.
Every folder must have been evaluated on the same held-out scenes (``meta.eval_scenes_of``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Sequence

import numpy as np

from depthpe.config import ConfigError
from depthpe.analysis.compare import markdown_tables, mean_std, mean_std_text, paired_cells, paired_comparison
from depthpe.analysis.settings import BOOTSTRAP, GROUP_BY

__all__ = ["CORRESPONDENCE_COLUMNS", "is_correspondence_folder", "encoding_label", "group_correspondence_runs",
           "run_correspondence_compare", "correspondence_cells"]

RESULTS = "results.json"
# meta keys in which the folders of one group may differ: where they were written, their seeds, the run time
FREE_KEYS = ("out", "seeds", "seconds", "threads", "data")
CORRESPONDENCE_COLUMNS = ("group", "seeds", "top-1", "within-1", "lift − same-position lift", "Δ top-1 vs ref.",
                          "95% interval", "excludes 0")


def is_correspondence_folder(path: str | Path) -> bool:
    """Whether ``path`` holds the ``results.json`` of ``depthpe study correspondence``. A
    ``results.json`` that cannot be read as JSON counts too (no other output writes that name), so
    that its reader names the damage instead of the folder being taken for an evaluation."""
    file = Path(path) / RESULTS
    if not file.is_file():
        return False
    try:
        doc = json.loads(file.read_text())
    except (OSError, ValueError, RecursionError):
        return True
    meta = doc.get("meta") if isinstance(doc, dict) else None
    return isinstance(meta, dict) and "chance_top1" in meta and "settings" in meta


def encoding_label(meta: dict) -> str:
    """The encoding of a correspondence run as a group label: ``meta.pe`` plus ``/anchors=G``,
    ``/channels`` (anchors by channels), ``+plucker`` and ``/depth=W`` where set."""
    label = str(meta["pe"])
    if meta.get("anchors") is not None:
        label += f"/anchors={meta['anchors']}"
    if meta.get("anchor_assignment") == "channels":
        label += "/channels"
    if meta.get("plucker"):
        label += "+plucker"
    if meta.get("depth_weight"):
        label += f"/depth={meta['depth_weight']:g}"
    return label


def _read(path: str) -> dict:
    try:
        doc = json.loads((Path(path) / RESULTS).read_text())
        doc["meta"], doc["runs"]  # noqa: B018 - both must be there
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as err:
        raise ConfigError(f"{path}: not a readable `depthpe study correspondence` folder ({err})") from None
    if not all("scene_top1" in row for run in doc["runs"] for row in run["curve"][-1]["settings"]["base"]):
        raise ConfigError(f"{path}: results.json has no per-scene scores (written before they were recorded); "
                          "run the benchmark again")
    try:
        problem = _score_problem(doc)
    except (KeyError, TypeError, AttributeError) as err:
        raise ConfigError(f"{path}: not a readable `depthpe study correspondence` folder ({err!r})") from None
    if problem:
        raise ConfigError(f"{path}: results.json {problem} where a score (a number or null) belongs; the file was "
                          "edited or is corrupt: run the benchmark again")
    return doc


def _is_score(value) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _score_problem(doc: dict) -> str | None:
    """Where ``doc`` (a results.json) holds something other than a number or null as a score (the
    layer rows' top1, within1, lift_* and per-scene scene_top1 / scene_within1, each point's
    train_loss), or None."""
    for run in doc["runs"]:
        for point in run["curve"]:
            if not _is_score(point.get("train_loss")):
                return f"has train_loss = {point.get('train_loss')!r:.40} (seed {run.get('seed')})"
            for setting, rows in point["settings"].items():
                for row in rows:
                    for key, value in row.items():
                        values = value if key.startswith("scene_") and isinstance(value, list) else [value]
                        scored = key in ("top1", "within1") or key.startswith(("lift", "same_position", "scene_top1",
                                                                               "scene_within1"))
                        bad = next((v for v in values if not _is_score(v)), "ok") if scored else "ok"
                        if bad != "ok":
                            return (f"has {key} = {bad!r:.40} (seed {run.get('seed')}, step {point.get('step')}, "
                                    f"setting {setting}, layer {row.get('layer')})")
    return None


def _group(path: str, doc: dict, group_by: str) -> str:
    meta = doc["meta"]
    if group_by == GROUP_BY:
        return encoding_label(meta)
    if group_by not in meta:
        raise ConfigError(f"--group-by {group_by!r}: not a setting of {path}/{RESULTS} "
                          f"(settings: {', '.join(sorted(meta))})")
    value = meta[group_by]
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _check_same(groups: dict[str, list], group_by: str) -> None:
    """One held-out set for every folder; the folders of a group differ only in the ``FREE_KEYS``."""
    first_path, first = next(iter(groups.values()))[0]
    for label, members in groups.items():
        for path, doc in members:
            if doc["meta"].get("eval_scenes_of") != first["meta"].get("eval_scenes_of"):
                raise ConfigError(f"{path} and {first_path} were evaluated on different held-out scenes; compare "
                                  "runs of one data folder and --eval-scenes")
        base_path, base = members[0]
        for path, doc in members[1:]:
            keys = sorted(k for k in set(base["meta"]) | set(doc["meta"])
                          if k not in FREE_KEYS and k != group_by and base["meta"].get(k) != doc["meta"].get(k))
            if keys:
                raise ConfigError(f"group {label!r}: {base_path} and {path} differ in {keys[0]} "
                                  f"({base['meta'].get(keys[0])!r} vs {doc['meta'].get(keys[0])!r}), not only in "
                                  "the seed; compare one configuration at a time or --group-by that setting")


def group_correspondence_runs(paths: Sequence[str], group_by: str = GROUP_BY) -> tuple[dict[str, list], dict]:
    """({group: [(path, results.json document)]} in order of first appearance, the first folder's
    meta) of correspondence folders, checked: one held-out set, a group differs only in the seed."""
    groups: dict[str, list] = {}
    for path in paths:
        doc = _read(path)
        groups.setdefault(_group(path, doc, group_by), []).append((path, doc))
    _check_same(groups, group_by)
    return groups, next(iter(groups.values()))[0][1]["meta"]


def _last_rows(doc: dict, setting: str) -> list[dict]:
    """The last-layer row at the last step of every seed of one folder, in ``setting``."""
    rows = []
    for run in doc["runs"]:
        layers = run["curve"][-1]["settings"].get(setting)
        if layers is None:
            raise ConfigError(f"{doc['meta'].get('out')}: no evaluation setting {setting!r}; compare runs "
                              "evaluated in the same settings")
        rows.append(layers[-1])
    return rows


def _scene_means(rows: list[dict], scenes: list[str]) -> dict[str, float]:
    """{scene: top-1 averaged over the seeds (rows) that have matches in it}."""
    out = {}
    for k, scene in enumerate(scenes):
        values = [row["scene_top1"][k] for row in rows if row["scene_top1"][k] is not None]
        if values:
            out[scene] = float(np.mean(values))
    return out


def _stat(values: list[float]) -> dict:
    mean, std = mean_std([v if v is not None else math.nan for v in values])
    return {"mean": mean, "std": std, "values": values}


def _setting_table(groups: dict[str, list], setting: str, views: int, reference: str, r0: int,
                   n_boot: int, seed: int) -> dict:
    """{group: {"seeds", "n_seeds", "top1", "within1", "lift_minus_same" (``_stat``), "paired"}}."""
    scenes = next(iter(groups.values()))[0][1]["meta"]["eval_scenes_of"][str(views)]
    rows = {label: [row for _, doc in members for row in _last_rows(doc, setting)] for label, members in groups.items()}
    ref = _scene_means(rows[reference], scenes)
    table = {}
    for label, members in groups.items():
        r = rows[label]
        table[label] = {"seeds": [s for _, doc in members for s in (run["seed"] for run in doc["runs"])],
                        "n_seeds": len(r), "top1": _stat([x["top1"] for x in r]),
                        "within1": _stat([x["within1"] for x in r]),
                        "lift_minus_same": _stat([x.get(f"lift_minus_same_r{r0}") for x in r]),
                        "paired": paired_comparison(_scene_means(r, scenes), ref, n_boot=n_boot, seed=seed)}
    return table


def run_correspondence_compare(paths: Sequence[str], *, group_by: str = GROUP_BY, reference: str | None = None,
                               n_boot: int = BOOTSTRAP, seed: int = 0) -> tuple[dict, str, dict]:
    """``depthpe compare CORR_DIR ...``: (result, Markdown, meta) of correspondence benchmark folders."""
    if n_boot < 1:
        raise ConfigError(f"--bootstrap must be at least 1, got {n_boot}")
    groups, meta0 = group_correspondence_runs(paths, group_by)
    reference = reference if reference is not None else next(iter(groups))
    if reference not in groups:
        raise ConfigError(f"--reference {reference!r}: no such group (groups: {', '.join(groups)})")
    first = next(iter(groups.values()))[0][1]
    r0, layer = min(meta0["radii"]), first["runs"][0]["curve"][-1]["settings"]["base"][-1]["layer"]
    settings = {s["name"]: s["views"] for s in meta0["settings"]}
    result = {"kind": "correspondence", "reference": reference, "layer": layer, "radius": r0,
              "chance_top1": meta0["chance_top1"],
              "settings": {name: _setting_table(groups, name, views, reference, r0, n_boot, seed)
                           for name, views in settings.items()}}
    notes = [f"Correspondence benchmark, last step, global layer {layer} (the last); grouped by `{group_by}`; "
             f"reference group `{reference}`; chance top-1 {meta0['chance_top1']:.3f}; lift at radius {r0}.",
             f"Δ = per-scene top-1 of the group minus the reference's (each scene's fraction of its true matches "
             f"found, averaged over seeds; positive: more matches found); bootstrap over scenes, {n_boot} "
             f"resamples, seed {seed}."]
    meta = {"group_by": group_by, "reference": reference, "bootstrap": n_boot, "seed": seed,
            "inputs": [{"path": p, "eval_dir": p, "run_dir": None, "group": label, "seed": doc["meta"]["seeds"]}
                       for label, members in groups.items() for p, doc in members]}
    return result, markdown_tables(correspondence_cells(result), CORRESPONDENCE_COLUMNS, notes), meta


def correspondence_cells(result: dict) -> dict[str, list[list[str]]]:
    """Per setting (table title ``<setting> (layer L)``), one row of cells per group."""
    out = {}
    for name, table in result["settings"].items():
        out[f"{name} (layer {result['layer']})"] = [
            [label, str(e["n_seeds"]), mean_std_text(e["top1"], 3), mean_std_text(e["within1"], 3),
             mean_std_text(e["lift_minus_same"], 2), *paired_cells(e["paired"], label == result["reference"], 3)]
            for label, e in table.items()]
    return out
