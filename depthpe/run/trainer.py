"""The training loop: ``train(cfg)`` reads like a table of contents of a run.

``preflight`` checks the config before anything is built; ``start_run`` builds the Accelerator,
logging, model, optimizer, state and data; each iteration is ``run_step`` (one optimizer step),
``log_step``, maybe ``validate``, maybe ``checkpoint``; ``finish`` exports ``final/`` and validates it.
The trackers' step scalars and the Hub pushes are built-in callbacks (``TrackerLogging``,
``HubPushes``) that hear the same events as the user's. A resumed run (``--resume latest``) restores the model, optimizer, RNG
states and ``TrainState``; the learning rate is a pure function of the step and the sampler is
indexed by the step, so it continues exactly like an uninterrupted run (bit-for-bit on CPU in fp32).

Distributed runs (``accelerate launch --num_processes N``): every process trains on its slice of one
global batch of ``N * grad_accum * B`` samples per step and the loss is a mean of per-sample losses,
so N processes compute the update of one process with N-fold accumulation. The main process writes
the config, logs, checkpoints and the final model. See docs/training.md and docs/distributed.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from ..model.training_inputs import TrainingInputs
from .building import (apply_optim_settings, build_model, build_optimizer, compile_blocks, default_cpu_threads,
                       deepspeed_cpu_backend, fit_deepspeed_config, loader_options, view_counts)
from .callbacks import Callbacks, TrainingCallback
from .checkpoints import (STATE_FILE, NoSpaceError, find_checkpoint, publish_final, remove_incomplete,
                          rotate_checkpoints, save_checkpoint)
from .distributed import LOST_PEER_EXIT_CODE, check_world_size, lost_peer, process_group_kwargs
from .identity import RUN_FILE, move_run_aside, write_run_id
from .loading import save_run_config
from .lock import run_lock
from .preemption import STOP_SIGNALS, StopRequest
from .preflight import Preflight, preflight
from .schema import RunConfig
from .state import TrainState
from .step import StepResult, run_step
from .validation import (append_val_history, loss_terms_fn, read_val_manifest, trim_val_history,
                         val_manifest_file, write_val_summary)
from .pushes import HubPushes
from .tracking import (FILE_ONLY, TrackerLogging, close_logging, error_line, get_run_logger, log_panels, setup_logging,
                       step_scalars)

__all__ = ["Run", "train", "builtin_callbacks", "make_accelerator", "start_run", "log_step", "validate", "checkpoint",
           "finish"]

log = get_run_logger()


@dataclass
class Run:
    """Everything a running training holds: config, Accelerator, prepared model and optimizer,
    progress, batch iterator, progress bar, the training DataLoader (``loader.batch_sampler``: the
    step-indexed sampler) and the run's callbacks (the built-in ones first)."""

    cfg: RunConfig
    accelerator: object
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    state: TrainState
    batches: object
    bar: object
    loader: object = None
    callbacks: Callbacks = field(default_factory=Callbacks)

    @property
    def output_dir(self) -> Path:
        return Path(self.cfg.output_dir)

    @property
    def inputs(self) -> TrainingInputs:
        """The input shapes of this run, recorded next to every exported model."""
        data = self.cfg.data
        return TrainingInputs(data.image_width, tuple(data.aspect), tuple(data.views), data.scale_reference)


def _due(every: int, step: int, total: int) -> bool:
    """Whether a periodic action (every ``every`` steps, 0 = never) falls on ``step`` before the end."""
    return bool(every) and step % every == 0 and step < total


def builtin_callbacks() -> list[TrainingCallback]:
    """The callbacks every run has, before the user's: the trackers' step scalars, the Hub pushes."""
    return [TrackerLogging(), HubPushes()]


def train(cfg: RunConfig, *, resume: str | None = None, overwrite: bool = False, allow_config_change: tuple = (),
          callbacks: list[TrainingCallback] | None = None) -> Path:
    """Run training as configured; returns the exported final model folder. ``resume``: "latest",
    "auto" (latest if any) or a checkpoint folder; without it, an output_dir that holds a run is
    refused unless ``overwrite``, which moves that run aside to ``<output_dir>.old-TIMESTAMP``
    first. ``allow_config_change``: keys of ``resume_checks.RESUME_FIXED_KEYS`` the resume may
    change. ``callbacks``: ``TrainingCallback`` instances called at each event of the run
    (``depthpe.run.callbacks``; a raising callback stops the run with ``CallbackError``). Raises
    ``ConfigError`` before building anything when the config cannot run; exits with status 143
    after a checkpoint on SIGTERM (130 on SIGINT), and with status 1 and one line naming the
    checkpoint to resume from when another process of the run is gone. A full disk
    (``NoSpaceError``) or data without a usable sample (``NoUsableSampleError``) ends the progress
    bar and writes the error line to train.log before it is raised."""
    from depthpe.loader.datasets import NoUsableSampleError

    hooks = Callbacks([*builtin_callbacks(), *(callbacks or [])])
    checked = preflight(cfg, resume, overwrite=overwrite, allow_changes=tuple(allow_config_change))
    accelerator = make_accelerator(cfg)
    with run_lock(cfg.output_dir, accelerator) as took_over:
        stop = StopRequest()  # before the loader forks its workers: they inherit it until they ignore signals
        run = None
        try:
            run = start_run(cfg, checked, accelerator, notes=[took_over] if took_over else [], callbacks=hooks)
            while run.state.step < cfg.train.steps:
                hooks.on_step_begin(run)
                result = run_step(run.model, run.optimizer, run.batches, cfg, run.state, run.accelerator)
                log_step(run, result)
                hooks.on_step_end(run, result)
                if cfg.val.sources and _due(cfg.val.every, run.state.step, cfg.train.steps):
                    hooks.on_validation(run, validate(run))
                stop_status = stop.requested(run.accelerator)
                if stop_status or _due(cfg.train.checkpoint_every, run.state.step, cfg.train.steps):
                    checkpoint(run)
                if stop_status:
                    _exit_preempted(run, stop_status)
            return finish(run)
        except (NoSpaceError, NoUsableSampleError) as err:  # the command line prints it as `error: ...`
            _log_error_line(run, err)
            raise
        except Exception as err:
            if not lost_peer(err, accelerator.num_processes):
                raise
            _exit_lost_peer(cfg, accelerator, err)
        finally:
            stop.restore()
            close_logging()


def _log_error_line(run: Run | None, err: Exception) -> None:
    """Close the progress bar (so that the error starts a line of its own) and write ``error: ...``
    (``error_line``) to train.log only."""
    if run is not None:
        run.bar.close()
    log.error(f"error: {error_line(err)}", extra={FILE_ONLY: True})


def _prepare_output(cfg: RunConfig, checked: Preflight, accelerator) -> list[str]:
    """Main process: the earlier run moved aside (``--overwrite``), run folder, train.log,
    config.yaml, run.json, leftovers of interrupted saves removed. Returns the lines to log."""
    output_dir = Path(cfg.output_dir)
    moved = move_run_aside(output_dir) if checked.move_aside and accelerator.is_main_process else None
    setup_logging(output_dir if accelerator.is_main_process else None)
    lines = [f"--overwrite: moved the earlier run in {output_dir} aside to {moved}"] if moved else []
    if accelerator.is_main_process:
        save_run_config(cfg, output_dir / "config.yaml")
        write_run_id(output_dir, checked.run_id)
        lines += remove_incomplete(output_dir)
    t, world = cfg.train, accelerator.num_processes
    lines.append(f"run id {checked.run_id} ({'resumed' if checked.checkpoint else 'a new run'}; {RUN_FILE})")
    lines.append(f"world size {world} ({accelerator.distributed_type.value}, device {accelerator.device}, mixed "
                 f"precision {accelerator.mixed_precision}); global batch per step = {world} process(es) x "
                 f"{t.grad_accum} micro-batch(es) x floor({cfg.data.max_images_per_batch} / S) samples")
    return lines


def make_accelerator(cfg: RunConfig):
    """The run's Accelerator (trackers, precision, CPU threads), with every RNG seeded from ``cfg.seed``."""
    from accelerate import Accelerator
    from accelerate.utils import ProjectConfiguration, set_seed

    output_dir = Path(cfg.output_dir)
    accelerator = Accelerator(
        mixed_precision=cfg.train.mixed_precision, cpu=cfg.train.cpu, log_with=list(cfg.train.report_to) or None,
        project_config=ProjectConfiguration(project_dir=str(output_dir), logging_dir=str(output_dir / "logs")),
        kwargs_handlers=[process_group_kwargs(cfg.train.dist_timeout, backend=deepspeed_cpu_backend(cfg))],
    )
    check_world_size(accelerator.num_processes)
    set_seed(cfg.seed)
    if accelerator.device.type == "cpu":
        torch.set_num_threads(cfg.train.torch_threads
                              or default_cpu_threads(cfg.train.num_workers, accelerator.num_processes))
    return accelerator


def _restore(accelerator, checked: Preflight, state: TrainState, optimizer, cfg: RunConfig) -> None:
    """Load the checkpoint's Accelerate state and ``TrainState``, apply the config's optimizer
    settings over the restored ones; log what changed since."""
    accelerator.load_state(str(checked.checkpoint / "state"))
    apply_optim_settings(optimizer, cfg)
    doc = json.loads((checked.checkpoint / STATE_FILE).read_text())
    state.load_json(doc)
    log.info(f"resumed from {checked.checkpoint} at step {state.step}")
    if accelerator.is_main_process and trim_val_history(Path(cfg.output_dir), state.step):
        log.info(f"dropped validation lines after step {state.step} from val_history.jsonl (they will be redone)")
    for change in checked.changes:
        log.info(f"resuming with a changed setting: {change}")
    saved_world = doc.get("world_size", state.world_size)
    if saved_world != state.world_size:
        log.info(f"note: the checkpoint was written by {saved_world} process(es), this run has {state.world_size}: "
                 f"the global batch changes from {saved_world} to {state.world_size} x grad_accum x B per step")


def start_run(cfg: RunConfig, checked: Preflight, accelerator, notes: list[str] = (),
              callbacks: Callbacks | None = None) -> Run:
    """Build everything a run needs, in an order that makes runs reproducible from ``cfg.seed``;
    ``notes``: warnings to log once logging is set up; ``callbacks`` hear ``on_run_begin``, the
    restore events and ``on_run_start``."""
    from tqdm.auto import tqdm

    from depthpe.loader.loaders import build_train_loader

    from accelerate.utils import broadcast_object_list

    hooks = callbacks if callbacks is not None else Callbacks()
    hooks.on_run_begin(cfg)
    checked = replace(checked, run_id=broadcast_object_list([checked.run_id])[0])  # the main process's id
    for line in _prepare_output(cfg, checked, accelerator):
        log.info(line)
    for warning in [*notes, *checked.warnings]:
        log.warning(warning)
    accelerator.wait_for_everyone()
    with accelerator.main_process_first():  # init_from: the main process downloads, the others read the cache
        model = build_model(cfg, resuming=checked.checkpoint is not None)
    if cfg.train.compile:  # in place, before DDP/FSDP wrap it: state-dict keys stay the eager ones
        compiled = compile_blocks(model, view_counts=view_counts(cfg))
        log.info(f"train.compile: {compiled} aggregator blocks compiled with torch.compile "
                 "(the first steps, and each new batch shape, compile; later steps run compiled)")
    fit_deepspeed_config(accelerator, cfg)
    model, optimizer = accelerator.prepare(model, build_optimizer(model, cfg))
    state = TrainState(cfg.train.smoothing, world_size=accelerator.num_processes, run_id=checked.run_id)
    if checked.checkpoint is not None:
        hooks.on_restore_begin(checked.checkpoint)
        _restore(accelerator, checked, state, optimizer, cfg)
        hooks.on_restored(checked.checkpoint, state)
    loader = build_train_loader(cfg.data, seed=cfg.seed, rank=accelerator.process_index,
                                world_size=accelerator.num_processes, start_step=state.step, num_steps=cfg.train.steps,
                                **loader_options(cfg, accelerator.device))
    bar = tqdm(total=cfg.train.steps, initial=state.step, desc="train", unit="step",
               disable=not accelerator.is_main_process, dynamic_ncols=True)
    model.train()
    run = Run(cfg, accelerator, model, optimizer, state, iter(loader), bar, loader, hooks)
    hooks.on_run_start(run)
    return run


def log_step(run: Run, result: StepResult) -> None:
    """Progress bar (smoothed loss, lr, images per second) and newly met unusable files; the
    trackers get the step from ``TrackerLogging``."""
    state = run.state
    known = len(state.bad_files) - len(result.new_bad_files)
    for i, (_, reason) in enumerate(result.new_bad_files, start=1):
        log.info(f"step {state.step}: skipping unusable scene file ({known + i} so far): {reason}")
    smooth = state.smoother.update(step_scalars(result, run.accelerator.num_processes))
    run.bar.update(1)
    run.bar.set_postfix(loss=f"{smooth.get('loss/total', float('nan')):.4f}", lr=f"{result.lr:.2e}",
                        img_s=f"{smooth.get('images_per_s', 0):.1f}")


def validate(run: Run) -> dict | None:
    """Evaluate the model on ``val.sources`` (every process takes a share of the scenes) with the
    loss terms of training, on the scenes and views of the run's validation manifest once it exists;
    the main process logs the table, sends scalars and panels to the trackers, writes the manifest
    (first time), val_summary.json and a val_history.jsonl line per dataset. Returns the summary."""
    from ..evaluation.heldout import HeldOutProtocol, InputSize, ViewDraw, resolve_held_out
    from ..evaluation.loop import EvalOptions, evaluate
    from ..evaluation.outputs import format_summary

    cfg, step, accelerator = run.cfg, run.state.step, run.accelerator
    manifest = read_val_manifest(cfg)
    protocol = HeldOutProtocol(ViewDraw(cfg.val.views, cfg.val.seed, manifest), max_scenes=cfg.val.max_scenes,
                               selection=cfg.val.selection,
                               only_scenes=set(manifest) if manifest else None)
    size = InputSize(cfg.val.image_width or cfg.data.image_width, scale_reference=cfg.data.scale_reference)
    held_out = resolve_held_out(cfg.val.sources, protocol, size)
    options = EvalOptions(panels=cfg.val.panels, progress=False, loss_fn=loss_terms_fn(cfg.loss))
    result = evaluate(accelerator.unwrap_model(run.model), held_out, options, accelerator=accelerator)
    lift = (_correspondence_rows(run, held_out.with_manifest(result.manifest))
            if cfg.val.correspondence and result.manifest else None)
    if accelerator.is_main_process:
        _record_validation(run, result, first=manifest is None, extra_rows=lift)
        log.info(f"validation at step {step}:\n{format_summary(result.summary, ('abs_rel', 'delta1'))}")
    return result.summary


def _correspondence_rows(run: Run, held_out) -> dict:
    """``val.correspondence``: {dataset: {"correspondence": {metric: value}}}, the correspondence lift
    (``depthpe.probe``) on ``held_out``: the scenes and views validation just used. Every process
    probes all of them (so that sharded models run their forward everywhere); the main process records it."""
    from ..probe.runner import probe_attention

    found = probe_attention(run.accelerator.unwrap_model(run.model), held_out)
    return {name: {"correspondence": acc.scalars()} for name, acc in found.items()}


def _record_validation(run: Run, result, *, first: bool, extra_rows: dict | None = None) -> None:
    """Main process: trackers (metrics, loss terms, panels, ``extra_rows``), the manifest (first
    validation), val_summary.json, val_history.jsonl (with ``extra_rows``: {dataset: {row: {metric:
    value}}}) and the model card's latest table."""
    from ..evaluation.protocol import write_manifest

    cfg, step, accelerator = run.cfg, run.state.step, run.accelerator
    scalars = {f"val/{ds}/{mode}/{k}": v[k] for ds, modes in result.summary.items()
               for mode, v in modes.items() if mode != "loss" for k in ("abs_rel", "delta1") if k in v}
    scalars.update({f"val/{ds}/loss/{k}": v for ds, modes in result.summary.items()
                    for k, v in modes.get("loss", {}).items()})
    scalars.update({f"val/{ds}/{row}/{k}": v for ds, rows in (extra_rows or {}).items()
                    for row, values in rows.items() for k, v in values.items()})
    accelerator.log(scalars, step=step)
    log_panels(accelerator.trackers, result.panels, step)
    if first:
        write_manifest(val_manifest_file(cfg), result.manifest, seed=cfg.val.seed, views=cfg.val.views)
    write_val_summary(run.output_dir, step, result.summary, scenes=cfg.val.max_scenes, views=cfg.val.views)
    append_val_history(run.output_dir, step, result.summary, extra_rows)


def checkpoint(run: Run) -> Path:
    """Write ``checkpoints/step_N`` (every process takes part) and rotate old checkpoints, sparing
    those a callback still reads (``protects``: an upload in flight). Callbacks: ``on_checkpoint_begin`` / ``on_checkpoint_saved``."""
    run.callbacks.on_checkpoint_begin(run, final=False)
    folder = save_checkpoint(run.accelerator, run.model, run.output_dir, run.state.step, run.state.to_json(), run.inputs,
                             optimizer=run.optimizer)
    if run.accelerator.is_main_process:
        rotate_checkpoints(run.output_dir, run.cfg.train.keep_checkpoints,
                           protected=run.callbacks.protects)
    run.callbacks.on_checkpoint_saved(run, folder, final=False)
    return folder


def _exit_preempted(run: Run, status: int) -> None:
    """After the pre-emption checkpoint: ``on_stop`` (the Hub pushes drop queued uploads; one in
    flight finishes), exit with ``status`` (143 after SIGTERM, 130 after SIGINT)."""
    run.bar.close()
    run.callbacks.on_stop(run, status)
    name = {code: sig.name for sig, code in STOP_SIGNALS.items()}[status]
    log.info(f"{name} received: checkpoint written at step {run.state.step}; continue with --resume latest")
    run.accelerator.end_training()
    raise SystemExit(status)


def _exit_lost_peer(cfg: RunConfig, accelerator, err: BaseException) -> None:
    """Another process of the run is gone: one line naming the last complete checkpoint (nothing is
    written now: the collectives a checkpoint needs cannot complete), exit 1."""
    latest = find_checkpoint(cfg.output_dir, "latest")
    resume = (f"the last complete checkpoint is {latest}: start every process again with --resume latest"
              if latest is not None else "there is no complete checkpoint yet: start every process again")
    first_line = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
    log.error(f"error: process {accelerator.process_index} of {accelerator.num_processes} lost contact with the "
              f"others ({type(err).__name__}: {first_line}); {resume}")
    raise SystemExit(LOST_PEER_EXIT_CODE)


def finish(run: Run) -> Path:
    """Export ``final/`` first (a failing validation never costs the trained weights), validate it,
    report the counters. Returns the final folder. Callbacks: ``on_checkpoint_begin`` /
    ``on_checkpoint_saved`` (``final=True``), ``on_validation``, ``on_run_end`` (where the Hub
    pushes push ``final/`` and wait for their uploads)."""
    run.bar.close()
    state = run.state
    doc = {k: v for k, v in state.to_json().items() if k not in ("smoother", "nonfinite_in_row")}
    run.callbacks.on_checkpoint_begin(run, final=True)
    final = publish_final(run.accelerator, run.model, run.output_dir, doc, run.inputs)
    run.callbacks.on_checkpoint_saved(run, final, final=True)
    if run.cfg.val.sources:
        try:
            summary = validate(run)
        except Exception as err:  # the weights are safe in final/; report and go on
            log.error(f"final validation failed: {type(err).__name__}: {err}; the final model is in {final}")
        else:
            run.callbacks.on_validation(run, summary)
    c, bad = state.counters, state.bad_files
    log.info(f"training done: {state.step} steps on {state.world_size} process(es), {c['nonfinite_steps']} skipped "
             f"(non-finite loss or gradients), {c['redraws']} draws redrawn (degenerate or too little valid depth), "
             f"{c['skipped_files']} draws skipped from {c['bad_files']} unusable scene file(s)"
             f"{': ' + ', '.join(sorted(bad)[:10]) if bad else ''}; final model in {final}")
    run.accelerator.wait_for_everyone()
    run.accelerator.end_training()
    run.callbacks.on_run_end(run, final)
    return final
