"""What ``depthpe eval`` runs (``run_evaluation``): the config -> the model's input size and the
held-out set, resolved once (``heldout.held_out_of_config``) -> the partial results of ``--out``
(resume, or nothing to do) -> ``loop.evaluate`` -> the output files (``outputs.write_outputs``)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from ..config.camera_noise import noise_note
from ..config.inference import EvalConfig
from .heldout import HeldOutSet, held_out_of_config
from .loop import EvalOptions, EvalResult, evaluate
from .outputs import format_summary, write_outputs
from ..files.output_folder import OutputFolder, claim_output_folder
from .partial import PartialEvaluation, eval_fingerprint, settings_difference

__all__ = ["run_evaluation"]


def _report(result: EvalResult, cfg: EvalConfig) -> None:
    """Print the table (after a line naming the camera noise, if any), skipped scenes, scenes
    evaluated with fewer views than --views and the files written (main process)."""
    note = noise_note(cfg.camera_noise_entry().get("camera_noise"))
    if note:
        print(note)
    print(format_summary(result.summary))
    for failure in result.failures:
        print(f"skipped {failure['scene']}: {failure['error']}")
    short = result.short_scenes(cfg.views)
    if short:
        listed = ", ".join(f"{k} ({n})" for k, n in list(short.items())[:5]) + (", ..." if len(short) > 5 else "")
        print(f"warning: {len(short)} scene(s) have fewer frames than --views {cfg.views} and were evaluated "
              f"with all their frames: {listed}; the counts are in summary.json (views.per_scene) and the "
              "views column of metrics_per_image.csv")
    folders = "".join(name for name, written in (("panels/, ", result.panels), ("worst/, ", result.worst)) if written)
    print(f"wrote {cfg.out}/summary.json, metrics_per_image.csv, manifest.json, summary.md, {folders}"
          "report.html (open it in a browser)")


def run_evaluation(cfg: EvalConfig) -> EvalResult | None:
    """``depthpe eval``: evaluate ``cfg.model`` on ``cfg.data`` and write the outputs to ``cfg.out``
    (main process writes), owned through ``out_lock``. Resumes the partial evaluation of an interrupted run in ``cfg.out`` with
    the same settings (``partial``); returns None without evaluating when ``cfg.out`` already
    holds a complete evaluation with these settings (unless ``cfg.restart``). Errors (no or empty
    dataset, nothing evaluable, a partial evaluation with other settings) raise ``ConfigError``."""
    from accelerate import Accelerator

    held_out, warnings = held_out_of_config(cfg)
    accelerator = Accelerator(cpu=cfg.cpu)
    fingerprint = eval_fingerprint(cfg, held_out, accelerator.device.type)
    with out_lock(cfg.out, accelerator, replace=cfg.restart) as folder:
        partial = _open_partial(cfg, fingerprint, accelerator, folder)
        if partial is None:
            return None
        return _evaluate_into(cfg, held_out, warnings, accelerator, partial, fingerprint)


def _evaluate_into(cfg: EvalConfig, held_out: HeldOutSet, warnings: list[str], accelerator, partial,
                   fingerprint: dict) -> EvalResult:
    """Load the model, evaluate (resuming ``partial``), write the outputs (main process)."""
    from ..config import ConfigError
    from ..model import DepthModel

    try:
        model = DepthModel.from_pretrained(cfg.model, revision=cfg.revision).to(accelerator.device)
    except (OSError, ValueError) as err:  # e.g. a checkpoint rotated away since it was checked
        if accelerator.is_main_process and not partial.records() and partial.gt_medians() is None:
            partial.discard()  # nothing evaluated yet: a rerun with the model fixed starts afresh
        raise ConfigError(f"--model {cfg.model}: cannot load it ({str(err).splitlines()[0]}); if it is a "
                          "checkpoint of a running training, evaluate its final/ or a newer checkpoint") from None
    if accelerator.is_main_process:
        for line in warnings:
            print(line, flush=True)
        print(f"evaluating at {held_out.size.note}" + (", bf16 autocast" if cfg.dtype == "bf16" else ""), flush=True)
    options = EvalOptions(num_workers=cfg.num_workers, panels=cfg.panels, worst=cfg.worst, dtype=cfg.dtype,
                          camera_noise=cfg.camera_noise(), noise_seed=cfg.noise_seed)
    result = evaluate(model, held_out, options, accelerator=accelerator, partial=partial)
    if accelerator.is_main_process:
        write_outputs(result, cfg.out, meta=_meta(cfg, held_out, model, accelerator), fingerprint=fingerprint)
        partial.discard()
        _report(result, cfg)
    accelerator.wait_for_everyone()
    if not result.rows:
        raise ConfigError(f"no scene could be evaluated: all {len(result.failures)} were skipped (listed above)")
    return result


def _meta(cfg: EvalConfig, held_out: HeldOutSet, model, accelerator) -> dict:
    """The settings summary.json keeps (``meta``): what was evaluated, on what, how."""
    size = held_out.size
    return {"model": cfg.model, "revision": cfg.revision, "data": cfg.data, "split": cfg.split,
            "views": cfg.views, "seed": cfg.seed, "image_width": size.image_width, "aspect": size.aspect,
            "global_pe": model.config.global_pe, "processes": accelerator.num_processes, "dtype": cfg.dtype,
            "scale_reference": size.scale_reference, "min_valid_fraction": cfg.min_valid_fraction,
            **cfg.camera_noise_entry()}


@contextlib.contextmanager
def out_lock(out: str | Path, accelerator=None, command: str = "depthpe eval", *, replace: bool = False,
             replace_flag: str = "--restart", difference=None):
    """Own ``out`` through ``depthpe.files.output_folder.claim_output_folder`` in the main process while the
    block runs (its kernel lock, and the refusal of another command's outputs unless ``replace``);
    every process raises the same ``ConfigError`` (one line) when the main one is refused, so that
    two writers never share one folder. Yields the ``OutputFolder`` (None in the other processes).
    ``accelerator`` None: one process (``depthpe rmvd``); ``command``: the writer's name."""
    from ..config import ConfigError

    difference = difference or (lambda old, new: settings_difference(old, new))
    with contextlib.ExitStack() as stack:
        folder, problem = None, None
        if accelerator is None or accelerator.is_main_process:
            try:
                folder = stack.enter_context(claim_output_folder(out, command, replace=replace,
                                                                 replace_flag=replace_flag, difference=difference))
            except ConfigError as err:
                problem = str(err)
        if accelerator is not None and accelerator.num_processes > 1:
            from accelerate.utils import broadcast_object_list

            problem = broadcast_object_list([problem])[0]
        if problem:
            raise ConfigError(problem)
        yield folder


def _open_partial(cfg: EvalConfig, fingerprint: dict, accelerator,
                  folder: OutputFolder | None) -> PartialEvaluation | None:
    """The partial evaluation of ``cfg.out`` to continue (or a new one), after every process checked
    it; None when ``cfg.out`` holds a complete evaluation with these settings (said on the console).
    ``cfg.restart`` discards partial results; other settings than theirs raise ``ConfigError``."""
    from ..config import ConfigError

    partial = PartialEvaluation(cfg.out, accelerator.process_index)
    complete = not partial.exists() and _completed_fingerprint(cfg.out) == fingerprint
    if complete and not cfg.restart:
        if accelerator.is_main_process:
            print(f"{cfg.out} already holds a complete evaluation with these settings (summary.json); nothing to "
                  "do. Pass --restart to evaluate again.", flush=True)
        return None
    if partial.exists() and not cfg.restart:
        partial.check(fingerprint)
    elif not cfg.restart and _completed_fingerprint(cfg.out) not in (None, fingerprint):
        raise ConfigError(f"--out {cfg.out} holds a complete evaluation made with other settings: "
                          f"{settings_difference(_completed_fingerprint(cfg.out), fingerprint)}; choose another "
                          "--out, or pass --restart to replace it")
    accelerator.wait_for_everyone()  # every process has looked before the main one changes anything
    if accelerator.is_main_process:
        folder.begin(fingerprint)  # with --restart: this command's earlier files (panels/, worst/, ...) go
        if cfg.restart:
            partial.discard()
        if not partial.exists():
            partial.start(fingerprint)
    accelerator.wait_for_everyone()
    partial.use_settings(fingerprint)
    return partial


def _completed_fingerprint(out: str | Path) -> dict | None:
    """The settings fingerprint of the complete evaluation in ``out`` (summary.json), if any."""
    try:
        return json.loads((Path(out) / "summary.json").read_text()).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        return None
