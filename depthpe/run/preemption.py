"""``StopRequest``: SIGTERM (pre-emption, ``scancel``, a time limit) and SIGINT (Ctrl-C) end training
at the end of the current step, after a checkpoint, instead of killing it mid-step.

Schedulers send SIGTERM to every process of a job; the DataLoader workers leave it to the main
process (``depthpe.loader.workers``), so the main process is the one that decides. The exit status is
that of a process killed by the signal (143 for SIGTERM, 130 for SIGINT), which requeue-on-signal
scripts test for. A second Ctrl-C stops at once, without a checkpoint (``KeyboardInterrupt``).
"""

from __future__ import annotations

import os
import signal
import threading

import torch

__all__ = ["StopRequest", "PREEMPTED_EXIT_CODE", "INTERRUPTED_EXIT_CODE", "STOP_SIGNALS"]

PREEMPTED_EXIT_CODE = 143  # what a process killed by SIGTERM reports (128 + 15)
INTERRUPTED_EXIT_CODE = 130  # ... and one killed by SIGINT (128 + 2)
STOP_SIGNALS = {signal.SIGTERM: PREEMPTED_EXIT_CODE, signal.SIGINT: INTERRUPTED_EXIT_CODE}


class StopRequest:
    """Records SIGTERM and SIGINT instead of dying; all processes agree on stopping.

    ``requested(accelerator)`` is the exit status to stop with (143 when any process received
    SIGTERM, else 130 when any received SIGINT, else 0 = go on) and is the same on every process (a
    sum-reduction, so ranks never diverge). ``restore()`` puts the previous handlers back. Outside
    the main thread (no signal handlers there) it never requests a stop. Forked children (DataLoader
    workers) inherit the handlers until they set their own; there a signal changes nothing.
    """

    def __init__(self):
        self.received: set[int] = set()
        self._pid = os.getpid()
        self._previous = {}
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._handle) for sig in STOP_SIGNALS}

    def _handle(self, signum, frame):
        if os.getpid() != self._pid:  # a forked worker before its worker_init_fn ran
            return
        if signum == signal.SIGINT and signum in self.received:
            raise KeyboardInterrupt  # Ctrl-C twice: stop now
        self.received.add(signum)
        name = signal.Signals(signum).name
        then = " (Ctrl-C again stops at once, without one)" if signum == signal.SIGINT else ""
        os.write(2, f"\n{name} received: stopping after this step with a checkpoint{then}\n".encode())

    def requested(self, accelerator) -> int:
        """The exit status to stop with, or 0 when no process received a stop signal (a collective
        call: every process calls it)."""
        flags = torch.tensor([float(sig in self.received) for sig in STOP_SIGNALS], device=accelerator.device)
        anywhere = accelerator.reduce(flags, reduction="sum").tolist()
        return next((code for got, code in zip(anywhere, STOP_SIGNALS.values()) if got > 0), 0)

    def restore(self) -> None:
        """Put the handlers that were installed before back, for each signal whose handler is still
        this one's: a handler installed meanwhile (``depthpe train`` ignores SIGTERM once ``final/``
        is written) stays."""
        for sig, previous in self._previous.items():
            if signal.getsignal(sig) == self._handle:
                signal.signal(sig, previous)
        self._previous = {}
