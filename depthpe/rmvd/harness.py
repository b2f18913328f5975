"""Score a folder of predicted depth maps on RMVD sample lists and write the tables.

Predictions layout (metres, float ``.npy`` of shape (h, w) or (1, h, w), any resolution)::

    DIR/<dataset>/<sample>.npy                    index_distance ordering and single_view
    DIR/<dataset>/<sample>/views_<i>-<j>-....npy  oracle orderings: one map per view set (sorted
                                                  view indices, the keyview included)

With several ``--setting`` values each setting reads its own ``DIR/<setting>/`` in this layout.
With ``--ause`` each map's confidence (larger = more certain, any resolution) lies next to it as
``<name>~conf.npy`` (``confidence_path``; ``~`` never occurs in a safe name, so no name collides).

``<dataset>`` and ``<sample>`` are ``depthpe.files.safe_component`` of the list's names.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np

from ..config import ConfigError
from ..files import atomic_write_bytes, safe_component
from ..scenes.format.npy_header import npy_claim_problem
from . import metrics, orderings, sparsification
from .config import RmvdConfig
from .datasets.readers import read_native_depth
from .samples import RmvdSample, SampleList, load_sample_lists

__all__ = ["read_depth", "read_ground_truth", "prediction_path", "confidence_path", "predictions_root", "score_views",
           "score_sample", "score_lists", "summarize", "render_markdown", "write_outputs", "publish", "run_rmvd"]

SCORE_COMMAND = "depthpe rmvd"  # how the output folder's owner names ``depthpe rmvd --predictions``
CSV_FIELDS = ("dataset", "sample", "setting", "ordering", "views", "pred_hw", "abs_rel", "inliers", "scale")
# Columns a row may carry besides CSV_FIELDS (AUSE with --ause; runtime and peak memory of a --model
# run), in this order; summarized like AbsRel (mean per dataset, then over datasets).
OPTIONAL_FIELDS = ("ause", "runtime_ms", "peak_memory_mib")


def read_depth(path: Path, what: str) -> np.ndarray:
    """A depth map (H, W) float64 from ``path`` (``.npy``, (H, W) or (1, H, W), finite, no pickles);
    a missing or bad file is one ConfigError line naming ``what`` it is; a header claiming more than
    the file holds, or a side above the scene format's largest, is refused before anything is
    allocated (``npy_claim_problem``)."""
    try:
        with open(path, "rb") as f:
            problem = npy_claim_problem(f, Path(path).stat().st_size)
        if problem:
            raise ConfigError(f"{what} {path}: {problem[1]}")
        arr = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist (layout: docs/rmvd.md)") from None
    except (OSError, ValueError) as err:
        raise ConfigError(f"{what} {path} is not a readable .npy array ({err})") from None
    arr = np.asarray(arr)
    if arr.ndim == 3 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim != 2 or arr.dtype.kind not in "fiu" or 0 in arr.shape:
        raise ConfigError(f"{what} {path} must be a numeric (H, W) depth map, got {arr.dtype} {arr.shape}")
    if not np.isfinite(arr).all():
        raise ConfigError(f"{what} {path} has NaN or infinite values (write a finite depth; 0 is scored as 0.1 m)")
    return arr.astype(np.float64)


def read_ground_truth(sample: RmvdSample) -> np.ndarray:
    """The keyview GT of ``sample`` (H, W) float64 metres, 0 = none: a ``.npy`` (``read_depth``) or a
    file in the native encoding of ``sample.depth_format`` (``depthpe.rmvd.datasets``)."""
    if sample.depth_format == "npy":
        return read_depth(sample.depth, "ground-truth depth")
    return read_native_depth(sample.depth_format, sample.depth, sample.views[sample.keyview].image)


def prediction_path(root: Path, dataset: str, sample: str, views: tuple[int, ...] | None) -> Path:
    """Where the prediction of the sample named ``sample`` lies: ``root/<dataset>/<sample>.npy`` for ``views`` None,
    else ``root/<dataset>/<sample>/views_<i>-<j>.npy`` (names made safe with ``safe_component``)."""
    folder = root / safe_component(dataset)
    if views is None:
        return folder / f"{safe_component(sample)}.npy"
    return folder / safe_component(sample) / f"views_{'-'.join(map(str, views))}.npy"


def confidence_path(root: Path, dataset: str, sample: str, views: tuple[int, ...] | None) -> Path:
    """Where the confidence map of a prediction lies: ``prediction_path`` with ``.npy`` replaced by
    ``~conf.npy`` (larger = more certain; read by ``--ause``)."""
    path = prediction_path(root, dataset, sample, views)
    return path.with_name(path.stem + "~conf.npy")


def predictions_root(cfg: RmvdConfig, setting: str) -> Path:
    """Where ``setting``'s predictions lie: ``cfg.predictions``, or ``cfg.predictions/<setting>``
    when several settings are scored in one run."""
    root = Path(cfg.predictions)
    return root / setting if len(cfg.settings) > 1 else root


def read_prediction(path: Path, gt_shape: tuple[int, int], check_aspect: bool = True) -> np.ndarray:
    """A predicted depth map (``read_depth``) that can be scored against a GT of ``gt_shape`` (H, W):
    refused in one line when it has negative values (depth is >= 0; 0 = no prediction) or, with
    ``check_aspect``, when its aspect differs from the GT's by more than 1 % (``metrics.aspect_mismatch``:
    a transposed or cropped map would be stretched onto the keyview). ``depthpe rmvd --model`` maps
    are not checked: they cover the whole keyview, resized to the model's patch-rounded input size
    with exact K (``views.input_hw``), so resizing them back to the GT is right."""
    depth = read_depth(path, "prediction")
    negative = int((depth < 0).sum())
    if negative:
        raise ConfigError(f"prediction {path} has {negative} negative depth value(s); depth must be >= 0 metres "
                          "(write 0 where there is no prediction: it is scored as 0.1 m)")
    off = metrics.aspect_mismatch(depth.shape, gt_shape) if check_aspect else None
    if off is not None:
        raise ConfigError(f"prediction {path} is {depth.shape[0]}x{depth.shape[1]} (HxW) but the keyview's GT is "
                          f"{gt_shape[0]}x{gt_shape[1]}: aspects differ by {100 * off:.1f} % (at most 1 %); write the "
                          "depth map at the keyview's aspect (a transposed array?)")
    return depth


def score_views(root: Path, dataset: str, sample: str, views: tuple[int, ...] | None, gt: np.ndarray,
                setting: str, check_aspect: bool = True) -> dict:
    """The metrics (``metrics.score_keyview``) of the prediction of ``views`` (None: the one map of
    the headline or single-view layout) of the sample named ``sample``, read under ``root``
    (``read_prediction``), and its original size ``pred_hw`` ("HxW")."""
    depth = read_prediction(prediction_path(root, dataset, sample, views), gt.shape, check_aspect)
    return {**metrics.score_keyview(depth, gt, setting), "pred_hw": f"{depth.shape[0]}x{depth.shape[1]}"}


def _keyview_ause(root: Path, dataset: str, sample: str, views: tuple[int, ...] | None, gt: np.ndarray,
                  setting: str) -> float:
    """AUSE (``sparsification.keyview_ause``) of the prediction of ``views`` and its confidence map."""
    depth = read_depth(prediction_path(root, dataset, sample, views), "prediction")
    conf = read_depth(confidence_path(root, dataset, sample, views), "confidence map (for --ause)")
    return sparsification.keyview_ause(depth, conf, gt, setting)


def score_sample(cfg: RmvdConfig, setting: str, dataset: str, sample: RmvdSample, gt: np.ndarray,
                 check_aspect: bool = True) -> dict:
    """One CSV row of ``sample`` (GT ``gt`` (H, W) metres): its metrics in ``setting`` with the
    views of ``cfg.ordering`` (``keyview_only`` for single_view), the predictions read from
    ``predictions_root(cfg, setting)``; with ``cfg.ause`` also the AUSE of the view set scored."""
    root = predictions_root(cfg, setting)

    def score(views):
        return score_views(root, dataset, sample.name, views, gt, setting, check_aspect)

    if setting == "single_view":
        result, ordering = {**score(None), "views": (sample.keyview,)}, "keyview_only"
    elif cfg.ordering == "index_distance":
        views = orderings.headline_views(sample.keyview, len(sample.views), cfg.max_source_views)
        result, ordering = {**score(None), "views": views}, cfg.ordering
    else:
        result = orderings.oracle_best(sample.keyview, len(sample.views), cfg.ordering, score,
                                       cfg.max_source_views)
        ordering = cfg.ordering
    row = {"dataset": dataset, "sample": sample.name, "setting": setting, "ordering": ordering,
           "views": " ".join(map(str, result["views"])), "pred_hw": result["pred_hw"], "abs_rel": result["abs_rel"],
           "inliers": result["inliers"], "scale": result["scale"]}
    if cfg.ause:
        oracle = setting != "single_view" and cfg.ordering in orderings.ORACLE_ORDERINGS
        row["ause"] = _keyview_ause(root, dataset, sample.name, result["views"] if oracle else None, gt, setting)
    return row


def score_lists(cfg: RmvdConfig, lists: list[SampleList], check_aspect: bool = True) -> list[dict]:
    """The CSV rows of every sample of every list in every setting of ``cfg.settings``: list order,
    then sample order, then setting order (each GT read once); ``check_aspect``: ``read_prediction``'s."""
    rows = []
    for sl in lists:
        for sample in sl.samples:
            gt = read_ground_truth(sample)
            rows.extend(score_sample(cfg, setting, sl.dataset, sample, gt, check_aspect) for setting in cfg.settings)
    return rows


def _nanmean(values) -> float:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def _summarize_setting(rows: list[dict]) -> dict:
    """One setting's rows -> per dataset the mean AbsRel and inliers (percent), of the
    ``OPTIONAL_FIELDS`` the rows carry, and the sample count, the benchmark mean over datasets, the
    ordering and whether it is an oracle one."""
    keys = ("abs_rel", "inliers", *(k for k in OPTIONAL_FIELDS if k in rows[0]))
    datasets: dict[str, dict] = {}
    for name in dict.fromkeys(r["dataset"] for r in rows):
        mine = [r for r in rows if r["dataset"] == name]
        datasets[name] = {**{key: _nanmean(r[key] for r in mine) for key in keys}, "samples": len(mine)}
    mean = {key: metrics.benchmark_mean({n: d[key] for n, d in datasets.items()}) for key in keys}
    ordering = rows[0]["ordering"]
    return {"ordering": ordering, "oracle": ordering in orderings.ORACLE_ORDERINGS, "datasets": datasets,
            "mean": mean}


def summarize(rows: list[dict]) -> dict:
    """summary.json's content: ``{"settings": {setting: {"ordering", "oracle" (True when the views
    were chosen with the GT), "datasets": {name: {"abs_rel", "inliers", "samples"}}, "mean":
    {"abs_rel", "inliers"}}}}``, percent, in the order the settings were given; with "ause",
    "runtime_ms", "peak_memory_mib" next to "abs_rel" where the rows carry them."""
    settings = dict.fromkeys(r["setting"] for r in rows)
    return {"settings": {s: _summarize_setting([r for r in rows if r["setting"] == s]) for s in settings}}


def render_markdown(summary: dict) -> str:
    """summary.md: one row per dataset and the mean; per setting two columns, AbsRel (%, 2 decimals)
    and inliers (%, 1 decimal); the first line names each setting's ordering (marked as an oracle
    number where it is one); the means of runtime, memory and AUSE where measured, and
    ``burn_in_note`` where --burn-in left a dataset unmeasured."""
    settings = summary["settings"]
    labels = [f"{s}: ordering {v['ordering']}" + (" (oracle: views chosen with the GT)" if v["oracle"] else "")
              for s, v in settings.items()]
    header = "| dataset | samples | " + " | ".join(f"{s} AbsRel % | {s} inliers (<1.03) %" for s in settings) + " |"
    lines = ["RMVD, " + "; ".join(labels), "", header, "|---|---|" + "---|---|" * len(settings)]
    first = next(iter(settings.values()))
    for name, d in first["datasets"].items():
        cells = [f"{v['datasets'][name]['abs_rel']:.2f} | {v['datasets'][name]['inliers']:.1f}"
                 for v in settings.values()]
        lines.append(f"| {name} | {d['samples']} | " + " | ".join(cells) + " |")
    means = [f"{v['mean']['abs_rel']:.2f} | {v['mean']['inliers']:.1f}" for v in settings.values()]
    lines.append("| mean | | " + " | ".join(means) + " |")
    extras = [f"{s}: " + ", ".join(f"{k} {v['mean'][k]:.4g}" for k in OPTIONAL_FIELDS if k in v["mean"])
              for s, v in settings.items() if any(k in v["mean"] for k in OPTIONAL_FIELDS)]
    if extras:
        lines += ["", "Means over datasets: " + "; ".join(extras)]
    note = burn_in_note(summary)
    if note:
        lines += ["", note]
    return "\n".join(lines) + "\n"


def burn_in_note(summary: dict) -> str | None:
    """Why runtime and peak memory read nan, when ``--burn-in`` (``meta.burn_in`` of a ``--model``
    run) is at least the sample count of a dataset: its first ``burn_in`` samples of each setting
    are not measured, so none of them is. None when no dataset is in that case."""
    burn_in = (summary.get("meta") or {}).get("burn_in")
    if not burn_in:
        return None
    short = [f"{name} ({setting}, {d['samples']} sample(s))" for setting, v in summary["settings"].items()
             for name, d in v["datasets"].items()
             if "runtime_ms" in d and not np.isfinite(d["runtime_ms"]) and d["samples"] <= burn_in]
    if not short:
        return None
    return (f"runtime_ms and peak_memory_mib are nan for {', '.join(short)}: the first --burn-in {burn_in} samples "
            "of each setting and dataset are not measured, and these have no more; lower --burn-in (e.g. "
            "--burn-in 0) to measure them")


def _csv_bytes(rows: list[dict]) -> bytes:
    """per_sample.csv: ``CSV_FIELDS``, then the ``OPTIONAL_FIELDS`` the rows carry."""
    buf = io.StringIO()
    fields = CSV_FIELDS + tuple(k for k in OPTIONAL_FIELDS if rows and k in rows[0])
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue().encode("utf-8")


def _null_for_non_finite(tree):
    """``tree`` (nested dicts) with each NaN or infinite float as None, so summary.json is strict JSON
    (an undefined mean, e.g. over samples without GT, reads ``null``)."""
    if isinstance(tree, dict):
        return {k: _null_for_non_finite(v) for k, v in tree.items()}
    return None if isinstance(tree, float) and not np.isfinite(tree) else tree


def write_outputs(out: Path, rows: list[dict], summary: dict) -> None:
    """summary.md, summary.json, per_sample.csv and report.html (``report.write_report``) in
    ``out``, each written atomically."""
    from .report import write_report

    atomic_write_bytes(out / "per_sample.csv", _csv_bytes(rows))
    text = json.dumps(_null_for_non_finite(summary), indent=2, allow_nan=False)
    atomic_write_bytes(out / "summary.json", text.encode("utf-8"))
    atomic_write_bytes(out / "summary.md", render_markdown(summary).encode("utf-8"))
    write_report(out, summary, rows)


def publish(out: str | Path, rows: list[dict], meta: dict | None = None) -> dict:
    """Summarize ``rows`` (with ``meta``, the facts of a ``--model`` run, as summary.json's "meta"),
    write the outputs to ``out`` and print the table; returns the summary."""
    summary = summarize(rows)
    if meta:
        summary["meta"] = meta
    write_outputs(Path(out), rows, summary)
    print(render_markdown(summary), end="", flush=True)
    unscored = [r for r in rows if not np.isfinite(r["abs_rel"])]
    if unscored:
        first = unscored[0]
        print(f"warning: {len(unscored)} prediction(s) were not scored (first: {first['setting']} "
              f"{first['dataset']}/{first['sample']}): no GT pixel, or in a median-aligned setting median(pred) <= 0, "
              "so no alignment exists; abs_rel and inliers are NaN in per_sample.csv and left out of the means",
              flush=True)
    return summary


def run_rmvd(cfg: RmvdConfig) -> dict:
    """``depthpe rmvd --predictions``: own ``cfg.out`` (``depthpe.files.output_folder``: its lock; another
    command's outputs or other settings refused unless ``--restart``), load the sample lists, score
    every sample, write the outputs, print the table; returns the summary."""
    from ..files.output_folder import claim_output_folder, settings_fingerprint
    from .resume import data_files_hash, rmvd_difference

    with claim_output_folder(cfg.out, SCORE_COMMAND, replace=cfg.restart, replace_flag="--restart",
                             difference=rmvd_difference) as folder:
        lists = load_sample_lists(cfg.samples, cfg.data_roots)
        folder.begin(settings_fingerprint(cfg, data_files=data_files_hash(lists)))
        return publish(cfg.out, score_lists(cfg, lists, check_aspect=not written_by_a_model_run(cfg.predictions)))


def written_by_a_model_run(predictions: str | Path) -> bool:
    """Whether ``predictions`` is the ``predictions/`` folder of a ``depthpe rmvd --model`` output (its
    owner's manifest says so): those maps cover the whole keyview at the model's patch-rounded input
    size (``read_prediction``), so rescoring them skips the aspect check."""
    from ..files.output_folder import folder_owner

    folder = Path(predictions)
    return folder.name == "predictions" and (folder_owner(folder.parent) or {}).get("command") == "depthpe rmvd --model"
