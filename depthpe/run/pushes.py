"""What training pushes to the Hugging Face Hub, and when (``hub.repo_id`` set in the run config).

``TrainingPushes`` is the training loop's side of the Hub: every ``hub.push_every``-th checkpoint and
the final model go to the repository (layout in ``depthpe.hub.repo``), each with a model card regenerated
from the run config and the latest validation. ``card_training`` turns a ``RunConfig`` into the plain
values a card shows (``depthpe.hub.card.TrainingSection``), for these pushes and for
``depthpe push``. ``HubPushes`` is the training callback that drives them (the trainer adds it to
every run; it does nothing without ``hub.repo_id``). The uploads themselves are
``depthpe.hub.pusher.HubPusher``'s.
"""

from __future__ import annotations

from pathlib import Path

from ..hub.pusher import HubPusher, PushHandle, log_to_stderr
from ..hub.repo import checkpoint_path_in_repo, known_token, step_tag
from ..hub.card import (
    CardInfo,
    TrainingSection,
    card_info_for_folder,
    init_weights_release,
    public_location,
    write_model_card,
)
from .callbacks import TrainingCallback
from .checkpoints import rotate_checkpoints
from .schema import RunConfig
from .tracking import get_run_logger
from .validation import validation_card_fields

__all__ = ["TrainingPushes", "HubPushes", "card_training"]


def card_training(cfg: RunConfig) -> TrainingSection:
    """What a model card says about the run ``cfg``: its training datasets (folder name, else source
    name), ``model.init_from``, the rows of the training table and the config as a dict."""
    data, optim, train, loss = cfg.data, cfg.optim, cfg.train, cfg.loss
    rows = []
    sources = [f"{s.dataset or s.name} ({s.split}, weight {s.weight:g})" for s in data.sources]
    if sources:
        rows.append(("training data", ", ".join(sources)))
    if cfg.model.init_from:
        rows.append(("initialised from", f"`{public_location(cfg.model.init_from)}`"))
    rows += [
        ("views per sample", f"{data.views[0]}-{data.views[1]}"),
        ("image width", f"{data.image_width} px, height/width in [{data.aspect[0]:g}, {data.aspect[1]:g}]"),
        ("images per batch (per process)", f"{data.max_images_per_batch}"),
        ("optimizer", f"AdamW, lr {optim.lr:g}, weight decay {optim.weight_decay:g}"),
        ("schedule", f"{optim.schedule}, {optim.warmup_steps} warm-up steps, min lr {optim.min_lr:g}"),
        ("optimizer steps", f"{train.steps}"),
        ("gradient accumulation", f"{train.grad_accum}"),
        ("mixed precision", train.mixed_precision),
        ("loss", f"L1 x {loss.l1_weight:g} + gradient x {loss.gradient_weight:g} ({loss.gradient_scales} scales)"
                 + (f" + correspondence x {loss.correspondence_weight:g}" if loss.correspondence_weight > 0 else "")),
        ("seed", f"{cfg.seed}"),
    ]
    return TrainingSection(datasets=tuple(str(s.dataset or s.name) for s in data.sources),
                           init_from=cfg.model.init_from, rows=tuple(rows), config=cfg.to_dict())


class TrainingPushes:
    """What the training loop calls (main process only) when ``cfg.hub.repo_id`` is set.

    cfg: the run's ``RunConfig``; hub settings come from ``cfg.hub``, the card's total steps from
    ``cfg.train.steps``, the checkpoint numbering from ``cfg.train.checkpoint_every`` and the licence
    of released initial weights from ``cfg.model.init_from`` (``init_weights_release``).
    output_dir: the run folder (named in the hint logged when an upload is given up);
    log: one-line logger (default: stderr); pusher_kwargs: passed to ``HubPusher`` (token, endpoint, api;
    request_timeout and job_deadline default to ``cfg.hub``'s). An upload given up at its deadline no longer protects its checkpoint.
    Validation summaries shown on the cards come from ``record_validation`` (kept in memory only:
    the trainer writes ``val_summary.json`` itself with ``write_val_summary``).
    """

    def __init__(self, cfg: RunConfig, output_dir: str | Path, *, log=None, **pusher_kwargs):
        hub = cfg.hub
        if not hub.repo_id:
            raise ValueError("TrainingPushes needs hub.repo_id")
        self.training, self.cfg, self.output_dir = card_training(cfg), hub, Path(output_dir)
        self.total_steps, self.checkpoint_every = cfg.train.steps, cfg.train.checkpoint_every
        self.init_weights = init_weights_release(cfg.model.init_from)
        self.log = log or log_to_stderr
        pusher_kwargs.setdefault(
            "give_up_hint", f"Training goes on; push the folder later with `depthpe push` (run folder {self.output_dir}).")
        pusher_kwargs.setdefault("request_timeout", hub.request_timeout)
        pusher_kwargs.setdefault("job_deadline", hub.job_deadline)
        self.pusher = HubPusher(hub.repo_id, private=hub.private, revision=hub.revision, retries=hub.retries,
                                retry_delay=hub.retry_delay, log=self.log, **pusher_kwargs)
        self._check_credentials("token" in pusher_kwargs)
        self.validation: dict | None = None

    def _check_credentials(self, token_given: bool) -> None:
        """Log one line when nothing will reach the Hub (offline mode) or no token is found."""
        from huggingface_hub import constants

        if constants.is_offline_mode():
            self.log(f"hub: HF_HUB_OFFLINE is set, so nothing can be pushed to {self.cfg.repo_id}; unset it "
                     "(training goes on; push later with `depthpe push`)")
        elif not token_given and known_token() is None:
            self.log("hub: no Hugging Face token found (set HF_TOKEN or run `hf auth login`); pushes to "
                     f"{self.cfg.repo_id} will probably fail, training goes on regardless")

    def is_pending(self, path: str | Path) -> bool:
        """For checkpoint rotation: True while an upload still reads ``path``."""
        return self.pusher.is_pending(path)

    def record_validation(self, step: int, summary: dict, *, scenes: int | None = None, views: int | None = None) -> None:
        """Remember the latest validation summary for the cards of later pushes (memory only)."""
        self.validation = {"step": int(step), "summary": summary, "max_scenes": scenes, "views": views}

    def _card(self, folder: Path, *, step: int, final: bool, revision: str | None) -> CardInfo:
        """The card of the exported model ``folder`` pushed at ``step`` (the latest validation on it)."""
        return card_info_for_folder(
            folder, repo_id=self.cfg.repo_id, revision=revision, training=self.training, step=step,
            total_steps=self.total_steps, final=final, license=self.cfg.license, init_weights=self.init_weights,
            **validation_card_fields(self.validation),
        )

    def after_checkpoint(self, checkpoint_dir: str | Path, step: int) -> PushHandle | None:
        """Push ``checkpoint_dir/model`` if this is every ``push_every``-th checkpoint (counted by
        ``step // checkpoint_every``). Writes the card into the folder first. Never raises."""
        number = step // max(1, self.checkpoint_every)
        if number % max(1, self.cfg.push_every):
            return None
        checkpoint_dir = Path(checkpoint_dir)
        tag = step_tag(step, self.cfg.revision)
        return self._push(checkpoint_dir / "model", step=step, final=False, tag=tag,
                          paths=(checkpoint_path_in_repo(step), ""), protect=checkpoint_dir)

    def after_final(self, final_dir: str | Path, step: int) -> PushHandle | None:
        """Push the final model to the repository root (tag of its step too). Never raises."""
        return self._push(Path(final_dir), step=step, final=True, tag=step_tag(step, self.cfg.revision),
                          paths=("",), protect=Path(final_dir))

    def _push(self, folder: Path, *, step: int, final: bool, tag: str, paths, protect: Path) -> PushHandle | None:
        """Write the card into ``folder`` and queue its upload to ``paths``; logs and returns None on error."""
        try:
            revision = self.cfg.revision if final else tag
            write_model_card(folder, self._card(folder, step=step, final=final, revision=revision))
            what = "final model" if final else f"checkpoint {step}"
            return self.pusher.push(folder, paths_in_repo=paths, tag=tag, protect=protect,
                                    message=f"depthpe: {what} (step {step})")
        except Exception as err:
            self.log(f"hub: could not queue the push of {folder}: {type(err).__name__}: {err}")
            return None

    def abandon(self) -> list[Path]:
        """Drop uploads not yet done (e.g. on pre-emption, before exiting); see ``HubPusher.abandon``."""
        left = self.pusher.abandon()
        if left:
            self.log(f"hub: abandoned {len(left)} upload(s) to {self.cfg.repo_id}: {[str(p) for p in left]}; "
                     "push them later with `depthpe push`")
        return left

    def finish(self, timeout: float | None = None) -> bool:
        """Wait for queued uploads (at most ``hub.wait_timeout`` s; then abandon them); log the
        outcome. Never raises."""
        timeout = self.cfg.wait_timeout if timeout is None else timeout
        waiting = self.pusher.pending()
        if waiting:
            self.log(f"hub: waiting up to {timeout:.0f} s for {len(waiting)} upload(s) to {self.cfg.repo_id}")
        if not self.pusher.wait(timeout):
            self.log(f"hub: uploads still running after {timeout:.0f} s are abandoned")
            self.abandon()
            return False
        failed = [r for r in self.pusher.results if not r.ok]
        if failed:
            self.log(f"hub: {len(failed)} of {len(self.pusher.results)} push(es) failed: "
                     f"{[r.description for r in failed]}")
        else:
            self.log(f"hub: all {len(self.pusher.results)} push(es) to {self.cfg.repo_id} succeeded")
        return not failed


class HubPushes(TrainingCallback):
    """The training callback of the Hub pushes (main process, ``hub.repo_id`` set; otherwise it
    does nothing): every ``hub.push_every``-th checkpoint once saved and rotated, the final model at
    the end of the run with the card of the final validation; it remembers each validation for the
    cards, drops queued uploads on pre-emption, spares checkpoints still being uploaded from
    rotation and, at the end, waits (at most ``hub.wait_timeout`` s) and rotates what it spared.
    ``pusher_kwargs``: passed to ``TrainingPushes`` (token, endpoint, api, timeouts)."""

    def __init__(self, **pusher_kwargs):
        self.pusher_kwargs, self.pushes = pusher_kwargs, None

    def on_run_start(self, run) -> None:
        if run.accelerator.is_main_process and run.cfg.hub.repo_id:
            self.pushes = TrainingPushes(run.cfg, run.output_dir, log=get_run_logger().info, **self.pusher_kwargs)

    def on_validation(self, run, summary: dict) -> None:
        if self.pushes is not None:
            self.pushes.record_validation(run.state.step, summary, scenes=run.cfg.val.max_scenes, views=run.cfg.val.views)

    def on_checkpoint_saved(self, run, folder: Path, final: bool) -> None:
        if self.pushes is not None and not final:
            self.pushes.after_checkpoint(folder, run.state.step)

    def on_stop(self, run, status: int) -> None:
        if self.pushes is not None:
            self.pushes.abandon()

    def on_run_end(self, run, final: Path) -> None:
        """Push ``final/``, wait for every upload (never raises), then rotate the spared checkpoints."""
        if self.pushes is None:
            return
        self.pushes.after_final(final, run.state.step)
        self.pushes.finish()
        rotate_checkpoints(run.output_dir, run.cfg.train.keep_checkpoints, protected=self.pushes.is_pending)

    def protects(self, path: Path) -> bool:
        return self.pushes is not None and self.pushes.is_pending(path)
