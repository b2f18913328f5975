"""``StopRequest``: SIGTERM (pre-emption) ends training at the end of the current step, after a
checkpoint, instead of killing it mid-step."""

from __future__ import annotations

import signal
import threading

import torch

__all__ = ["StopRequest", "PREEMPTED_EXIT_CODE"]

PREEMPTED_EXIT_CODE = 143  # what a process killed by SIGTERM reports (128 + 15)


class StopRequest:
    """Records SIGTERM instead of dying; all processes agree on stopping.

    ``requested(accelerator)`` is True on every process as soon as one of them received SIGTERM (a
    sum-reduction, so ranks never diverge). ``restore()`` puts the previous handler back. Outside
    the main thread (no signal handlers there) it never requests a stop.
    """

    def __init__(self):
        self.flag = False
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum, frame):
        self.flag = True

    def requested(self, accelerator) -> bool:
        """Whether any process received SIGTERM (a collective call: every process calls it)."""
        flag = torch.tensor(float(self.flag), device=accelerator.device)
        return bool(accelerator.reduce(flag, reduction="sum").item() > 0)

    def restore(self) -> None:
        """Put the SIGTERM handler that was installed before back."""
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None
