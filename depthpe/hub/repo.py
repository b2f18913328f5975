"""The repository side of a push: which ids can name a Hub model repository, whether the Hub lets
this token write to one, the token itself, and where training's pushes go inside a repository.

Repository layout written by training (``depthpe.run.pushes.TrainingPushes`` queues the pushes,
``depthpe.hub.pusher.HubPusher`` uploads them, one commit per push)::

    <branch>:checkpoints/step_0000400/{config.json, model.safetensors, README.md, training_inputs.json}
    <branch>:{config.json, model.safetensors, README.md, training_inputs.json}   newest pushed model; the final one at the end
    tag step-0000400 (or <branch>-step-0000400)              the commit of that push: its root holds step 400

so ``DepthModel.from_pretrained("user/repo", revision="step-0000400")`` loads the checkpoint of
step 400 and ``DepthModel.from_pretrained("user/repo")`` the newest (finally the final) model.

The token comes from the usual Hugging Face sources (``HF_TOKEN``, ``hf auth login``) unless one is
passed; it is never printed or logged (error messages are scrubbed of it).
"""

from __future__ import annotations

from .timeouts import DEFAULT_REQUEST_TIMEOUT, bounded_requests, install_request_timeouts

__all__ = ["step_tag", "checkpoint_path_in_repo", "repo_id_problem", "repo_access_problem", "known_token"]


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


def repo_id_problem(repo_id) -> str | None:
    """Why ``repo_id`` cannot name a Hub model repository (huggingface_hub's own ``validate_repo_id``:
    'name' or 'namespace/name' of letters, digits, '-', '_', '.'), one line; None when it can."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if not isinstance(repo_id, str) or not repo_id:
        return f"repo_id must look like 'user/name' (or 'name'), got {repo_id!r}"
    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        reason = str(err).replace(" Use `repo_type` argument if needed.", "").replace("\n", " ").rstrip(".")
        return f"{repo_id!r} is not a Hub repository id: {reason} (use 'user/name', e.g. 'bob/depthpe-prope')"
    return None


def repo_access_problem(repo_id: str, *, private: bool = False, token: str | None = None,
                        endpoint: str | None = None, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> str | None:
    """With a token (``token`` or the usual sources) and not offline: create the repository, or find
    it, as the first push would (``create_repo(exist_ok=True)``) and return one line when the Hub
    refuses (HTTP 4xx other than 409/429: no write access to the namespace, a read-only token, a
    name the Hub rejects). None when it worked, without a token, offline, or when the Hub could not
    be reached (pushes retry later; a request waits at most ``timeout`` s)."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import HfHubHTTPError

    token = token or known_token()
    if token is None or constants.is_offline_mode():
        return None
    install_request_timeouts()
    try:
        with bounded_requests(timeout):
            HfApi(endpoint=endpoint, token=token).create_repo(repo_id, private=private, exist_ok=True,
                                                              repo_type="model")
    except HfHubHTTPError as err:
        status = getattr(err.response, "status_code", None)
        if status is None or status < 400 or status >= 500 or status in (409, 429):
            return None
        reason = str(err).replace(token, "***").splitlines()[0][:300]
        return (f"the Hub refused to create or write to {repo_id} (HTTP {status}: {reason}); use a token with write "
                "access to that namespace (HF_TOKEN or `hf auth login`) or another repo_id")
    except Exception:  # network trouble: not a verdict on the repo_id; pushes retry and report later
        return None
    return None


def known_token() -> str | None:
    """The Hugging Face token from the usual sources (``HF_TOKEN``, ``hf auth login``), or None."""
    try:
        from huggingface_hub import get_token

        return get_token()
    except Exception:
        return None
