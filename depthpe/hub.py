"""Pushing exported models to the Hugging Face Hub in the background, with retries.

``HubPusher`` uploads the files of an exported model folder (``config.json``,
``model.safetensors``, ``README.md``, and ``training_inputs.json`` when present: the output of
training's export plus a model card) to a Hub repository. Jobs run in order in the background
through huggingface_hub's own executor (``HfApi.run_as_future``: one worker thread), so the caller
(the training loop) never waits on the network. A failed job is retried with exponential back-off
(``retry_delay``, doubled each time, at most ``MAX_RETRY_DELAY``), logged, and finally given up
without raising; authentication errors (HTTP 401/403) and offline mode are not retried. While a job
is queued or running, the folder it protects is reported by ``is_pending`` so that checkpoint
rotation leaves it alone.

Repository layout written by training (``TrainingPushes``)::

    <branch>:checkpoints/step_0000400/{config.json, model.safetensors, README.md, training_inputs.json}
    <branch>:{config.json, model.safetensors, README.md, training_inputs.json}   newest pushed model; the final one at the end
    tag step-0000400 (or <branch>-step-0000400)              the commit of that push: its root holds step 400

so ``DepthModel.from_pretrained("user/repo", revision="step-0000400")`` loads the checkpoint of
step 400 and ``DepthModel.from_pretrained("user/repo")`` the newest (finally the final) model.
One commit per push writes both places (``create_commit`` with one ``CommitOperationAdd`` per file
and place; ``upload_folder`` writes one prefix per commit). The Hub stores identical files once.

Tags move. When a push carries a tag that already exists (a resumed run re-pushing a step, or the
final model of a step that was also pushed as a checkpoint), the tag is moved to the new commit,
so that a tag always names the newest push of its step: the one ``checkpoints/step_N/`` on the
branch holds too. Nothing is lost, the earlier commit stays in the branch history.
``create_tag(..., exist_ok=True)`` is not used for this: it only swallows the 409 and leaves the tag
on the earlier commit; here a 409 deletes the tag and creates it again on the new commit.

The token comes from the usual Hugging Face sources (``HF_TOKEN``, ``hf auth login``) unless one is
passed; it is never printed or logged (error messages are scrubbed of it).

Every training run writes its latest validation summary to ``<output_dir>/val_summary.json``
(``write_val_summary``); ``depthpe push`` reads it back (``read_val_summary``) for the card.
"""

from __future__ import annotations

import concurrent.futures
import json
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .model.training_inputs import TRAINING_INPUTS_NAME
from .model_card import CARD_NAME, CardInfo, card_info_for_folder, init_weights_release, write_model_card

if TYPE_CHECKING:
    from .run.schema import RunConfig

__all__ = [
    "MODEL_FILES",
    "PushResult",
    "PushHandle",
    "HubPusher",
    "TrainingPushes",
    "step_tag",
    "checkpoint_path_in_repo",
    "resolve_model_folder",
    "validation_card_fields",
    "write_val_summary",
    "read_val_summary",
]

REQUIRED_FILES = ("config.json", "model.safetensors")
MODEL_FILES = (*REQUIRED_FILES, CARD_NAME, TRAINING_INPUTS_NAME)  # uploaded when present; the first two must be
MAX_RETRY_DELAY = 300.0
VAL_SUMMARY_NAME = "val_summary.json"  # training's latest validation summary, in the run folder


def step_tag(step: int, branch: str | None = None) -> str:
    """Tag of the push of optimizer step ``step``: ``step-0000400``, or ``<branch>-step-0000400`` when
    pushing to a branch other than main (tags are repository-wide; '/' in a branch becomes '-')."""
    base = f"step-{int(step):07d}"
    if branch and branch != "main":
        return f"{branch.replace('/', '-')}-{base}"
    return base


def checkpoint_path_in_repo(step: int) -> str:
    """Folder of a checkpoint inside the repository: ``checkpoints/step_0000400``."""
    return f"checkpoints/step_{int(step):07d}"


# ---------------------------------------------------------------------------------- val summary
def write_val_summary(output_dir: str | Path, step: int, summary: dict, *, scenes: int | None = None,
                      views: int | None = None) -> Path:
    """Write a run's latest validation (``EvalResult.summary`` at optimizer ``step``, ``scenes`` = at
    most that many scenes per dataset, ``views`` per scene) to ``output_dir/val_summary.json``
    atomically; returns its path. ``read_val_summary`` reads it back."""
    from .data.scene_file import atomic_write_bytes

    doc = {"step": int(step), "summary": summary, "max_scenes": scenes, "views": views}
    return atomic_write_bytes(Path(output_dir) / VAL_SUMMARY_NAME, json.dumps(doc, indent=1, default=float).encode())


def read_val_summary(run_dir: str | Path) -> dict | None:
    """The run's ``val_summary.json`` as written by ``write_val_summary`` ({"step", "summary",
    "max_scenes", "views"}), or None when the run has none. Raises ``ValueError`` if it is malformed."""
    path = Path(run_dir) / VAL_SUMMARY_NAME
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: unreadable ({err}); delete it or validate the run again") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("summary"), dict) or not isinstance(doc.get("step"), int):
        raise ValueError(f"{path}: not a validation summary (needs an integer 'step' and a 'summary' mapping)")
    return {"step": doc["step"], "summary": doc["summary"], "max_scenes": doc.get("max_scenes"),
            "views": doc.get("views")}


# ---------------------------------------------------------------------------------- the pusher
@dataclass
class PushResult:
    """Outcome of one push job. ``commit``: commit id on success; ``error``: last error (scrubbed)."""

    description: str
    ok: bool = False
    commit: str | None = None
    attempts: int = 0
    error: str | None = None


class PushHandle:
    """Returned by ``HubPusher.push``: ``done()``, ``wait(timeout) -> bool`` and ``result``."""

    def __init__(self, description: str):
        self.result = PushResult(description)
        self.future: concurrent.futures.Future | None = None

    def done(self) -> bool:
        """True once the job is over (success, given up or abandoned)."""
        return self.future is not None and self.future.done()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job is over; False if ``timeout`` s passed first."""
        concurrent.futures.wait([self.future], timeout)
        return self.future.done()


def _default_log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class _NoRetry(Exception):
    """An error that another attempt cannot fix (authentication, permissions, offline mode)."""


@dataclass
class _Job:
    folder: Path
    paths_in_repo: tuple[str, ...]
    tag: str | None
    message: str
    protect: Path
    handle: PushHandle
    tagged: bool = False


class HubPusher:
    """Background uploader of exported model folders to one Hub repository.

    repo_id: "user/name"; private: visibility if the repository has to be created; revision: branch
    to commit to (None = the default branch; created from main when missing); token: None = the usual
    Hugging Face sources; endpoint: Hub URL (None = ``HF_ENDPOINT`` / huggingface.co);
    retries: attempts after the first one; retry_delay: first back-off in seconds (doubles, capped at
    ``MAX_RETRY_DELAY``); log: callable taking one line (default: stderr); give_up_hint: sentence
    appended to the line logged when a job is given up (what the caller goes on doing, how to retry);
    api: an ``HfApi``-like object (tests), else ``HfApi(endpoint=endpoint, token=token)``.

    Jobs run on the api's ``run_as_future`` executor. Python waits for that executor's thread at
    exit, so call ``abandon()`` before exiting with uploads pending: queued jobs are cancelled and the
    running one makes no further attempt (only its request in flight is waited for).
    """

    def __init__(self, repo_id: str, *, private: bool = False, revision: str | None = None,
                 token: str | None = None, endpoint: str | None = None, retries: int = 5,
                 retry_delay: float = 10.0, log: Callable[[str], None] | None = None,
                 give_up_hint: str | None = None, api=None):
        if not repo_id or not isinstance(repo_id, str) or repo_id.count("/") > 1 or repo_id.strip("/") != repo_id:
            raise ValueError(f"repo_id must look like 'user/name' (or 'name'), got {repo_id!r}")
        if retries < 0 or retry_delay < 0:
            raise ValueError(f"retries and retry_delay must be >= 0, got {retries}, {retry_delay}")
        if api is None:
            from huggingface_hub import HfApi

            api = HfApi(endpoint=endpoint, token=token)
        self.api, self.repo_id, self.private, self.revision = api, repo_id, private, revision
        self.retries, self.retry_delay = int(retries), float(retry_delay)
        self.log, self.give_up_hint = log or _default_log, give_up_hint
        self._token = token
        self._lock = threading.Lock()
        self._pending: dict[Path, int] = {}
        self._futures: list[concurrent.futures.Future] = []
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
            self._futures = [f for f in self._futures if not f.done()]
            handle.future = self.api.run_as_future(self._run, job)
            self._futures.append(handle.future)
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
        with self._lock:
            futures = list(self._futures)
        _, not_done = concurrent.futures.wait(futures, timeout)
        return not not_done

    def abandon(self) -> list[Path]:
        """Give up on what is left: cancel queued jobs, stop the running one's retries (its request in
        flight still finishes) and refuse new jobs. Returns the folders that were still pending."""
        self._stop.set()
        left = self.pending()
        with self._lock:
            futures = list(self._futures)
        for future in futures:
            future.cancel()
        return left

    # ------------------------------------------------------------------ worker side
    def _run(self, job: _Job) -> None:
        """One job with retries, on the executor thread; never raises."""
        try:
            self._attempts(job)
        except BaseException as err:  # a bug here must not look like a hanging upload
            job.handle.result.error = self._scrub(err)
            self.log(f"hub: push of {job.handle.result.description} crashed: {job.handle.result.error}")
        finally:
            self._release(job)

    def _release(self, job: _Job, error: str | None = None) -> None:
        """Bookkeeping when a job is over: unprotect its folder, record its result."""
        with self._lock:
            n = self._pending.get(job.protect, 0) - 1
            if n > 0:
                self._pending[job.protect] = n
            else:
                self._pending.pop(job.protect, None)
            if error:
                job.handle.result.error = error
            self.results.append(job.handle.result)

    def _attempts(self, job: _Job) -> None:
        result = job.handle.result
        started = time.monotonic()
        for attempt in range(self.retries + 1):
            if self._stop.is_set():
                result.error = f"abandoned ({result.error})" if result.error else "abandoned"
                return
            result.attempts = attempt + 1
            try:
                self._push_once(job)
                result.ok, result.error = True, None
                self.log(f"hub: pushed {result.description} in {time.monotonic() - started:.1f} s "
                         f"(commit {result.commit[:10] if result.commit else '?'})")
                return
            except _NoRetry as err:
                result.error = str(err)
                break
            except Exception as err:
                result.error = self._scrub(err)
                if attempt < self.retries:
                    delay = min(self.retry_delay * 2 ** attempt, MAX_RETRY_DELAY)
                    self.log(f"hub: push of {result.description} failed (attempt {attempt + 1}/"
                             f"{self.retries + 1}): {result.error}; retrying in {delay:.1f} s")
                    if self._stop.wait(delay):
                        result.error = f"abandoned ({result.error})"
                        return
        hint = f" {self.give_up_hint}" if self.give_up_hint else ""
        self.log(f"hub: giving up on {result.description} after {result.attempts} attempt(s): {result.error}.{hint}")

    def _push_once(self, job: _Job) -> None:
        """Commit (once: a retry after a failed tag does not commit again), then tag."""
        result = job.handle.result
        try:
            if result.commit is None:
                result.commit = self._commit(job)
            if job.tag and not job.tagged:
                self._set_tag(job.tag, result.commit)
                job.tagged = True
        except Exception as err:
            reason = self._no_retry_reason(err)
            if reason:
                raise _NoRetry(reason) from None
            raise

    def _commit(self, job: _Job) -> str | None:
        from huggingface_hub import CommitOperationAdd

        if not self._repo_ready:
            self.api.create_repo(self.repo_id, private=self.private, exist_ok=True, repo_type="model")
            if self.revision and self.revision != "main":
                self.api.create_branch(self.repo_id, branch=self.revision, exist_ok=True)
            self._repo_ready = True
        names = [n for n in MODEL_FILES if (job.folder / n).is_file()]
        ops = [CommitOperationAdd(path_in_repo=f"{prefix}/{n}" if prefix else n, path_or_fileobj=str(job.folder / n))
               for prefix in job.paths_in_repo for n in names]
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
        for secret in {self._token, _known_token()} - {None, ""}:
            text = text.replace(secret, "***")
        return text


def _known_token() -> str | None:
    try:
        from huggingface_hub import get_token

        return get_token()
    except Exception:
        return None


# ---------------------------------------------------------------------------------- training glue
class TrainingPushes:
    """What the training loop calls (main process only) when ``cfg.hub.repo_id`` is set.

    cfg: the run's ``RunConfig``; hub settings come from ``cfg.hub``, the card's total steps from
    ``cfg.train.steps``, the checkpoint numbering from ``cfg.train.checkpoint_every`` and the licence
    of released initial weights from ``cfg.model.init_from`` (``init_weights_release``).
    output_dir: the run folder (named in the hint logged when an upload is given up);
    log: one-line logger (default: stderr); pusher_kwargs: passed to ``HubPusher`` (token, endpoint, api).
    Validation summaries shown on the cards come from ``record_validation`` (kept in memory only:
    the trainer writes ``val_summary.json`` itself with ``write_val_summary``).
    """

    def __init__(self, cfg: "RunConfig", output_dir: str | Path, *, log=None, **pusher_kwargs):
        hub = cfg.hub
        if not hub.repo_id:
            raise ValueError("TrainingPushes needs hub.repo_id")
        self.run_config, self.cfg, self.output_dir = cfg, hub, Path(output_dir)
        self.total_steps, self.checkpoint_every = cfg.train.steps, cfg.train.checkpoint_every
        self.init_weights = init_weights_release(cfg)
        self.log = log or _default_log
        pusher_kwargs.setdefault(
            "give_up_hint", f"Training goes on; push the folder later with `depthpe push` (run folder {self.output_dir}).")
        self.pusher = HubPusher(hub.repo_id, private=hub.private, revision=hub.revision, retries=hub.retries,
                                retry_delay=hub.retry_delay, log=self.log, **pusher_kwargs)
        self._check_credentials("token" in pusher_kwargs)
        self.validation: dict | None = None

    def _check_credentials(self, token_given: bool) -> None:
        from huggingface_hub import constants

        if constants.is_offline_mode():
            self.log(f"hub: HF_HUB_OFFLINE is set, so nothing can be pushed to {self.cfg.repo_id}; unset it "
                     "(training goes on; push later with `depthpe push`)")
        elif not token_given and _known_token() is None:
            self.log("hub: no Hugging Face token found (set HF_TOKEN or run `hf auth login`); pushes to "
                     f"{self.cfg.repo_id} will probably fail, training goes on regardless")

    def is_pending(self, path: str | Path) -> bool:
        """For checkpoint rotation: True while an upload still reads ``path``."""
        return self.pusher.is_pending(path)

    def record_validation(self, step: int, summary: dict, *, scenes: int | None = None, views: int | None = None) -> None:
        """Remember the latest validation summary for the cards of later pushes (memory only)."""
        self.validation = {"step": int(step), "summary": summary, "max_scenes": scenes, "views": views}

    def _card(self, folder: Path, *, step: int, final: bool, revision: str | None) -> CardInfo:
        return card_info_for_folder(
            folder, repo_id=self.cfg.repo_id, revision=revision, run_config=self.run_config, step=step,
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


def validation_card_fields(validation: dict | None) -> dict:
    """``CardInfo`` fields (eval_summary, eval_note) for a validation summary (``read_val_summary``)."""
    if not validation or not validation.get("summary"):
        return {}
    note = f"Validation at optimizer step {validation['step']}"
    details = []
    if validation.get("max_scenes"):
        details.append(f"at most {validation['max_scenes']} scenes per dataset")
    if validation.get("views"):
        details.append(f"{validation['views']} views per scene")
    if details:
        note += f" ({', '.join(details)})"
    return {"eval_summary": validation["summary"], "eval_note": note}


def resolve_model_folder(path: str | Path) -> tuple[Path, Path | None]:
    """(exported model folder, run folder or None) for an exported model folder, a checkpoint
    (``checkpoints/step_N`` or its ``model/``) or a run folder (its ``final/``)."""
    path = Path(path)

    def is_model(p: Path) -> bool:
        return all((p / n).is_file() for n in REQUIRED_FILES)

    if not path.is_dir():
        raise FileNotFoundError(f"{path} is not a folder")
    if is_model(path / "final"):
        return path / "final", path
    if is_model(path / "model"):
        path = path / "model"
    if not is_model(path):
        raise FileNotFoundError(
            f"{path} is neither an exported model (config.json + model.safetensors) nor a run folder with "
            "final/; pass runs/NAME, runs/NAME/final or runs/NAME/checkpoints/step_N"
        )
    for run in (path.parent, path.parent.parent.parent):
        if (run / "config.yaml").is_file():
            return path, run
    return path, None
