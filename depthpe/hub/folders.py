"""What an exported model folder holds, and where to find one in a run folder."""

from __future__ import annotations

from pathlib import Path

from ..model.training_inputs import TRAINING_INPUTS_NAME
from .card import CARD_NAME

__all__ = ["REQUIRED_FILES", "MODEL_FILES", "DEMO_APP_NAME", "resolve_model_folder"]

REQUIRED_FILES = ("config.json", "model.safetensors")  # every exported model folder holds these
DEMO_APP_NAME = "app.py"  # the demo's Hugging Face Space app (``depthpe push --demo-app``)
MODEL_FILES = (*REQUIRED_FILES, CARD_NAME, TRAINING_INPUTS_NAME, DEMO_APP_NAME)  # what a push uploads, when present


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
