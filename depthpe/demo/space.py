"""The ``app.py`` that runs the demo as a Hugging Face Space (Gradio SDK) for a model on the Hub
(docs/predict.md#demo-depthpe-demo); ``depthpe push --demo-app`` writes it next to the model. Light module."""

from __future__ import annotations

from pathlib import Path

from ..files import atomic_write_bytes
from ..hub.folders import DEMO_APP_NAME

__all__ = ["space_app", "write_space_app"]

_TEMPLATE = '''"""depthpe demo of the model {repo_id}{at}: a Hugging Face Space (Gradio SDK) app.

Copy this file into a Space whose requirements.txt holds `depthpe[demo]`; `python app.py` also runs it
locally. DEPTHPE_MODEL / DEPTHPE_REVISION choose another model. Written by `depthpe push --demo-app`.
"""

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from depthpe.demo.app import build_app, launch  # noqa: E402

MODEL = os.environ.get("DEPTHPE_MODEL", {repo_id!r})
REVISION = os.environ.get("DEPTHPE_REVISION", {revision!r}) or None
demo = build_app(MODEL, revision=REVISION)

if __name__ == "__main__":
    launch(demo, host=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"), port=int(os.environ.get("PORT", "7860")))
'''


def space_app(repo_id: str, revision: str | None = None) -> str:
    """The text of the Space's ``app.py`` for the Hub model ``repo_id`` (at ``revision``)."""
    return _TEMPLATE.format(repo_id=repo_id, revision=revision or "", at=f" ({revision})" if revision else "")


def write_space_app(folder: str | Path, repo_id: str, revision: str | None = None) -> Path:
    """Write ``folder/app.py`` (``space_app``); returns its path."""
    return atomic_write_bytes(Path(folder) / DEMO_APP_NAME, space_app(repo_id, revision).encode())
