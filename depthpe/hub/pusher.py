"""Pushing exported models to the Hugging Face Hub in the background, with retries.

``HubPusher`` uploads the files of an exported model folder (``config.json``,
``model.safetensors``, ``README.md``, and ``training_inputs.json`` when present: the output of
training's export plus a model card, ``depthpe.hub.folders.MODEL_FILES``) to a Hub repository.
Jobs run in order in the background through huggingface_hub's own executor
(``HfApi.run_as_future``: one worker thread), so the caller (the training loop) never waits on the
network. A failed job is retried with exponential back-off (``retry_delay``, doubled each time, at
most ``MAX_RETRY_DELAY``; the loop is tenacity's ``Retrying``, retrying the whole job: repository,
commit and tag. huggingface_hub's own ``http_backoff`` retries one request, cannot be interrupted
while it waits and does not know the job's deadline), logged, and finally given up without raising; authentication errors
(HTTP 401/403) and offline mode are not retried. While a job is queued or running, the folder it
protects is reported by ``is_pending`` so that checkpoint rotation leaves it alone.

Nothing waits forever. Every request of a job gets ``request_timeout`` (seconds to connect, to send
a chunk or to receive the next one; ``depthpe.hub.timeouts``): a Hub that accepts the connection
and never answers fails the attempt like any error (retried with back-off). Every job gets
``job_deadline`` (seconds from its start, all attempts together): past it the job is given up and
logged, and its folder stops being pending so that rotation can delete it, even while its thread
is still stuck in a request (that request's late result is ignored).

One commit per push writes every place the push names (the repository layout of training's pushes
is in ``depthpe.hub.repo``; ``create_commit`` with one ``CommitOperationAdd`` per file and place;
``upload_folder`` writes one prefix per commit). The Hub stores identical files once.

Tags move. When a push carries a tag that already exists (a resumed run re-pushing a step, or the
final model of a step that was also pushed as a checkpoint), the tag is moved to the new commit,
so that a tag always names the newest push of its step: the one ``checkpoints/step_N/`` on the
branch holds too. Nothing is lost, the earlier commit stays in the branch history.
``create_tag(..., exist_ok=True)`` is not used for this: it only swallows the 409 and leaves the tag
on the earlier commit; here a 409 deletes the tag and creates it again on the new commit.

The token (``token``, else the usual Hugging Face sources) is never printed or logged: error
messages are scrubbed of it.

This module is a library of Hub operations: it knows nothing of runs or their configs (the run
layer, ``depthpe.run.pushes``, decides what to push when).
"""

from __future__ import annotations

import concurrent.futures
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from .folders import MODEL_FILES, REQUIRED_FILES
from .repo import known_token, repo_id_problem
from .timeouts import (
    DEFAULT_JOB_DEADLINE,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_RETRIES,
    DEFAULT_RETRY_DELAY,
    MAX_RETRY_DELAY,
    bounded_requests,
    check_positive_or_none,
    install_request_timeouts,
    timed_out,
)

__all__ = ["PushResult", "PushHandle", "HubPusher", "log_to_stderr"]


@dataclass
class PushResult:
    """Outcome of one push job. ``commit``: commit id on success; ``error``: last error (scrubbed);
    ``reason``: "timeout" when the last attempt failed because the Hub did not answer within the
    request timeout, "deadline" when the job was given up at its deadline, else None."""

    description: str
    ok: bool = False
    commit: str | None = None
    attempts: int = 0
    error: str | None = None
    reason: str | None = None


class PushHandle:
    """Returned by ``HubPusher.push``: ``done()``, ``wait(timeout) -> bool`` and ``result``.

    The job is over when it succeeded, was given up (retries spent, its deadline passed) or was
    abandoned; ``result`` is final from then on, even if a request stuck past the deadline comes
    back later."""

    def __init__(self, description: str):
        self.result = PushResult(description)
        self.future: concurrent.futures.Future | None = None
        self._over = threading.Event()

    def done(self) -> bool:
        """True once the job is over."""
        return self._over.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job is over; False if ``timeout`` s passed first."""
        return self._over.wait(timeout)


def log_to_stderr(message: str) -> None:
    """The default logger of pushes: one line to stderr, flushed."""
    print(message, file=sys.stderr, flush=True)


class _NoRetry(Exception):
    """An error that another attempt cannot fix (authentication, permissions, offline mode)."""


class _Stopped(Exception):
    """The job was stopped (``abandon``, its deadline) between two of its requests."""


@dataclass
class _Job:
    """One queued upload. ``progress`` is the worker's record (``handle.result`` until the job is
    given up at its deadline, when the handle gets a frozen copy); ``stop`` is set by ``abandon`` and
    by the deadline; ``clock`` is the deadline's timer, started when the job's turn comes."""

    folder: Path
    paths_in_repo: tuple[str, ...]
    tag: str | None
    message: str
    protect: Path
    handle: PushHandle
    tagged: bool = False
    stop: threading.Event = field(default_factory=threading.Event)
    clock: threading.Timer | None = None
    expired: bool = False
    released: bool = False
    progress: PushResult = field(init=False)

    def __post_init__(self):
        """The worker writes into the handle's result until ``_expire`` freezes a copy for the handle."""
        self.progress = self.handle.result


def _check_stop(job: _Job) -> None:
    """Raise ``_Stopped`` if the job was stopped: called before each of its requests but the first."""
    if job.stop.is_set():
        raise _Stopped()


class HubPusher:
    """Background uploader of exported model folders to one Hub repository.

    repo_id: "user/name"; private: visibility if the repository has to be created; revision: branch
    to commit to (None = the default branch; created from main when missing); token: None = the usual
    Hugging Face sources; endpoint: Hub URL (None = ``HF_ENDPOINT`` / huggingface.co);
    retries: attempts after the first one; retry_delay: first back-off in seconds (doubles, capped at
    ``MAX_RETRY_DELAY``); request_timeout: seconds any one request of a job may wait to connect, to
    send a chunk or for the next chunk of the answer before it fails (None = no bound);
    retry_timeouts: False = a timed-out request is not retried (the job fails at once);
    job_deadline: seconds a job may take, counted from when it starts running, before it is given
    up (None = no bound); log: callable taking one line (default: stderr); give_up_hint: sentence
    appended to the line logged when a job is given up (what the caller goes on doing, how to retry);
    api: an ``HfApi``-like object (tests), else ``HfApi(endpoint=endpoint, token=token)``.

    Jobs run on the api's ``run_as_future`` executor (one thread, in order). A job past its deadline
    is given up at once, even while its thread is stuck in a request (a thread cannot be killed): its
    folder stops being pending, its result stays failed and the thread makes no further request for
    it. While that thread stays stuck, the jobs queued behind it count their deadline from that moment.
    Python waits for the executor's thread at exit, so call ``abandon()`` before exiting with uploads
    pending: queued jobs are cancelled and the running one makes no further attempt (only its request
    in flight, bounded by ``request_timeout``, is waited for).
    """

    def __init__(self, repo_id: str, *, private: bool = False, revision: str | None = None,
                 token: str | None = None, endpoint: str | None = None, retries: int = DEFAULT_RETRIES,
                 retry_delay: float = DEFAULT_RETRY_DELAY, request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
                 retry_timeouts: bool = True, job_deadline: float | None = DEFAULT_JOB_DEADLINE,
                 log: Callable[[str], None] | None = None, give_up_hint: str | None = None, api=None):
        problem = repo_id_problem(repo_id)
        if problem:
            raise ValueError(problem)
        if retries < 0 or retry_delay < 0:
            raise ValueError(f"retries and retry_delay must be >= 0, got {retries}, {retry_delay}")
        check_positive_or_none(request_timeout=request_timeout, job_deadline=job_deadline)
        if api is None:
            from huggingface_hub import HfApi

            api = HfApi(endpoint=endpoint, token=token)
        if request_timeout is not None:
            install_request_timeouts()
        self.api, self.repo_id, self.private, self.revision = api, repo_id, private, revision
        self.retries, self.retry_delay = int(retries), float(retry_delay)
        self.request_timeout, self.retry_timeouts, self.job_deadline = request_timeout, retry_timeouts, job_deadline
        self.log, self.give_up_hint = log or log_to_stderr, give_up_hint
        self._token = token
        self._lock = threading.Lock()
        self._pending: dict[Path, int] = {}
        self._jobs: list[_Job] = []  # not over yet, in queue order
        self._running: _Job | None = None  # the job whose thread is in _run
        self._stop = threading.Event()
        self._repo_ready = False
        self.results: list[PushResult] = []

    # ------------------------------------------------------------------ public API
    def push(self, folder: str | Path, *, paths_in_repo: tuple[str, ...] | list[str] = ("",), tag: str | None = None,
             message: str | None = None, protect: str | Path | None = None) -> PushHandle:
        """Queue an upload of ``folder``'s ``MODEL_FILES`` (those present) to each of ``paths_in_repo``
        ("" = the root) in one commit, then point ``tag`` (if any) at that commit, moving it if it
        exists. ``protect``: a local folder reported by ``is_pending`` until the job is over (default:
        ``folder``). Returns at once. Raises ``FileNotFoundError`` now if ``folder`` lacks config.json
        or model.safetensors, ``RuntimeError`` after ``abandon()``."""
        folder = Path(folder)
        missing = [n for n in REQUIRED_FILES if not (folder / n).is_file()]
        if missing:
            raise FileNotFoundError(
                f"cannot push {folder}: missing {missing} (expected the output of DepthModel.save_pretrained)"
            )
        if self._stop.is_set():
            raise RuntimeError(f"the pusher to {self.repo_id} was abandoned; it takes no more uploads")
        paths = tuple(p.strip("/") for p in paths_in_repo)
        where = ", ".join(p or "<root>" for p in paths)
        handle = PushHandle(f"{folder} -> {self.repo_id}:{where}{f' (tag {tag})' if tag else ''}")
        job = _Job(folder, paths, tag, message or f"depthpe: upload {where}",
                   Path(protect if protect is not None else folder).resolve(), handle)
        with self._lock:
            self._pending[job.protect] = self._pending.get(job.protect, 0) + 1
            self._jobs.append(job)
            handle.future = self.api.run_as_future(self._run, job)
            if self._running is not None and self._running.expired:  # its turn comes now, see _expire
                self._start_clock(job)
        handle.future.add_done_callback(lambda f: f.cancelled() and self._release(job, "abandoned before it started"))
        return handle

    def is_pending(self, path: str | Path) -> bool:
        """True while a queued or running upload protects ``path`` (do not delete it)."""
        with self._lock:
            return Path(path).resolve() in self._pending

    def pending(self) -> list[Path]:
        """Folders protected by queued or running uploads."""
        with self._lock:
            return sorted(self._pending)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every queued job is over; False if ``timeout`` seconds passed first."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            handles = [job.handle for job in self._jobs]
        return all(h.wait(None if end is None else max(0.0, end - time.monotonic())) for h in handles)

    def abandon(self) -> list[Path]:
        """Give up on what is left: cancel queued jobs, stop the running one's retries (its request in
        flight still finishes) and refuse new jobs. Returns the folders that were still pending."""
        self._stop.set()
        left = self.pending()
        with self._lock:
            jobs = list(self._jobs)
        for job in jobs:
            job.stop.set()
            job.handle.future.cancel()
        return left

    # ------------------------------------------------------------------ worker side
    def _run(self, job: _Job) -> None:
        """One job with retries, on the executor thread; never raises. Its requests are bounded by
        ``request_timeout``; its deadline counts from now (unless its clock already runs)."""
        with bounded_requests(self.request_timeout):
            with self._lock:
                self._running = job
                self._start_clock(job)
            try:
                self._attempts(job)
            except BaseException as err:  # a bug here must not look like a hanging upload
                job.progress.error = self._scrub(err)
                self.log(f"hub: push of {job.progress.description} crashed: {job.progress.error}")
            finally:
                with self._lock:
                    self._running = None
                self._release(job)

    def _start_clock(self, job: _Job) -> None:
        """Start the job's deadline timer (``_expire``) unless it runs already; call with the lock held."""
        if self.job_deadline is None or job.clock is not None or job.released:
            return
        job.clock = threading.Timer(self.job_deadline, self._expire, (job,))
        job.clock.daemon = True
        job.clock.start()

    def _expire(self, job: _Job) -> None:
        """Deadline timer: give the job up now, whatever its thread is doing. Its handle gets a frozen,
        failed result and its folder is released, so a request that comes back later changes nothing.
        If its thread is stuck, the jobs queued behind it start their clocks now."""
        with self._lock:
            if job.released:
                return
            job.expired = True
            job.stop.set()
            queued = [j for j in self._jobs if j is not job] if self._running is job else []
            last = job.progress
            why = (f"not done within its deadline of {self.job_deadline:g} s"
                   if last.attempts else f"not started within its deadline of {self.job_deadline:g} s "
                                         "(the upload before it is stuck)")
            job.handle.result = replace(last, ok=False, reason="deadline",
                                        error=why + (f"; last error: {last.error}" if last.error else ""))
        self._log_give_up(job.handle.result)
        self._release(job)
        job.handle.future.cancel()  # a queued job never starts
        with self._lock:
            for other in queued:
                self._start_clock(other)

    def _release(self, job: _Job, error: str | None = None) -> None:
        """Bookkeeping when a job is over (once): unprotect its folder, record its result, wake waiters."""
        with self._lock:
            if job.released:
                return
            job.released = True
            if job.clock is not None:
                job.clock.cancel()
            n = self._pending.get(job.protect, 0) - 1
            if n > 0:
                self._pending[job.protect] = n
            else:
                self._pending.pop(job.protect, None)
            self._jobs.remove(job)
            if error:
                job.handle.result.error = error
            self.results.append(job.handle.result)
        job.handle._over.set()

    def _attempts(self, job: _Job) -> None:
        """Attempts with back-off until one succeeds, the retries are spent, an error cannot be retried
        or the job is stopped (``abandon``; its deadline: then ``_expire`` has given it up already).
        tenacity runs the loop: ``retries + 1`` attempts at most, waits of ``retry_delay`` x 2^k
        capped at ``MAX_RETRY_DELAY``, slept on ``job.stop`` so that abandoning or the deadline ends
        a wait at once."""
        from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

        result, started = job.progress, time.monotonic()
        retrying = Retrying(stop=stop_after_attempt(self.retries + 1), sleep=job.stop.wait, reraise=True,
                            wait=wait_exponential(multiplier=self.retry_delay, max=MAX_RETRY_DELAY),
                            retry=retry_if_exception(lambda err: self._retryable(err, result)),
                            before_sleep=lambda state: self.log(
                                f"hub: push of {result.description} failed (attempt {state.attempt_number}/"
                                f"{self.retries + 1}): {result.error}; retrying in {state.next_action.sleep:.1f} s"))
        try:
            for attempt in retrying:
                with attempt:
                    self._attempt(job, attempt.retry_state.attempt_number)
        except _NoRetry as err:
            result.error, result.reason = str(err), None
        except Exception:  # noqa: BLE001 - recorded by _attempt; stopped, or the retries are spent
            pass
        else:
            if not job.expired:
                result.ok, result.error, result.reason = True, None, None
                commit = result.commit[:10] if result.commit else "?"
                self.log(f"hub: pushed {result.description} in {time.monotonic() - started:.1f} s (commit {commit})")
                return
        if job.expired:
            self._log_late(job)
        elif job.stop.is_set():
            result.error = f"abandoned ({result.error})" if result.error else "abandoned"
        else:
            self._log_give_up(result)

    def _attempt(self, job: _Job, number: int) -> None:
        """Attempt ``number`` (from 1) of ``job``: raises ``_Stopped`` when the job was stopped, else
        what ``_push_once`` raised, its error recorded in the job's result."""
        _check_stop(job)
        job.progress.attempts = number
        try:
            self._push_once(job)
        except (_Stopped, _NoRetry):
            raise
        except Exception as err:
            self._record_failure(job.progress, err)
            raise

    def _retryable(self, err: BaseException, result: PushResult) -> bool:
        """Whether another attempt may follow the failed one: not after a stop or an error no attempt
        can fix, nor after a timed-out request when ``retry_timeouts`` is False."""
        if isinstance(err, (_Stopped, _NoRetry)):
            return False
        return not (result.reason == "timeout" and not self.retry_timeouts)

    def _record_failure(self, result: PushResult, err: Exception) -> None:
        """Store a failed attempt's error; a timed-out request gets ``reason`` "timeout" and says so."""
        result.error, result.reason = self._scrub(err), None
        if timed_out(err):
            limit = f"within {self.request_timeout:g} s" if self.request_timeout else "in time"
            result.error, result.reason = f"the Hub did not answer {limit} ({result.error})", "timeout"

    def _log_late(self, job: _Job) -> None:
        """After the deadline gave the job up: say if its stuck request had committed after all."""
        commit = job.progress.commit
        if commit:
            untagged = f" without its tag {job.tag}" if job.tag and not job.tagged else ""
            self.log(f"hub: the stuck upload {job.progress.description} came back after its deadline: commit "
                     f"{commit[:10]} reached the Hub{untagged}; the job stays given up")

    def _log_give_up(self, result: PushResult) -> None:
        """The one line logged when a job is given up (its error, then the caller's hint)."""
        hint = f" {self.give_up_hint}" if self.give_up_hint else ""
        tries = f" after {result.attempts} attempt(s)" if result.attempts else ""
        self.log(f"hub: giving up on {result.description}{tries}: {result.error}.{hint}")

    def _push_once(self, job: _Job) -> None:
        """Commit (once: a retry after a failed tag does not commit again), then tag. Raises
        ``_Stopped`` between two requests when the job was stopped."""
        result = job.progress
        try:
            if result.commit is None:
                result.commit = self._commit(job)
            if job.tag and not job.tagged:
                _check_stop(job)
                self._set_tag(job.tag, result.commit)
                job.tagged = True
        except Exception as err:
            reason = self._no_retry_reason(err)
            if reason:
                raise _NoRetry(reason) from None
            raise

    def _commit(self, job: _Job) -> str | None:
        """Create the repository (and branch) once, then one commit of the job's files; its oid."""
        from huggingface_hub import CommitOperationAdd

        if not self._repo_ready:
            self.api.create_repo(self.repo_id, private=self.private, exist_ok=True, repo_type="model")
            if self.revision and self.revision != "main":
                _check_stop(job)
                self.api.create_branch(self.repo_id, branch=self.revision, exist_ok=True)
            self._repo_ready = True
        names = [n for n in MODEL_FILES if (job.folder / n).is_file()]
        ops = [CommitOperationAdd(path_in_repo=f"{prefix}/{n}" if prefix else n, path_or_fileobj=str(job.folder / n))
               for prefix in job.paths_in_repo for n in names]
        _check_stop(job)
        info = self.api.create_commit(self.repo_id, ops, commit_message=job.message, revision=self.revision)
        return getattr(info, "oid", None)

    def _set_tag(self, tag: str, commit: str | None) -> None:
        """Point ``tag`` at ``commit``, moving it if it exists (see the module docstring)."""
        from huggingface_hub.errors import HfHubHTTPError

        revision = commit or self.revision
        try:
            self.api.create_tag(self.repo_id, tag=tag, revision=revision)
        except HfHubHTTPError as err:
            if getattr(err.response, "status_code", None) != 409:
                raise
            self.api.delete_tag(self.repo_id, tag=tag)
            self.api.create_tag(self.repo_id, tag=tag, revision=revision)

    def _no_retry_reason(self, err: Exception) -> str | None:
        """Why another attempt cannot help (offline mode, a refused token), or None."""
        if type(err).__name__ == "OfflineModeIsEnabled":
            return "HF_HUB_OFFLINE is set, so huggingface_hub makes no requests; unset it to push"
        status = getattr(getattr(err, "response", None), "status_code", None)
        if status in (401, 403):
            return (f"{self._scrub(err)} -- the Hub refused the token (HTTP {status}); use a token with write "
                    "access to the repository (HF_TOKEN or `hf auth login`)")
        return None

    def _scrub(self, err: BaseException) -> str:
        """One-line error description without the token."""
        text = f"{type(err).__name__}: {err}".replace("\n", " ")[:500]
        for secret in {self._token, known_token()} - {None, ""}:
            text = text.replace(secret, "***")
        return text
