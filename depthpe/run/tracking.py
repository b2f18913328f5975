"""Logging and experiment trackers of a training run.

Messages go through Python ``logging`` (the ``depthpe`` logger, wrapped by Accelerate's
``get_logger`` so that only the main process speaks): to the console through ``tqdm.write`` (progress
bars stay intact) and to ``<output_dir>/train.log`` (appended to on resume). Scalars and depth
panels go to the trackers of ``train.report_to`` (Accelerate's TensorBoard and W&B trackers;
``wandb`` is an optional extra, ``pip install "depthpe[wandb]"``). ``TrackerLogging`` is the
training callback that starts the trackers and sends them each step's scalars (the trainer adds it to
every run); validation sends its own tables and panels (``depthpe.run.trainer``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from .callbacks import TrainingCallback

__all__ = ["LOG_FILE", "FILE_ONLY", "get_run_logger", "setup_logging", "close_logging", "error_line",
           "tracker_init_kwargs", "flat_hparams", "log_panels", "step_scalars", "TrackerLogging"]

LOG_FILE = "train.log"
_LOGGER = "depthpe.run"
# ``log.error(msg, extra={FILE_ONLY: True})`` goes to train.log only: for errors the command line
# prints itself (``error: ...`` on stderr), so the terminal shows them once.
FILE_ONLY = "depthpe_file_only"


def get_run_logger():
    """The run's logger: an Accelerate ``MultiProcessAdapter`` (main process only by default) whose
    messages carry a ``[RANK i]`` prefix only when the run has more than one process."""
    from accelerate.logging import MultiProcessAdapter
    from accelerate.state import PartialState

    class _RunLogger(MultiProcessAdapter):
        def process(self, msg, kwargs):
            msg, kwargs = logging.LoggerAdapter.process(self, msg, kwargs)  # without Accelerate's prefix
            kwargs.setdefault("stacklevel", 2)
            state = PartialState()
            if state.num_processes > 1:
                msg = f"[RANK {state.process_index}] {msg}"
            return msg, kwargs

    return _RunLogger(logging.getLogger(_LOGGER), {})


class _ConsoleHandler(logging.Handler):
    """Writes records with ``tqdm.write`` so that they do not break a progress bar."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm.auto import tqdm

        if not getattr(record, FILE_ONLY, False):
            tqdm.write(self.format(record))


def setup_logging(output_dir: Path | None) -> None:
    """Send the run logger to the console and, when ``output_dir`` is given, to ``output_dir/train.log``."""
    close_logging()
    logger = logging.getLogger(_LOGGER)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(_ConsoleHandler())
    if output_dir is not None:
        output_dir.mkdir(parents=True, exist_ok=True)
        file_handler = logging.FileHandler(output_dir / LOG_FILE, mode="a", encoding="utf-8")
        file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(file_handler)


def close_logging() -> None:
    """Detach (and close) every handler ``setup_logging`` added."""
    logger = logging.getLogger(_LOGGER)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()


def error_line(err: BaseException) -> str:
    """The error's own one-line message. An error raised in a DataLoader worker comes back with the
    worker's traceback in its text ("Caught X in DataLoader worker process 0. Original Traceback ...
    X: message"); its last line holds the message."""
    text = str(err).strip()
    if "Original Traceback" not in text:
        return text
    return text.splitlines()[-1].split(": ", 1)[-1]


def tracker_init_kwargs(output_dir: Path, resumed_step: int = 0) -> dict[str, dict]:
    """Per-tracker ``init_kwargs`` for ``Accelerator.init_trackers``: W&B writes into the run folder
    and names the run after it. A run resumed at ``resumed_step`` > 0 gives TensorBoard
    ``purge_step=resumed_step + 1``: the steps an interrupted run had logged after its last
    checkpoint are dropped when TensorBoard reads the logs, so no step is shown twice."""
    kwargs = {"wandb": {"dir": str(output_dir), "name": output_dir.name}}
    if resumed_step > 0:
        kwargs["tensorboard"] = {"purge_step": resumed_step + 1}
    return kwargs


def flat_hparams(config: dict) -> dict[str, Any]:
    """Scalar hyper-parameters of a run config dict (nested keys joined with '.'; data and val
    sections left out, other values as strings), as trackers take them."""
    from ..config import flatten_settings

    kept = flatten_settings({k: v for k, v in config.items() if k not in ("data", "val")})
    return {k: v if isinstance(v, (int, float, str, bool)) else str(v) for k, v in kept.items()}


def log_panels(trackers, panels: list[tuple[str, np.ndarray]], step: int, prefix: str = "val_panels") -> int:
    """Send depth panels ((name, uint8 HWC image)) to every tracker that takes images; returns how
    many trackers got them. TensorBoard takes a (N, H, W, C) batch, W&B a list of images."""
    sent = 0
    for tracker in trackers:
        if not hasattr(tracker, "log_images") or not panels:
            continue
        for name, panel in panels:
            if tracker.name == "tensorboard":
                tracker.log_images({f"{prefix}/{name}": panel[None]}, step=step, dataformats="NHWC")
            else:
                tracker.log_images({f"{prefix}/{name}": [panel]}, step=step)
        sent += 1
    return sent


def step_scalars(result, world_size: int) -> dict[str, float]:
    """The scalars of one optimizer step, by tracker name: ``loss/<term>``, ``lr``, ``grad_norm``,
    ``images_per_s`` (images of all ``world_size`` processes per second of this process's step)
    and ``data_time_fraction``. ``result``: the step's ``depthpe.run.step.StepResult``."""
    scalars = {f"loss/{k}": v for k, v in result.terms.items()}
    scalars.update({"lr": result.lr, "grad_norm": result.grad_norm,
                    "images_per_s": result.images * world_size / result.seconds,
                    "data_time_fraction": result.data_time / result.seconds})
    return scalars


class TrackerLogging(TrainingCallback):
    """The training callback of the trackers (``train.report_to``): starts them with the run's
    hyper-parameters (``flat_hparams``) and, every ``train.log_every`` steps and at the last, sends
    the step's scalars, their smoothed values (``smooth/...``, the run's ``Smoother``) and the
    counters (``counters/...``). Accelerate sends from the main process only."""

    def on_run_start(self, run) -> None:
        run.accelerator.init_trackers("train", config=flat_hparams(run.cfg.to_dict()),
                                      init_kwargs=tracker_init_kwargs(run.output_dir, run.state.step))

    def on_step_end(self, run, result) -> None:
        state, t = run.state, run.cfg.train
        if not run.accelerator.is_main_process or (state.step % t.log_every and state.step != t.steps):
            return
        logged = {f"smooth/{k}": v for k, v in state.smoother.get().items()}
        logged.update(step_scalars(result, run.accelerator.num_processes))
        logged.update({f"counters/{k}": v for k, v in state.counters.items()})
        run.accelerator.log(logged, step=state.step)
