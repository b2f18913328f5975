"""Checks a run config against the machine before anything expensive is built.

``preflight(cfg, resume)`` runs before the Accelerator, the model or any download exists, creates
nothing locally, and raises a one-line ``ConfigError`` for the first problem it finds: an output_dir that is
a file or is in use by a live run, a fresh start into an output_dir that holds a run (unless
``--overwrite``), a data root without ``index.json``, a backbone name timm does not know, a local weights
file that does not exist, a tracker
whose package is missing, a ``hub.repo_id`` that is no Hub repository id, a resume with no checkpoint, with a
checkpoint of another run, with a checkpoint whose model differs from the config or with a changed
setting that changes what the run trains for (``depthpe.run.resume_checks``), and (with a Hugging Face
token, online) a ``hub.repo_id`` the Hub refuses to create or write to: it creates the repository as
the first push would, so a run that could never push stops before it trains. It returns the checkpoint
to resume from, the run id and the settings that changed since the checkpoint (allowed, reported in the log).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..config import ConfigError, did_you_mean
from .checkpoints import find_checkpoint
from .identity import new_run_id, run_remains
from .resume_checks import WEIGHT_SOURCE_FIELDS, changed_settings, check_allowed_changes, check_same_model, resumed_run_id
from .schema import RunConfig

__all__ = ["Preflight", "preflight", "check_data_sources", "check_hub_repo", "RESUME_MODES", "WEIGHT_SOURCE_FIELDS"]

RESUME_MODES = ("latest", "auto")


@dataclass
class Preflight:
    """Outcome of ``preflight``: the checkpoint to resume from (None = a new run), the config keys
    that differ from the checkpoint's run ("key: old -> new"), warnings (broken newer checkpoints
    that ``--resume latest`` passed over), the run's id (``depthpe.run.identity``: the checkpoint's,
    or a new one for a new run) and whether the run already in output_dir is to be moved aside
    first (``--overwrite``)."""

    checkpoint: Path | None = None
    changes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    run_id: str = ""
    move_aside: bool = False


def _check_output_dir(cfg: RunConfig) -> None:
    """output_dir is a writable folder (or can be made one) and no live run holds its lock."""
    from ..files import output_folder_problem
    from .lock import lock_problem

    out = Path(cfg.output_dir)
    problem = output_folder_problem(out, "output_dir", "set output_dir=runs/NAME to a folder path")
    if problem:
        raise ConfigError(problem)
    problem = lock_problem(out)
    if problem:
        raise ConfigError(problem)


def check_data_sources(cfg: RunConfig, *, validation: bool = True) -> None:
    """Every training source (and, with ``validation``, every validation source) has an index.json;
    raises ``ConfigError`` naming the source and how to make its scenes otherwise."""
    if not cfg.data.sources:
        raise ConfigError("data.sources is empty (list at least one source, e.g. {name: synth, root: data})")
    sections = [("data", cfg.data.sources)] + ([("val", cfg.val.sources)] if validation else [])
    for section, sources in sections:
        for i, src in enumerate(sources):
            index = src.split_dir / "index.json"
            if not index.is_file():
                raise ConfigError(
                    f"{section}.sources.{i} ({src.name}): {index} not found (generate scenes with `depthpe synth "
                    f"--out {src.root}`, convert a dataset with `depthpe convert`, or fix {section}.sources.{i}.root)")
            if section == "data":
                _check_training_scenes(i, src)


def _check_training_scenes(index: int, src) -> None:
    """Training source ``index`` lists a scene of 2 or more frames (unless its weight is 0); a
    malformed index is left to the dataset, which names it."""
    from depthpe.loader.scenes import load_entries, too_few_frames_problem
    from depthpe.scenes.format.scene_file import SceneFileError

    try:
        problem = too_few_frames_problem(index, src, load_entries(src))
    except (SceneFileError, OSError, ValueError, KeyError, TypeError):
        return
    if problem:
        raise ConfigError(f"data.sources.{index}: {problem}")


def _check_files(cfg: RunConfig) -> None:
    """Local files named by the config exist; optional tracker packages are installed."""
    if cfg.val.manifest and not Path(cfg.val.manifest).is_file():
        raise ConfigError(f"val.manifest: {cfg.val.manifest} not found (give the val_manifest.json of a run, or null)")
    _check_backbone_name(cfg.model_config().backbone)
    weights = cfg.model.backbone_weights
    if weights and not Path(weights).is_file():
        raise ConfigError(f"model.backbone_weights: {weights} not found (give an existing file or null)")
    init = cfg.model.init_from
    if init and (init.endswith((".safetensors", ".pt", ".pth")) or Path(init).is_absolute()) and not Path(init).is_file():
        raise ConfigError(f"model.init_from: {init} not found (give an existing checkpoint file or a Hub id)")
    for name in cfg.train.report_to:
        if name != "tensorboard" and importlib.util.find_spec(name) is None:
            raise ConfigError(f"train.report_to: the {name} package is not installed "
                              f"(pip install \"depthpe[{name}]\", or remove {name} from train.report_to)")
    if "wandb" in cfg.train.report_to and not _wandb_can_log():
        raise ConfigError("train.report_to: W&B has no credentials here (run `wandb login`, set WANDB_API_KEY, "
                          "or set WANDB_MODE=offline to log locally)")


def _check_backbone_name(name: str) -> None:
    """``model.backbone`` is a model timm knows (a pretrained tag such as ``.lvd142m`` allowed)."""
    import timm

    if not timm.is_model(name):
        hint = did_you_mean(name.split(".")[0], timm.list_models("*dinov2*"))
        raise ConfigError(f"model.backbone: timm has no model {name!r} ({hint + ' ' if hint else ''}the DINOv2 "
                          "names are timm.list_models('*dinov2*'))")


def check_hub_repo(cfg: RunConfig, *, online: bool = True) -> None:
    """``hub.repo_id`` (when set) is a valid Hub repository id and, with ``online`` and a token, the
    Hub lets this token create or write to it (``depthpe.hub.repo.repo_access_problem``); raises ``ConfigError``."""
    from ..hub.repo import repo_access_problem, repo_id_problem

    hub = cfg.hub
    if not hub.repo_id:
        return
    problem = repo_id_problem(hub.repo_id) or (
        repo_access_problem(hub.repo_id, private=hub.private, timeout=hub.request_timeout) if online else None)
    if problem:
        raise ConfigError(f"hub.repo_id: {problem} (or set hub.repo_id=null to train without pushing)")


def _wandb_can_log() -> bool:
    """Whether W&B can start without asking for a login: offline/disabled mode, an API key in the
    environment, or a netrc entry for the W&B host (what `wandb login` writes)."""
    import netrc
    import os
    from urllib.parse import urlparse

    if os.environ.get("WANDB_MODE", "").lower() in ("offline", "disabled", "dryrun") or os.environ.get("WANDB_API_KEY"):
        return True
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
    try:
        return netrc.netrc().authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def _refuse_existing_run(cfg: RunConfig) -> None:
    """``ConfigError`` when a new run would start in an output_dir that holds a run, or the outputs of
    another depthpe command (``depthpe.files.output_folder``)."""
    from ..files.output_folder import MANIFEST, folder_owner

    out, remains = cfg.output_dir, run_remains(cfg.output_dir)
    owner = folder_owner(out)
    if owner is not None:
        raise ConfigError(f"output_dir {out} holds the outputs of {owner.get('command') or 'another depthpe command'} "
                          f"({MANIFEST}), not a training run: choose another output_dir, or pass --overwrite to "
                          "train into it anyway (their files are kept)")
    if remains:
        raise ConfigError(f"output_dir {out} already holds a run ({', '.join(remains)}): resume it with --resume latest, "
                          f"choose another output_dir, or pass --overwrite to move that run aside to {out}.old-TIMESTAMP "
                          "and start a new one")


def _resume_checkpoint(cfg: RunConfig, resume: str, warnings: list[str]) -> Path | None:
    """The checkpoint named by ``resume``; broken newer ones passed over are added to ``warnings``."""
    try:
        checkpoint = find_checkpoint(cfg.output_dir, "latest" if resume in RESUME_MODES else resume,
                                     warn=warnings.append)
    except FileNotFoundError as err:
        raise ConfigError(f"--resume {resume}: {err}") from None
    if checkpoint is None and resume == "latest":
        broken = f" ({len(warnings)} broken: {warnings[0]})" if warnings else ""
        raise ConfigError(f"--resume latest: no complete checkpoint in {cfg.output_dir}/checkpoints{broken} (start "
                          "without --resume, use --resume auto to resume only when a checkpoint exists, or fix output_dir)")
    return checkpoint


def preflight(cfg: RunConfig, resume: str | None = None, *, overwrite: bool = False,
              allow_changes: Sequence[str] = ()) -> Preflight:
    """Check ``cfg`` (and the checkpoint named by ``resume``: "latest", "auto" or a path) before a
    run builds anything; raises ``ConfigError``. ``overwrite``: a new run may start in an output_dir
    that holds one (it is moved aside by the run, not here); ``allow_changes``: keys of
    ``RESUME_FIXED_KEYS`` a resume may change. Reads files only; writes nothing."""
    _check_output_dir(cfg)
    if overwrite and resume:
        raise ConfigError(f"--overwrite starts a new run and cannot be combined with --resume {resume} (drop one of them)")
    check_allowed_changes(allow_changes)
    check_data_sources(cfg)
    _check_files(cfg)
    check_hub_repo(cfg, online=False)
    warnings: list[str] = []
    checkpoint = _resume_checkpoint(cfg, resume, warnings) if resume else None
    if checkpoint is None:
        if not overwrite:
            _refuse_existing_run(cfg)
        check_hub_repo(cfg)  # last: the only check that talks to the network
        return Preflight(warnings=warnings, run_id=new_run_id(), move_aside=overwrite)
    check_same_model(checkpoint, cfg)
    run_id = resumed_run_id(checkpoint, cfg.output_dir)
    changes = changed_settings(checkpoint, cfg, allow_changes)
    check_hub_repo(cfg)
    return Preflight(checkpoint, changes, warnings, run_id=run_id)
