"""``depthpe push DIR --repo-id ID``: upload an exported model (or a run's final model) to the Hub."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..config.options import add_options, config_from_args
from ..hub.push_config import PushConfig

DESCRIPTION = """\
Upload an exported depthpe model (config.json, model.safetensors, training_inputs.json when present,
a regenerated README.md model card, and with --demo-app an app.py that runs `depthpe demo` for the
repository as a Hugging Face Space) to the root of a Hugging Face Hub model repository,
creating the repository if needed.

DIR may be an exported model folder (runs/NAME/final, runs/NAME/checkpoints/step_N[/model]) or a
run folder (runs/NAME: its final/ is pushed). The card shows the run's training config
(runs/NAME/config.yaml; it must load as a run config, else the exit status is 2) and an evaluation
table: --eval (the summary.json or the --out folder of eval/evaluate.py), else the run's latest
validation (runs/NAME/val_summary.json). The card is also written into the local model folder
(README.md), so both copies agree.

The token comes from HF_TOKEN or `hf auth login`; it is never printed. HF_ENDPOINT selects another
Hub. A failed upload is retried with back-off; the exit status is 1 if it finally fails. Nothing
waits forever: a Hub that does not answer a request within --timeout seconds stops the command
(exit 1, not retried), and an upload still unfinished after --deadline seconds is given up (exit 1;
a request still in flight then may delay the exit by up to --timeout seconds)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``depthpe push``: the fields of ``PushConfig``, ``--config FILE`` and ``key=value``."""
    add_options(parser, PushConfig)


def _load_eval(path: str) -> tuple[dict, str]:
    """(summary, note) from an eval/evaluate.py summary.json or its output folder."""
    p = Path(path)
    if p.is_dir():
        p = p / "summary.json"
    if not p.is_file():
        raise FileNotFoundError(f"--eval {path}: no summary.json there (pass the --out folder of eval/evaluate.py)")
    doc = json.loads(p.read_text())
    if not isinstance(doc, dict) or not isinstance(doc.get("summary"), dict):
        raise ValueError(f"--eval {p}: not an eval/evaluate.py summary.json (no 'summary' mapping)")
    meta = doc.get("meta") or {}
    bits = [f"{k} {meta[k]}" for k in ("split", "views", "seed", "image_width") if meta.get(k) is not None]
    note = "Evaluation with eval/evaluate.py" + (f" ({', '.join(bits)})" if bits else "")
    return doc["summary"], note


def _run_config(run_dir: Path | None):
    """The run's ``RunConfig`` from ``run_dir/config.yaml`` (None without a run folder); raises
    ``ValueError`` with one line when the file does not load."""
    from ..config import ConfigError
    from ..run.loading import load_run_config

    if run_dir is None:
        return None
    path = run_dir / "config.yaml"
    try:
        return load_run_config(path)
    except (ConfigError, OSError) as err:
        reason = str(err).replace(f"{path}: ", "").replace("\n", " ")
        raise ValueError(f"{path} is not a loadable run config: {reason}") from None


def _card(cfg: PushConfig, folder: Path, run_dir: Path | None):
    """(CardInfo, step) for the pushed folder: run config, evaluation table, step and licence."""
    from ..config import ConfigError
    from ..hub.card import DEFAULT_LICENSE, card_info_for_folder, licence_problem
    from ..run.pushes import card_training
    from ..run.validation import read_val_summary, validation_card_fields

    run_config = _run_config(run_dir)
    fields: dict = {}
    if cfg.eval:
        fields["eval_summary"], fields["eval_note"] = _load_eval(cfg.eval)
    elif run_dir:
        fields = validation_card_fields(read_val_summary(run_dir))
    state = next((p / "trainer_state.json" for p in (folder, folder.parent) if (p / "trainer_state.json").is_file()), None)
    step = json.loads(state.read_text()).get("step") if state else None
    license = cfg.license or (run_config.hub.license if run_config else DEFAULT_LICENSE)
    if licence_problem(license):
        raise ConfigError(f"--license: {licence_problem(license)}")
    info = card_info_for_folder(folder, repo_id=cfg.repo_id, revision=cfg.tag or cfg.revision,
                                training=card_training(run_config) if run_config else None, step=step,
                                total_steps=run_config.train.steps if run_config else None,
                                final=folder.name == "final", license=license, **fields)
    return info, step


def _failure(cfg: PushConfig, folder: Path, result, endpoint: str | None) -> str:
    """The command's own line for a failed upload (``result``: the job's ``PushResult``)."""
    retry = "The local folder is unchanged but for its README.md; run the command again to retry"
    if result.reason == "timeout":
        return (f"depthpe push: {endpoint or 'the Hub'} did not answer within {cfg.timeout:g} s (--timeout), so "
                f"the upload of {folder} to {cfg.repo_id} stopped after {result.attempts} attempt(s). Check the "
                f"network and HF_ENDPOINT, or allow more time with --timeout. {retry}.")
    if result.reason == "deadline":
        return (f"depthpe push: the upload of {folder} to {cfg.repo_id} was given up, {result.error} (--deadline). "
                f"{retry}, with a larger --deadline on a slow connection.")
    return (f"depthpe push: upload of {folder} to {cfg.repo_id} failed after {result.attempts} attempt(s): "
            f"{result.error}. {retry}.")


def run(args: argparse.Namespace) -> int:
    """Write the card, push the folder; 0 on success, 1 when the upload finally fails, 2 on bad input."""
    from ..hub.folders import resolve_model_folder
    from ..hub.pusher import HubPusher
    from ..hub.card import write_model_card
    from ..model.depth_model import check_model_folder

    try:
        cfg = config_from_args(PushConfig, args)
        folder, run_dir = resolve_model_folder(cfg.dir)
        check_model_folder(folder)  # a model that cannot be loaded is not uploaded
        info, step = _card(cfg, folder, run_dir)
        write_model_card(folder, info)
        if cfg.demo_app:
            from ..demo.space import write_space_app

            write_space_app(folder, cfg.repo_id, cfg.tag or cfg.revision)
        pusher = HubPusher(cfg.repo_id, private=cfg.private, revision=cfg.revision, retries=cfg.retries,
                           retry_delay=cfg.retry_delay, request_timeout=cfg.timeout, retry_timeouts=False,
                           job_deadline=cfg.deadline, log=print)
    except (FileNotFoundError, ValueError) as err:
        print(f"depthpe push: {err}")
        return 2
    handle = pusher.push(folder, paths_in_repo=("",), tag=cfg.tag,
                         message=f"depthpe push: {folder.name}" + (f" (step {step})" if step is not None else ""))
    handle.wait()
    if not handle.result.ok:
        print(_failure(cfg, folder, handle.result, getattr(pusher.api, "endpoint", None)))
        return 1
    where = f" (branch {cfg.revision})" if cfg.revision else ""
    rev = cfg.tag or cfg.revision
    print(f"pushed {folder} to {cfg.repo_id}{where}; load with "
          f'DepthModel.from_pretrained("{cfg.repo_id}"{f", revision={rev!r}" if rev else ""})')
    return 0
