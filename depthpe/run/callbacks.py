"""Hooks into the training loop: ``TrainingCallback`` (no-op methods to override) and ``Callbacks``,
the dispatcher ``depthpe.run.trainer.train(cfg, callbacks=[...])`` calls at each event.

Events, in the order a run meets them (every process calls its callbacks; act once with
``run.accelerator.is_main_process``): ``on_run_begin`` (before anything is built),
``on_restore_begin`` / ``on_restored`` (resumed runs), ``on_run_start``, then per optimizer step
``on_step_begin`` / ``on_step_end``, maybe ``on_validation``, maybe ``on_checkpoint_begin`` /
``on_checkpoint_saved``, and after a pre-emption checkpoint ``on_stop``; at the end
``on_checkpoint_begin`` / ``on_checkpoint_saved`` with ``final=True`` for ``final/``,
``on_validation`` of the final model, ``on_run_end``. A callback that still reads a checkpoint
folder (an upload in flight) says so in ``protects``: checkpoint rotation spares that folder.
The Hub pushes (``depthpe.run.pushes.HubPushes``) and the trackers' step scalars
(``depthpe.run.tracking.TrackerLogging``) are callbacks the trainer puts before the user's.
An exception raised by a callback stops the run as ``CallbackError`` naming the callback and event.
See docs/training.md ("Hooks").
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["TrainingCallback", "Callbacks", "CallbackError"]


class CallbackError(RuntimeError):
    """A training callback raised; the message names the callback, the event and the step."""


class TrainingCallback:
    """Base class of training hooks: every method does nothing; override those you need.
    ``run`` is the ``depthpe.run.trainer.Run`` (cfg, accelerator, model, optimizer, state with
    ``state.step`` = optimizer steps done, output_dir)."""

    def on_run_begin(self, cfg) -> None:
        """Before the run folder, model, optimizer and data are built (``cfg``: the ``RunConfig``)."""

    def on_restore_begin(self, checkpoint: Path) -> None:
        """Resumed runs: before ``checkpoint`` (a ``checkpoints/step_N`` folder) is loaded."""

    def on_restored(self, checkpoint: Path, state) -> None:
        """Resumed runs: ``checkpoint`` is loaded (model, optimizer, RNG states, ``state``: the
        ``TrainState``); the data loader is not built yet, so the RNG states are the saved ones."""

    def on_run_start(self, run) -> None:
        """Everything is built (and restored); ``run.state.step`` steps are done, the next is ``+ 1``."""

    def on_step_begin(self, run) -> None:
        """Before optimizer step ``run.state.step + 1``."""

    def on_step_end(self, run, result) -> None:
        """After optimizer step ``run.state.step`` and its logging; ``result``: the ``StepResult``
        (loss ``terms``, ``lr``, ``grad_norm``, ``images``, ``seconds``)."""

    def on_validation(self, run, summary: dict) -> None:
        """After a validation at ``run.state.step``; ``summary``: {dataset: {mode: {metric: value}}}
        as written to val_summary.json (``mode`` "loss" holds the loss terms)."""

    def on_checkpoint_begin(self, run, final: bool) -> None:
        """Before ``checkpoints/step_N`` (``final=False``) or ``final/`` (``final=True``) is written."""

    def on_checkpoint_saved(self, run, folder: Path, final: bool) -> None:
        """``folder`` (``checkpoints/step_N`` or ``final/``) is complete on disk, before its Hub push."""

    def on_stop(self, run, status: int) -> None:
        """Pre-emption: the checkpoint of step ``run.state.step`` is written and the process exits
        next with ``status`` (143 after SIGTERM, 130 after SIGINT)."""

    def on_run_end(self, run, final: Path) -> None:
        """Training is done; ``final``: the exported ``final/`` folder."""

    def protects(self, path: Path) -> bool:
        """Whether this callback still reads ``path`` (a ``checkpoints/step_N`` folder), so that
        checkpoint rotation must not delete it yet. Not an event: rotation asks it."""
        return False


EVENTS = tuple(name for name in vars(TrainingCallback) if name.startswith("on_"))


class Callbacks:
    """Calls an event's method on every callback, in list order; wraps an exception in
    ``CallbackError`` (``KeyboardInterrupt`` and ``SystemExit`` pass through)."""

    def __init__(self, callbacks=()):
        self.callbacks = list(callbacks or [])
        for cb in self.callbacks:
            if not isinstance(cb, TrainingCallback):
                raise TypeError(f"callbacks: {cb!r} is not a depthpe.run.callbacks.TrainingCallback; "
                                "subclass TrainingCallback and override the on_* methods you need")

    def __getattr__(self, event: str):
        if event not in EVENTS:
            raise AttributeError(event)
        return lambda *args, **kwargs: self.dispatch(event, *args, **kwargs)

    def protects(self, path: Path) -> bool:
        """Whether any callback still reads ``path`` (``TrainingCallback.protects``)."""
        return any(cb.protects(Path(path)) for cb in self.callbacks)

    def dispatch(self, event: str, *args, **kwargs) -> None:
        """``getattr(cb, event)(*args, **kwargs)`` for each callback."""
        for cb in self.callbacks:
            try:
                getattr(cb, event)(*args, **kwargs)
            except Exception as err:
                where = _step_of(args)
                raise CallbackError(f"training callback {type(cb).__name__}.{event} failed{where}: "
                                    f"{type(err).__name__}: {err}") from err


def _step_of(args) -> str:
    """" at step N" when the first argument is a run, else ""."""
    state = getattr(args[0], "state", None) if args else None
    return f" at step {state.step}" if state is not None else ""
