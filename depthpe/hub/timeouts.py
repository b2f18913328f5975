"""How long the Hub may keep a push waiting: the defaults (``DEFAULT_*``, written once here and
used by the run config and ``depthpe push``) and the bound on every request of a push.

huggingface_hub itself sets no timeout on its API calls, so a Hub that accepts the connection and
never answers would keep a request waiting forever. Requests made inside ``bounded_requests(s)``
(in that thread or task) wait at most ``s`` seconds to connect, to send a chunk or to receive the
next one, once ``install_request_timeouts()`` has hooked huggingface_hub's shared HTTP client;
requests made elsewhere keep huggingface_hub's own timeouts. ``timed_out(err)`` tells such a
failure from any other.
"""

from __future__ import annotations

import contextlib
import threading
from contextvars import ContextVar
from typing import Iterator

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT",
    "DEFAULT_JOB_DEADLINE",
    "DEFAULT_RETRIES",
    "DEFAULT_RETRY_DELAY",
    "MAX_RETRY_DELAY",
    "install_request_timeouts",
    "bounded_requests",
    "timed_out",
    "check_positive_or_none",
]

MAX_RETRY_DELAY = 300.0  # s, the longest back-off between two attempts of a push
DEFAULT_REQUEST_TIMEOUT = 60.0  # s a Hub request may wait to connect, send a chunk or get the next one
DEFAULT_JOB_DEADLINE = 1800.0  # s an upload job may take from its start (all attempts) before it is given up
DEFAULT_RETRIES = 5  # attempts after the first failed one
DEFAULT_RETRY_DELAY = 10.0  # s before the first retry (doubles each time, at most MAX_RETRY_DELAY)

_REQUEST_TIMEOUT: ContextVar[float | None] = ContextVar("depthpe_hub_request_timeout", default=None)
_HOOK_LOCK = threading.Lock()


def _bound_request(request) -> None:
    """httpx2 request hook: a request made inside ``bounded_requests(seconds)`` waits at most that
    many seconds to connect, to send each chunk and for each chunk of the answer; requests made
    elsewhere keep huggingface_hub's own timeouts."""
    seconds = _REQUEST_TIMEOUT.get()
    if seconds is None:
        return
    phases = request.extensions.get("timeout") or dict.fromkeys(("connect", "read", "write", "pool"))
    bounded = {phase: seconds if limit is None else min(limit, seconds) for phase, limit in phases.items()}
    request.extensions = {**request.extensions, "timeout": bounded}


def install_request_timeouts() -> None:
    """Once per process: make huggingface_hub's shared HTTP client run ``_bound_request`` before
    every request.

    huggingface_hub 2.x builds that client (``get_session``) with ``timeout=None`` and its API calls
    (``create_repo``, ``create_commit``, ``create_tag``, ...) take no timeout, so they wait forever on
    a Hub that never answers; only downloads pass ``HF_HUB_ETAG_TIMEOUT`` / ``HF_HUB_DOWNLOAD_TIMEOUT``.
    The bound goes in through its ``set_client_factory``, wrapping the factory already installed (a
    user's proxy or certificate settings stay)."""
    from huggingface_hub import set_client_factory
    from huggingface_hub.utils import _http

    with _HOOK_LOCK:
        previous = getattr(_http, "_GLOBAL_CLIENT_FACTORY", _http.default_client_factory)
        if getattr(previous, "bounds_pusher_requests", False):
            return

        def factory():
            """The installed factory's client, with ``_bound_request`` as its last request hook."""
            client = previous()
            hooks = client.event_hooks
            client.event_hooks = {**hooks, "request": [*hooks.get("request", []), _bound_request]}
            return client

        factory.bounds_pusher_requests = True
        set_client_factory(factory)


@contextlib.contextmanager
def bounded_requests(seconds: float | None) -> Iterator[None]:
    """Within the block (this thread or task only), every Hub request waits at most ``seconds`` to
    connect, to send a chunk and for each chunk of the answer (None = huggingface_hub's own
    timeouts); takes effect once ``install_request_timeouts()`` ran in the process."""
    token = _REQUEST_TIMEOUT.set(seconds)
    try:
        yield
    finally:
        _REQUEST_TIMEOUT.reset(token)


def timed_out(err: BaseException | None) -> bool:
    """True if ``err``, or an error it was raised from, is a request timeout."""
    import httpx2

    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, (httpx2.TimeoutException, TimeoutError)):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


def check_positive_or_none(**values: float | None) -> None:
    """Raise ``ValueError`` unless each value is None (no bound) or > 0."""
    for name, value in values.items():
        if value is not None and not value > 0:
            raise ValueError(f"{name} must be > 0 seconds (or None for no bound), got {value}")
