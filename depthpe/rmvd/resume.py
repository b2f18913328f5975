"""What ``depthpe rmvd --model`` keeps so that an interrupted run continues: the record of every
predicted sample in ``OUT/partial/``, in the store of ``depthpe eval``'s partial results
(``depthpe.evaluation.partial.PartialEvaluation``: ``settings.json`` with the fingerprint, one JSON
line per record carrying the settings' hash, lines of other settings or cut short by a kill skipped).

One record per (setting, dataset, sample), written after the sample's depth and confidence maps
are in ``OUT/predictions/``: a ``SceneRecord`` with key ``["setting", "dataset", "sample"]`` (JSON),
``dataset``, ``scene`` = the sample's name and ``rows`` = one entry per view set predicted:
``{"views": [sorted view indices], "runtime_ms", "peak_memory_mib"}`` (null = not measured). The
records stay after the run ends (they hold the runtimes): a rerun with the same settings predicts
nothing and scores again; other settings are refused unless ``--restart``, which empties
``OUT/partial/`` and ``OUT/predictions/``.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

from ..config import ConfigError
from ..evaluation.partial import PartialEvaluation
from ..evaluation.record import SceneRecord
from .config import RmvdConfig

__all__ = ["PREDICTIONS_DIR", "DESCRIBED", "rmvd_fingerprint", "record_key", "make_record", "open_store",
           "finished_records"]

PREDICTIONS_DIR = "predictions"
# Fingerprint entries that are not an option of their own: how an error names them.
DESCRIBED = {
    "model_source": "the checkpoint --model names",
    "weights": "the weights file of --model (its size or modification time)",
    "model_config": "the config of --model (config.json, or --vggt-overrides)",
    "sample_lists": "the sample lists of --samples (their paths or contents)",
    "image_width": "the input width (--image-width, or the model's training_inputs.json)",
    "scale_reference": "the scale reference of --model (training_inputs.json)",
    "device": "the device (--device, or the GPU)",
    "depthpe": "the depthpe version",
    "camera_noise": "the camera noise (--rotation-noise, --translation-noise, --focal-noise, --noise-seed)",
}


def rmvd_fingerprint(cfg: RmvdConfig, facts, lists, device: str) -> dict:
    """Everything that determines the predictions of a ``--model`` run: the model
    (``facts.identity()``: spec, source, revision, weights file's size and mtime, config hash), the
    sample lists (path and SHA-256 of each file of ``lists``), the settings, ordering, source
    views, input size and width, scale reference, dtype, burn-in, the device type, the depthpe
    version and the camera noise (when there is any). Not in it: ``--ause`` and ``--quiet`` (scoring and display only)."""
    from .. import __version__

    samples = [[str(Path(sl.path).resolve()), hashlib.sha256(Path(sl.path).read_bytes()).hexdigest()] for sl in lists]
    return {**facts.identity(), "sample_lists": samples, "settings": list(cfg.settings), "ordering": cfg.ordering,
            "max_source_views": cfg.max_source_views, "input_size": cfg.input_size, "image_width": facts.image_width,
            "scale_reference": facts.scale_reference, "dtype": cfg.dtype, "burn_in": cfg.burn_in, "device": device,
            "depthpe": __version__, **cfg.camera_noise_entry()}


def record_key(setting: str, dataset: str, sample: str) -> str:
    """The record key of a sample in a setting: JSON ``["setting", "dataset", "sample"]`` (names may hold ``/``)."""
    return json.dumps([setting, dataset, sample])


def make_record(setting: str, dataset: str, sample: str, predicted: list[dict]) -> SceneRecord:
    """The record of a predicted sample; ``predicted``: per view set {"views", "runtime_ms",
    "peak_memory_mib"} (NaN kept as None)."""
    rows = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in p.items()}
            for p in predicted]
    return SceneRecord(key=record_key(setting, dataset, sample), dataset=dataset, scene=sample, rows=rows)


def open_store(cfg: RmvdConfig, fingerprint: dict) -> PartialEvaluation:
    """The record store of ``cfg.out`` to continue (checked against ``fingerprint``: other settings
    are one ``ConfigError`` line naming the first difference, unless ``cfg.restart``), or a new one
    (``--restart`` or none yet: ``OUT/partial/`` and ``OUT/predictions/`` emptied first)."""
    store = PartialEvaluation(cfg.out, config_class=RmvdConfig, described=DESCRIBED)
    if store.exists() and not cfg.restart:
        try:
            store.check(fingerprint)
        except ConfigError as err:
            raise ConfigError(str(err).replace("a partial evaluation", "the predictions of a depthpe rmvd --model run")
                              .replace("the partial results", "them")) from None
        return store
    shutil.rmtree(Path(cfg.out) / PREDICTIONS_DIR, ignore_errors=True)
    store.start(fingerprint)
    return store


def finished_records(store: PartialEvaluation, exists) -> tuple[dict[str, SceneRecord], int]:
    """({key: record} of the samples done, the number of records skipped): the store's records
    (``store.records()``) whose prediction files are all there (``exists(record)`` True); a record
    whose files are gone is predicted again."""
    done, skipped = {}, 0
    for record in store.records():
        if exists(record):
            done[record.key] = record
        else:
            skipped += 1
    return done, skipped + store.bad_records
