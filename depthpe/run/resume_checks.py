"""What ``--resume`` compares between a checkpoint and the config it resumes with, before anything
is built (``preflight`` calls these; each refusal is one ``ConfigError`` line naming the difference).

* **The model** (``model_differences``): every ``DepthModelConfig`` field of the checkpoint's
  ``model/config.json`` must equal the config's, except ``WEIGHT_SOURCE_FIELDS``.
* **The run** (``resumed_run_id``): a checkpoint of another run (its ``trainer_state.json`` names
  another run id than the ``run.json`` of an ``output_dir`` that holds a run, e.g. a checkpoint
  copied in from another run folder) is refused; the resumed run keeps the checkpoint's id.
* **The rest of the config** (``config_changes``): the whole config, ``data.*`` and ``val.*``
  included, against the ``config.yaml`` of the checkpoint's run folder. A change of a key of
  ``RESUME_FIXED_KEYS`` (what the model is trained to predict: the input width and the scene unit)
  is refused unless ``--allow-config-change KEY`` names it; every other change is allowed and
  logged (``resuming with a changed setting: KEY: OLD -> NEW``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..config import ConfigError, flatten_settings
from ..model.config import DepthModelConfig
from .identity import checkpoint_run_id, new_run_id, read_run_id, run_remains
from .schema import RunConfig

__all__ = ["WEIGHT_SOURCE_FIELDS", "RESUME_FIXED_KEYS", "model_differences", "check_same_model", "resumed_run_id",
           "check_allowed_changes", "config_changes", "changed_settings"]

# Model fields that say where weights come from or how they are computed, not what they are:
# a resumed run may change them (the checkpoint restores every weight).
WEIGHT_SOURCE_FIELDS = ("pretrained", "backbone_weights", "gradient_checkpointing")
# Settings that change what the run trains the model for: refused on resume without --allow-config-change.
RESUME_FIXED_KEYS = ("data.image_width", "data.scale_reference")
_UNSET = object()


def model_differences(checkpoint: Path, cfg: RunConfig) -> list[str]:
    """Model fields whose value in the checkpoint's exported config.json differs from ``cfg``."""
    saved = DepthModelConfig.from_json(checkpoint / "model" / "config.json").to_dict()
    wanted = cfg.model_config().to_dict()
    return [f"model.{k} (checkpoint {saved[k]!r}, config {wanted[k]!r})" for k in sorted(wanted)
            if k not in WEIGHT_SOURCE_FIELDS and saved.get(k) != wanted[k]]


def check_same_model(checkpoint: Path, cfg: RunConfig) -> None:
    """``ConfigError`` naming every model field in which ``cfg`` differs from the checkpoint's model."""
    differences = model_differences(checkpoint, cfg)
    if differences:
        raise ConfigError(f"--resume: the checkpoint {checkpoint} holds another model: {'; '.join(differences)} "
                          "(resume with the model settings it was trained with, or train into a new output_dir; "
                          "settings such as train.steps, val.* and hub.* may change)")


def resumed_run_id(checkpoint: Path, output_dir: str | Path) -> str:
    """The id the resumed run keeps: the checkpoint's, else (older versions) the folder's, else a
    new one. ``ConfigError`` when ``output_dir`` holds a run whose id is not the checkpoint's."""
    theirs, ours = checkpoint_run_id(checkpoint), read_run_id(output_dir)
    if theirs and ours and theirs != ours and run_remains(output_dir):
        raise ConfigError(f"--resume: the checkpoint {checkpoint} belongs to another run (run id {theirs}) than the "
                          f"one in output_dir {output_dir} (run id {ours}): resume from a checkpoint of this run "
                          "(--resume latest after removing the other one), or resume that checkpoint into a new output_dir")
    return theirs or ours or new_run_id()


def check_allowed_changes(allowed: Sequence[str]) -> None:
    """``ConfigError`` for an ``--allow-config-change`` key that a resume does not refuse anyway."""
    for key in allowed:
        if key not in RESUME_FIXED_KEYS:
            raise ConfigError(f"--allow-config-change {key}: not a setting that a resume refuses to change (those are "
                              f"{', '.join(RESUME_FIXED_KEYS)}; every other change is allowed and logged)")


def config_changes(checkpoint: Path, cfg: RunConfig) -> list[tuple[str, object, object]]:
    """(dotted key, old, new) of every setting of the checkpoint run's config.yaml that ``cfg``
    changes, in key order; ``data.*`` and ``val.*`` included, list items by index
    (``data.sources.0.root``); an old or new value that is not there is ``None``. Empty when the
    folder has no config.yaml or one this version cannot read."""
    from .loading import load_run_config

    saved_file = checkpoint.parent.parent / "config.yaml"
    if not saved_file.is_file():
        return []
    try:
        old = flatten_settings(load_run_config(saved_file).to_dict())
    except ConfigError:  # written by another version: nothing to compare
        return []
    new = flatten_settings(cfg.to_dict())
    changes = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key, _UNSET), new.get(key, _UNSET)
        if before == after or _emptied(before, after):
            continue  # a list that gained or lost all its items: the items' own keys say it
        changes.append((key, None if before is _UNSET else before, None if after is _UNSET else after))
    return changes



def _emptied(before, after) -> bool:
    """One side is missing and the other an empty list (``val.sources: []`` against ``val.sources.0.*``)."""
    return (before is _UNSET and after == []) or (after is _UNSET and before == [])


def changed_settings(checkpoint: Path, cfg: RunConfig, allowed: Sequence[str] = ()) -> list[str]:
    """The log lines' "KEY: OLD -> NEW" of every setting ``cfg`` changes since the checkpoint
    (``config_changes``). ``ConfigError`` naming them when one of ``RESUME_FIXED_KEYS`` changes and
    ``allowed`` does not name it."""
    changes = config_changes(checkpoint, cfg)
    refused = [(k, a, b) for k, a, b in changes if k in RESUME_FIXED_KEYS and k not in allowed]
    if refused:
        what = "; ".join(f"{k} changed from {a!r} to {b!r}" for k, a, b in refused)
        flags = " ".join(f"--allow-config-change {k}" for k, _, _ in refused)
        raise ConfigError(f"--resume: {what} since the checkpoint {checkpoint}, which changes what the run trains the "
                          f"model for (keep the run's value, train into a new output_dir, or pass {flags} to resume "
                          "anyway)")
    return [f"{k}: {a!r} -> {b!r}" + (" (allowed by --allow-config-change)" if k in RESUME_FIXED_KEYS else "")
            for k, a, b in changes]
