"""Pushing exported models to the Hugging Face Hub in the background, with retries.

``HubPusher`` uploads the files of an exported model folder (``config.json``,
``model.safetensors``, ``README.md``: the output of ``DepthModel.save_pretrained`` plus a model
card) to a Hub repository. Jobs run in order on one daemon thread, so the caller (the training
loop) never waits on the network. A failed job is retried with exponential back-off
(``retry_delay``, doubled each time, at most ``MAX_RETRY_DELAY``), logged, and finally given up
without raising. While a job is queued or running, the folder it protects is reported by
``is_pending`` so that checkpoint rotation leaves it alone.

Repository layout written by training (``TrainingPushes``)::

    <branch>:checkpoints/step_0000400/{config.json, model.safetensors, README.md}
    <branch>:{config.json, model.safetensors, README.md}      newest pushed model; the final one at the end
    tag step-0000400 (or <branch>-step-0000400)              the commit of that push: its root holds step 400

so ``DepthModel.from_pretrained("user/repo", revision="step-0000400")`` loads the checkpoint of
step 400 and ``DepthModel.from_pretrained("user/repo")`` the newest (finally the final) model.
One commit per push writes both places (the Hub stores identical files once).

The token comes from the usual Hugging Face sources (``HF_TOKEN``, ``hf auth login``) unless one is
passed; it is never printed or logged (error messages are scrubbed of it).
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .model_card import CARD_NAME, CardInfo, card_info_for_folder, write_model_card

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
]

MODEL_FILES = ("config.json", "model.safetensors", CARD_NAME)
REQUIRED_FILES = ("config.json", "model.safetensors")
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
        self._event = threading.Event()

    def done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job finished (success or given up); False if ``timeout`` s passed first."""
        return self._event.wait(timeout)


def _default_log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class _NoRetry(Exception):
    """An error that another attempt cannot fix (authentication, permissions)."""


@dataclass
class _Job:
    folder: Path
    paths_in_repo: tuple[str, ...]
    tag: str | None
    message: str
    protect: Path | None
    handle: PushHandle


class HubPusher:
    """Background uploader of exported model folders to one Hub repository.

    repo_id: "user/name"; private: visibility if the repository has to be created; revision: branch
    to commit to (None = the default branch; created from main when missing); token: None = the usual
    Hugging Face sources; endpoint: Hub URL (None = ``HF_ENDPOINT`` / huggingface.co);
    retries: attempts after the first one; retry_delay: first back-off in seconds (doubles, capped at
    ``MAX_RETRY_DELAY``); log: callable taking one line (default: stderr); api: an ``HfApi``-like
    object (tests), else ``HfApi(endpoint=endpoint, token=token)``.
    """

    def __init__(self, repo_id: str, *, private: bool = False, revision: str | None = None,
                 token: str | None = None, endpoint: str | None = None, retries: int = 5,
                 retry_delay: float = 10.0, log: Callable[[str], None] | None = None, api=None):
        if not repo_id or not isinstance(repo_id, str) or repo_id.count("/") > 1 or repo_id.strip("/") != repo_id:
            raise ValueError(f"repo_id must look like 'user/name' (or 'name'), got {repo_id!r}")
        if retries < 0 or retry_delay < 0:
            raise ValueError(f"retries and retry_delay must be >= 0, got {retries}, {retry_delay}")
        if api is None:
            from huggingface_hub import HfApi

            api = HfApi(endpoint=endpoint, token=token)
        self.api, self.repo_id, self.private, self.revision = api, repo_id, private, revision
        self.retries, self.retry_delay = int(retries), float(retry_delay)
        self.log = log or _default_log
        self._token = token
        self._queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._unfinished = 0
        self._pending: dict[Path, int] = {}
        self._repo_ready = False
        self._thread: threading.Thread | None = None
        self.results: list[PushResult] = []

    # ------------------------------------------------------------------ public API
    def push(self, folder: str | Path, *, paths_in_repo: tuple[str, ...] | list[str] = ("",), tag: str | None = None,
             message: str | None = None, protect: str | Path | None = None) -> PushHandle:
        """Queue an upload of ``folder``'s ``MODEL_FILES`` to each of ``paths_in_repo`` ("" = the root)
        in one commit, then point ``tag`` (if any) at that commit. ``protect``: a local folder reported
        by ``is_pending`` until the job is over (default: ``folder``). Returns at once.
        Raises ``FileNotFoundError`` now if ``folder`` lacks config.json or model.safetensors."""
        folder = Path(folder)
        missing = [n for n in REQUIRED_FILES if not (folder / n).is_file()]
        if missing:
            raise FileNotFoundError(
                f"cannot push {folder}: missing {missing} (expected the output of DepthModel.save_pretrained)"
            )
        paths = tuple(p.strip("/") for p in paths_in_repo)
        where = ", ".join(p or "<root>" for p in paths)
        handle = PushHandle(f"{folder} -> {self.repo_id}:{where}{f' (tag {tag})' if tag else ''}")
        guard = Path(protect if protect is not None else folder).resolve()
        with self._lock:
            self._pending[guard] = self._pending.get(guard, 0) + 1
            self._unfinished += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._worker, name="depthpe-hub-push", daemon=True)
                self._thread.start()
        self._queue.put(_Job(folder, paths, tag, message or f"depthpe: upload {where}", guard, handle))
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
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._unfinished:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._idle.wait(left)
        return True

    # ------------------------------------------------------------------ worker
    def _worker(self) -> None:
        while True:
            job: _Job = self._queue.get()
            try:
                self._run(job)
            except BaseException as err:  # never let the thread die silently
                job.handle.result.error = self._scrub(err)
                self.log(f"hub: push of {job.handle.result.description} crashed: {job.handle.result.error}")
            finally:
                with self._idle:
                    n = self._pending.get(job.protect, 0) - 1
                    if n > 0:
                        self._pending[job.protect] = n
                    else:
                        self._pending.pop(job.protect, None)
                    self._unfinished -= 1
                    self.results.append(job.handle.result)
                    job.handle._event.set()
                    self._idle.notify_all()

    def _run(self, job: _Job) -> None:
        result = job.handle.result
        started = time.monotonic()
        for attempt in range(self.retries + 1):
            result.attempts = attempt + 1
            try:
                result.commit = self._push_once(job)
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
                    time.sleep(delay)
        self.log(f"hub: giving up on {result.description} after {result.attempts} attempt(s): {result.error}. "
                 "Training goes on; push the folder later with `depthpe push`.")

    def _push_once(self, job: _Job) -> str | None:
        from huggingface_hub import CommitOperationAdd

        try:
            if not self._repo_ready:
                self.api.create_repo(self.repo_id, private=self.private, exist_ok=True, repo_type="model")
                if self.revision and self.revision != "main":
                    self.api.create_branch(self.repo_id, branch=self.revision, exist_ok=True)
                self._repo_ready = True
            names = [n for n in MODEL_FILES if (job.folder / n).is_file()]
            ops = [CommitOperationAdd(path_in_repo=f"{prefix}/{n}" if prefix else n, path_or_fileobj=str(job.folder / n))
                   for prefix in job.paths_in_repo for n in names]
            info = self.api.create_commit(self.repo_id, ops, commit_message=job.message, revision=self.revision)
            commit = getattr(info, "oid", None)
            if job.tag:
                self._set_tag(job.tag, commit)
            return commit
        except Exception as err:
            if type(err).__name__ == "OfflineModeIsEnabled":
                raise _NoRetry("HF_HUB_OFFLINE is set, so huggingface_hub makes no requests; unset it to push") from None
            status = getattr(getattr(err, "response", None), "status_code", None)
            if status in (401, 403):
                raise _NoRetry(
                    f"{self._scrub(err)} -- the Hub refused the token (HTTP {status}); use a token with write "
                    "access to the repository (HF_TOKEN or `hf auth login`)"
                ) from None
            raise

    def _set_tag(self, tag: str, commit: str | None) -> None:
        """Point ``tag`` at ``commit`` (moving it if it already exists, e.g. after a resume)."""
        from huggingface_hub.errors import HfHubHTTPError

        try:
            self.api.create_tag(self.repo_id, tag=tag, revision=commit or self.revision)
        except HfHubHTTPError as err:
            if getattr(err.response, "status_code", None) != 409:
                raise
            self.api.delete_tag(self.repo_id, tag=tag)
            self.api.create_tag(self.repo_id, tag=tag, revision=commit or self.revision)

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
    """What the training loop calls (main process only) when ``hub.repo_id`` is set.

    hub_cfg: the run's ``HubConfig``; run_config: resolved config dict (for the card);
    total_steps / checkpoint_every: from ``train``; output_dir: the run folder (the latest validation
    summary is kept in ``output_dir/val_summary.json``); init_weights: Hub id of released weights the
    model started from (``depthpe.model_card.INIT_WEIGHTS``) for the card's licence; log: one-line logger.
    """

    def __init__(self, hub_cfg, run_config: dict, *, total_steps: int, checkpoint_every: int,
                 output_dir: str | Path, init_weights: str | None = None, log=None, **pusher_kwargs):
        self.cfg, self.run_config = hub_cfg, run_config
        self.total_steps, self.checkpoint_every = total_steps, checkpoint_every
        self.output_dir, self.init_weights = Path(output_dir), init_weights
        self.log = log or _default_log
        self.pusher = HubPusher(hub_cfg.repo_id, private=hub_cfg.private, revision=hub_cfg.revision,
                                retries=hub_cfg.retries, retry_delay=hub_cfg.retry_delay, log=self.log,
                                **pusher_kwargs)
        from huggingface_hub import constants

        if constants.is_offline_mode():
            self.log(f"hub: HF_HUB_OFFLINE is set, so nothing can be pushed to {hub_cfg.repo_id}; unset it "
                     "(training goes on; push later with `depthpe push`)")
        elif _known_token() is None and "token" not in pusher_kwargs:
            self.log("hub: no Hugging Face token found (set HF_TOKEN or run `hf auth login`); pushes to "
                     f"{hub_cfg.repo_id} will probably fail, training goes on regardless")
        self.validation: dict | None = None

    def is_pending(self, path: str | Path) -> bool:
        """For checkpoint rotation: True while an upload still reads ``path``."""
        return self.pusher.is_pending(path)

    def record_validation(self, step: int, summary: dict, *, scenes: int | None = None, views: int | None = None) -> None:
        """Remember the latest validation summary (shown on later cards) and save it to the run folder."""
        self.validation = {"step": int(step), "summary": summary, "max_scenes": scenes, "views": views}
        try:
            path = self.output_dir / VAL_SUMMARY_NAME
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(json.dumps(self.validation, indent=1, default=float))
            tmp.replace(path)
        except OSError as err:
            self.log(f"hub: could not save {VAL_SUMMARY_NAME}: {err}")

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

    def finish(self, timeout: float | None = None) -> bool:
        """Wait for queued uploads (at most ``hub.wait_timeout`` s); log the outcome. Never raises."""
        timeout = self.cfg.wait_timeout if timeout is None else timeout
        waiting = self.pusher.pending()
        if waiting:
            self.log(f"hub: waiting up to {timeout:.0f} s for {len(waiting)} upload(s) to {self.cfg.repo_id}")
        done = self.pusher.wait(timeout)
        failed = [r for r in self.pusher.results if not r.ok]
        if not done:
            self.log(f"hub: uploads still running after {timeout:.0f} s were abandoned: "
                     f"{[str(p) for p in self.pusher.pending()]}; push them later with `depthpe push`")
        elif failed:
            self.log(f"hub: {len(failed)} of {len(self.pusher.results)} push(es) failed: "
                     f"{[r.description for r in failed]}")
        else:
            self.log(f"hub: all {len(self.pusher.results)} push(es) to {self.cfg.repo_id} succeeded")
        return done and not failed


def validation_card_fields(validation: dict | None) -> dict:
    """``CardInfo`` fields (eval_summary, eval_note) for a stored validation summary."""
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
