"""What a model was trained on: ``training_inputs.json`` next to an exported model.

An exported model folder (``config.json`` + ``model.safetensors``) describes the architecture only;
the input size it was trained at matters as much (a model trained at 84 px is not meant to run at
518 px). Training writes this sidecar into every exported folder, and ``depthpe eval`` (and later
``predict``) default to its values and say so. Models exported by other code have no sidecar:
readers return None and callers fall back to their own defaults.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["TRAINING_INPUTS_NAME", "TrainingInputs", "write_training_inputs", "read_training_inputs"]

TRAINING_INPUTS_NAME = "training_inputs.json"


@dataclass(frozen=True)
class TrainingInputs:
    """Input shapes seen in training: ``image_width`` (pixels, a multiple of the patch size),
    ``aspect`` ([min, max] of height / width), ``views`` ([min, max] views per sample) and
    ``scale_reference`` (the scene unit, ``depthpe.geometry.mean_center_distance``; files written
    before it existed mean ``others``)."""

    image_width: int
    aspect: tuple[float, float]
    views: tuple[int, int]
    scale_reference: str = "others"

    @property
    def fixed_aspect(self) -> float | None:
        """The one aspect ratio trained at, or None when training drew it from a range."""
        return self.aspect[0] if self.aspect[0] == self.aspect[1] else None


def write_training_inputs(directory: str | Path, inputs: TrainingInputs) -> Path:
    """Write ``directory/training_inputs.json`` atomically; returns its path."""
    from ..files import atomic_write_bytes

    doc = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(inputs).items()}
    return atomic_write_bytes(Path(directory) / TRAINING_INPUTS_NAME, (json.dumps(doc, indent=1) + "\n").encode())


def read_training_inputs(model: str | Path, revision: str | None = None) -> TrainingInputs | None:
    """The ``TrainingInputs`` of an exported model folder or Hub repository id, or None without a sidecar."""
    path = Path(model) / TRAINING_INPUTS_NAME
    if not Path(model).is_dir():
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError

        try:
            path = Path(hf_hub_download(repo_id=str(model), filename=TRAINING_INPUTS_NAME, revision=revision))
        except EntryNotFoundError:
            return None
    if not path.is_file():
        return None
    doc = json.loads(path.read_text())
    try:
        return TrainingInputs(int(doc["image_width"]), tuple(map(float, doc["aspect"])), tuple(map(int, doc["views"])),
                              str(doc.get("scale_reference", "others")))
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: malformed {TRAINING_INPUTS_NAME} ({err}); delete it or re-export the model") from None
