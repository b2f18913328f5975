"""Settings of ``depthpe push``: ``PushConfig``, what is uploaded where and how patiently
(``pusher.HubPusher``'s retries, request timeout and deadline). Each default and help text is
written here once; the command's options are generated from it (``depthpe.config.options``).
Light module: no torch or huggingface_hub import.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Optional

from ..config.options import REQUIRED, check_required, option
from .repo import repo_id_problem
from .timeouts import DEFAULT_JOB_DEADLINE, DEFAULT_REQUEST_TIMEOUT

__all__ = ["PushConfig"]


def _repo_id(text: str) -> str:
    """argparse type: a Hub repository id (checked as training's preflight checks ``hub.repo_id``)."""
    problem = repo_id_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def _seconds_problem(value) -> str | None:
    """Why ``value`` is not a number of seconds > 0 (finite), or None."""
    try:
        ok = 0 < float(value) < math.inf
    except (TypeError, ValueError):
        ok = False
    return None if ok else f"expected a number of seconds > 0, got {value!r}"


def _seconds(text: str) -> float:
    """argparse type: a number of seconds > 0."""
    problem = _seconds_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return float(text)


@dataclass
class PushConfig:
    """``depthpe push``: the exported model (or run) folder ``dir`` to the Hub repository
    ``repo_id`` (created ``private`` if new), on branch ``revision`` (None = main), the new commit
    tagged ``tag``; eval: an evaluation summary.json (or its folder) for the card; license: the
    card's licence (None = the run's hub.license, else apache-2.0); demo_app: also write and push the
    demo's Space ``app.py`` (``depthpe.demo.space``); retries, retry_delay (s, doubled
    each time), timeout (s per request, not retried) and deadline (s for the whole upload)."""

    dir: str = option(REQUIRED, positional=True, help="exported model folder or run folder")
    repo_id: str = option(REQUIRED, metavar="ID", parse=_repo_id, help="Hub repository, e.g. user/depthpe-prope")
    private: bool = option(False, help="create the repository private (if it is new)")
    revision: Optional[str] = option(None, metavar="REV", help="branch to push to (created from main if missing; "
                                     "none: main)")
    tag: Optional[str] = option(None, metavar="TAG", help="also tag the new commit (e.g. v1.0)")
    eval: Optional[str] = option(None, metavar="PATH", help="summary.json (or output folder) of eval/evaluate.py "
                                 "to show on the card")
    license: Optional[str] = option(None, metavar="ID", help="licence of the weights on the card (none: the run's "
                                    "hub.license, else apache-2.0)")
    demo_app: bool = option(False, help="also write app.py, the demo as a Hugging Face Space (Gradio) app "
                            "loading this repository, into the folder and push it")
    retries: int = option(3, metavar="N", help="retries after a failure")
    retry_delay: float = option(5.0, metavar="S", help="first retry delay in seconds, doubled each time")
    timeout: float = option(DEFAULT_REQUEST_TIMEOUT, metavar="S", parse=_seconds, help="seconds a request may wait "
                            "for the Hub's answer; a timed-out request is not retried")
    deadline: float = option(DEFAULT_JOB_DEADLINE, metavar="S", parse=_seconds, help="seconds the whole upload "
                             "may take, retries included")

    def __post_init__(self) -> None:
        check_required(self)
        problems = [repo_id_problem(self.repo_id), *(f"--{name}: {p}" for name in ("timeout", "deadline")
                                                    if (p := _seconds_problem(getattr(self, name))))]
        if any(problems):
            raise ValueError(next(p for p in problems if p))
