"""``depthpe rmvd --model``: predict every sample with a model, then score the predictions with
the harness (one scoring path: ``harness.score_lists`` on ``OUT/predictions``).

Per setting, dataset and sample (in that order), batch size 1:

* the views: ``single_view`` the keyview alone; ``index_distance`` the headline set
  (``orderings.headline_views``); the oracle orderings every set that ``orderings.oracle_best``
  scores, each predicted when first asked for (a set is predicted once per sample);
* the input: ``views.SampleImages.inputs`` at ``views.input_hw`` (keyview first); the model runs
  through ``depthpe.prediction.api.run_views``, i.e. ``depthpe.model.inference.predict_depth``:
  ``known_poses`` with the true poses (depth in metres), the others with identity poses and
  scale 1 (``models.settings_problem`` lets only models that ignore cameras run them);
* the outputs: the keyview's depth (metres in ``known_poses``, the model's unit otherwise) and
  confidence at the model's resolution, ``OUT/predictions/`` in the harness's layout
  (``harness.prediction_path``, ``harness.confidence_path``), each written atomically, then the
  sample's record (``resume``) with its runtime and peak memory (``measure``; the first
  ``--burn-in`` samples of each setting and dataset are not measured).

``--out`` is owned through ``depthpe.files.output_folder`` for the whole run (its lock; another
command's outputs or another fingerprint refused unless ``--restart``); an interrupted run
continues with the samples not recorded (``resume.open_store``).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from ..config import ConfigError
from ..evaluation.command import out_lock
from ..files import atomic_target
from ..prediction.api import run_views
from . import orderings
from .config import RmvdConfig
from .harness import confidence_path, prediction_path, predictions_root, publish, read_ground_truth, score_lists, score_views
from .measure import cpu_peak_available, measured
from .models import ModelFacts, load_model, model_facts
from .resume import (PREDICTIONS_DIR, finished_records, make_record, open_store, record_key, rmvd_difference,
                     rmvd_fingerprint)
from .samples import RmvdSample, load_sample_lists
from .views import SampleImages, input_hw

__all__ = ["MODEL_COMMAND", "run_model_rmvd", "scoring_config", "sample_view_sets_key", "predict_sample", "noisy_cameras"]

MODEL_COMMAND = "depthpe rmvd --model"  # how the output folder's owner names this writer


def scoring_config(cfg: RmvdConfig) -> RmvdConfig:
    """The harness's config of a ``--model`` run: the same settings, reading ``OUT/predictions``
    (no camera noise: the predictions were made with it, scoring never perturbs anything)."""
    return dataclasses.replace(cfg, predictions=str(Path(cfg.out) / PREDICTIONS_DIR), model=None,
                               rotation_noise=0.0, translation_noise=0.0, focal_noise=0.0)


def sample_view_sets_key(cfg: RmvdConfig, setting: str, views: tuple[int, ...]) -> tuple[int, ...] | None:
    """How the harness's layout names the prediction of ``views``: None (one map per sample) for
    ``single_view`` and ``index_distance``, else the view set itself."""
    return None if setting == "single_view" or cfg.ordering not in orderings.ORACLE_ORDERINGS else views


def _save_npy(path: Path, array: np.ndarray) -> None:
    """``array`` as a ``.npy`` file at ``path``, written atomically."""
    with atomic_target(path) as tmp, open(tmp, "wb") as f:
        np.save(f, np.ascontiguousarray(array), allow_pickle=False)


def noisy_cameras(cfg: RmvdConfig, K: np.ndarray, w2c: np.ndarray, key: str) -> tuple[np.ndarray, np.ndarray]:
    """The cameras of one view set (K (S, 3, 3) pixels, w2c (S, 4, 4) metres, keyview first) as the
    model is given them: perturbed by ``cfg``'s camera noise (``geometry.perturb_cameras``, the
    keyview kept; seeded from ``cfg.noise_seed`` and ``key`` = ``"<dataset>/<sample>"``), or
    themselves without noise. The metric scale then comes from the perturbed poses, as it would
    from a user's noisy ones."""
    from ..config.camera_noise import scene_noise_seed
    from ..geometry import perturb_cameras

    noise = cfg.camera_noise()
    if noise.is_zero:
        return K, w2c
    generator = torch.Generator().manual_seed(scene_noise_seed(cfg.noise_seed, key))
    K2, w2 = perturb_cameras(torch.from_numpy(K), torch.from_numpy(w2c), rotation_deg=noise.rotation_deg,
                             translation=noise.translation, focal=noise.focal, generator=generator)
    return K2.numpy(), w2.numpy()


@dataclasses.dataclass
class _Run:
    """What every sample's prediction needs: the settings, the model and its facts, the device."""

    cfg: RmvdConfig
    facts: ModelFacts
    model: torch.nn.Module
    device: torch.device


def predict_sample(run: _Run, setting: str, dataset: str, sample: RmvdSample, measure: bool) -> list[dict]:
    """Predict the view sets of ``sample`` in ``setting`` (module docstring), write each keyview's
    depth and confidence under ``OUT/predictions``; returns per view set {"views" (sorted list),
    "runtime_ms", "peak_memory_mib"} (NaN unless ``measure``)."""
    cfg, images = run.cfg, SampleImages(sample)
    out_hw = input_hw(cfg.input_size, dataset, images.image(sample.keyview).shape[:2], run.facts.image_width)
    root = predictions_root(scoring_config(cfg), setting)
    predicted: dict[tuple[int, ...], dict] = {}

    def predict(views: tuple[int, ...]) -> None:
        if views in predicted:
            return
        imgs, K, w2c = images.inputs(views, out_hw)
        if setting == "known_poses":
            K, w2c = noisy_cameras(cfg, K, w2c, f"{dataset}/{sample.name}")
        poses = w2c if setting == "known_poses" else None
        (depth, conf), m = measured(lambda: run_views(run.model, imgs, K, poses, cfg.dtype, run.facts.scale_reference),
                                    run.device, measure)
        key = sample_view_sets_key(cfg, setting, views)
        _save_npy(prediction_path(root, dataset, sample.name, key), depth[0])
        _save_npy(confidence_path(root, dataset, sample.name, key), conf[0])
        predicted[views] = {"views": list(views), "runtime_ms": m.runtime_ms, "peak_memory_mib": m.peak_memory_mib}

    if setting == "single_view":
        predict((sample.keyview,))
    elif cfg.ordering == "index_distance":
        predict(orderings.headline_views(sample.keyview, len(sample.views), cfg.max_source_views))
    else:
        gt = read_ground_truth(sample)

        def score(views):
            predict(views)
            return score_views(root, dataset, sample.name, views, gt, setting, check_aspect=False)

        orderings.oracle_best(sample.keyview, len(sample.views), cfg.ordering, score, cfg.max_source_views)
    return list(predicted.values())


def _check_lists(cfg: RmvdConfig, lists) -> None:
    """Before anything runs: ``--input-size rmvd`` knows every dataset (``views.input_hw``), and
    ``known_poses`` has a source view in every sample (the poses give the scale)."""
    for sl in lists:
        if cfg.input_size == "rmvd":
            input_hw(cfg.input_size, sl.dataset, (1, 1), 14)
        for sample in sl.samples if "known_poses" in cfg.settings else ():
            if len(sample.views) < 2 or cfg.max_source_views == 0:
                raise ConfigError(f"--setting known_poses needs at least one source view per sample (the poses give "
                                  f"the metric scale), but {sl.dataset}/{sample.name} is predicted with its keyview "
                                  "alone; use --max-source-views >= 1, or the single_view setting")


def _files_exist(cfg: RmvdConfig, record) -> bool:
    """Whether a record's depth and confidence maps are all in ``OUT/predictions``."""
    setting, dataset, sample = json.loads(record.key)
    root = predictions_root(scoring_config(cfg), setting)
    keys = [sample_view_sets_key(cfg, setting, tuple(r["views"])) for r in record.rows]
    return bool(keys) and all(path(root, dataset, sample, key).is_file()
                              for key in keys for path in (prediction_path, confidence_path))


def _predict_all(cfg: RmvdConfig, facts: ModelFacts, lists, store, device: torch.device) -> dict:
    """Predict every (setting, dataset, sample) that has no record yet; returns {key: record} of all."""
    from tqdm.auto import tqdm

    done, skipped = finished_records(store, lambda record: _files_exist(cfg, record))
    work = [(setting, sl.dataset, sample) for setting in cfg.settings for sl in lists for sample in sl.samples]
    todo = [w for w in work if record_key(w[0], w[1], w[2].name) not in done]
    if skipped:
        print(f"warning: {skipped} record(s) in {cfg.out}/partial were unusable or their maps are gone; "
              "those samples are predicted again", flush=True)
    if done:
        print(f"resuming: {len(work) - len(todo)} of {len(work)} samples predicted already ({cfg.out}/partial)",
              flush=True)
    if not todo:
        return done
    run = _Run(cfg, facts, load_model(facts, str(device)), device)
    print(f"predicting on {device} at {facts.width_note}, --input-size {cfg.input_size}"
          + (", bf16 autocast" if cfg.dtype == "bf16" else ""), flush=True)
    started: Counter = Counter()
    with tqdm(total=len(work), initial=len(work) - len(todo), desc="rmvd", unit="sample",
              disable=not cfg.progress) as bar:
        for setting, dataset, sample in todo:
            bar.set_postfix_str(f"{setting} {dataset}", refresh=False)
            measure = started[setting, dataset] >= cfg.burn_in
            started[setting, dataset] += 1
            record = make_record(setting, dataset, sample.name, predict_sample(run, setting, dataset, sample, measure))
            store.append(record)
            done[record.key] = record
            bar.update()
    return done


def _with_measurements(rows: list[dict], records: dict) -> list[dict]:
    """The harness's rows with the runtime and peak memory of the view set each scored (NaN: not measured)."""
    out = []
    for row in rows:
        record = records[record_key(row["setting"], row["dataset"], row["sample"])]
        views = [int(v) for v in row["views"].split()]
        entry = next((r for r in record.rows if sorted(r["views"]) == views), {})
        values = {k: entry.get(k) for k in ("runtime_ms", "peak_memory_mib")}
        out.append({**row, **{k: math.nan if v is None else float(v) for k, v in values.items()}})
    return out


def _memory_note(device: torch.device) -> str:
    """How peak memory was measured on ``device`` (``measure`` module docstring)."""
    if device.type == "cuda":
        return "torch.cuda.max_memory_allocated during the prediction, model weights included (MiB)"
    if cpu_peak_available():
        return "peak resident-set growth during the prediction, VmHWM - VmRSS of /proc/self/status (MiB)"
    return "not measured (/proc/self/clear_refs cannot be written here)"


def _meta(cfg: RmvdConfig, facts: ModelFacts, device: torch.device) -> dict:
    """summary.json's "meta" of a ``--model`` run: what ran, on what input, how it was measured."""
    return {"model": cfg.model, "revision": cfg.revision, "kind": facts.kind, "global_pe": facts.config.global_pe,
            "camera_free": facts.camera_free, "input_size": cfg.input_size, "input_width": facts.width_note,
            "dtype": cfg.dtype, "device": str(device), "batch_size": 1, "burn_in": cfg.burn_in,
            "runtime": "wall-clock ms of the prediction call (copies in and out included)",
            "peak_memory": _memory_note(device), **cfg.camera_noise_entry()}


def run_model_rmvd(cfg: RmvdConfig) -> dict:
    """``depthpe rmvd --model``: check the model can run the settings, predict (resuming an
    interrupted run in ``cfg.out``), score ``OUT/predictions`` with the harness, write the outputs
    and print the table; returns the summary. Problems are one ``ConfigError`` line."""
    lists = load_sample_lists(cfg.samples, cfg.data_roots)
    _check_lists(cfg, lists)
    facts = model_facts(cfg)  # refuses a setting the model cannot run
    try:
        device = torch.device(cfg.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    except RuntimeError as err:
        raise ConfigError(f"--device {cfg.device!r} is not a torch device ({err}); e.g. cpu, cuda, cuda:1") from None
    fingerprint = rmvd_fingerprint(cfg, facts, lists, device.type)
    with out_lock(cfg.out, command=MODEL_COMMAND, replace=cfg.restart, difference=rmvd_difference) as folder:
        store = open_store(cfg, fingerprint, folder)
        try:
            records = _predict_all(cfg, facts, lists, store, device)
        finally:
            store.close()
        rows = _with_measurements(score_lists(scoring_config(cfg), lists, check_aspect=False), records)
        return publish(cfg.out, rows, _meta(cfg, facts, device))
