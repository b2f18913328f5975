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
``OUT/partial/`` and deletes the maps of ``OUT/predictions/`` this command wrote (its manifest,
``depthpe.files.output_folder``; a file it did not write is never deleted).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from ..config import ConfigError
from ..evaluation.partial import PartialEvaluation, settings_difference
from ..evaluation.record import SceneRecord
from .config import RmvdConfig

__all__ = ["PREDICTIONS_DIR", "DESCRIBED", "rmvd_fingerprint", "data_files_hash", "rmvd_difference", "record_key", "make_record", "open_store",
           "finished_records"]

PREDICTIONS_DIR = "predictions"
# Fingerprint entries that are not an option of their own: how an error names them.
DESCRIBED = {
    "model_source": "the checkpoint --model names",
    "weights": "the weights file of --model (its size or modification time)",
    "model_config": "the config of --model (config.json, or --vggt-overrides)",
    "sample_lists": "the sample lists of --samples (their paths or contents)",
    "data_files": "the data the sample lists name (--data-root, or an image or GT file's path, size or modification time)",
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
    views, input size and width, the data the lists name (``data_files_hash``: resolved paths, sizes and
    modification times, so another ``--data-root`` is another fingerprint), scale reference, dtype, burn-in, the device type, the depthpe
    version and the camera noise (when there is any). Not in it: ``--ause`` and ``--quiet`` (scoring and display only)."""
    from .. import __version__

    samples = [[str(Path(sl.path).resolve()), hashlib.sha256(Path(sl.path).read_bytes()).hexdigest()] for sl in lists]
    return {**facts.identity(), "sample_lists": samples, "data_files": data_files_hash(lists), "settings": list(cfg.settings), "ordering": cfg.ordering,
            "max_source_views": cfg.max_source_views, "input_size": cfg.input_size, "image_width": facts.image_width,
            "scale_reference": facts.scale_reference, "dtype": cfg.dtype, "burn_in": cfg.burn_in, "device": device,
            "depthpe": __version__, **cfg.camera_noise_entry()}


def data_files_hash(lists) -> str:
    """SHA-256 of (resolved path, size, modification time ns) of every keyview GT file and view image
    the sample lists ``lists`` name, in list order (a missing file: its path alone)."""
    digest = hashlib.sha256()
    for sl in lists:
        for sample in sl.samples:
            for path in (sample.depth, *(view.image for view in sample.views)):
                path = Path(path).resolve()
                stamp = [path.stat().st_size, path.stat().st_mtime_ns] if path.exists() else []
                digest.update(json.dumps([str(path), *stamp]).encode())
    return digest.hexdigest()


def record_key(setting: str, dataset: str, sample: str) -> str:
    """The record key of a sample in a setting: JSON ``["setting", "dataset", "sample"]`` (names may hold ``/``)."""
    return json.dumps([setting, dataset, sample])


def make_record(setting: str, dataset: str, sample: str, predicted: list[dict]) -> SceneRecord:
    """The record of a predicted sample; ``predicted``: per view set {"views", "runtime_ms",
    "peak_memory_mib"} (NaN kept as None)."""
    rows = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in p.items()}
            for p in predicted]
    return SceneRecord(key=record_key(setting, dataset, sample), dataset=dataset, scene=sample, rows=rows)


def rmvd_difference(old: dict, new: dict) -> str | None:
    """The first entry of two ``depthpe rmvd`` fingerprints that differs, in words."""
    return settings_difference(old, new, RmvdConfig, DESCRIBED)


def open_store(cfg: RmvdConfig, fingerprint: dict, folder) -> PartialEvaluation:
    """The record store of ``cfg.out`` to continue (checked against ``fingerprint``: other settings
    are one ``ConfigError`` line naming the first difference, unless ``cfg.restart``), or a new one
    (``--restart`` or none yet: the records and the maps this command wrote in ``OUT/predictions/``
    deleted first, never a file it did not write). ``folder``: the claimed ``OutputFolder`` of
    ``cfg.out``, told the fingerprint once it is checked."""
    store = PartialEvaluation(cfg.out, config_class=RmvdConfig, described=DESCRIBED)
    if store.exists() and not cfg.restart:
        try:
            store.check(fingerprint)
        except ConfigError as err:
            raise ConfigError(str(err).replace("a partial evaluation", "the predictions of a depthpe rmvd --model run")
                              .replace("the partial results", "them")) from None
        folder.begin(fingerprint)
        return store
    folder.begin(fingerprint)
    folder.remove_own(PREDICTIONS_DIR)
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
