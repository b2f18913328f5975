"""What ``depthpe rmvd --model`` runs: the model named by ``--model``, what it can take, and which
RMVD settings it can therefore run.

``--model`` is one of

* an exported depthpe model folder or Hub repo id (``DepthModel.from_pretrained``, resolved by
  ``depthpe.model.depth_model.model_files``); its ``training_inputs.json`` gives the input width and
  the scale reference;
* ``vggt-1b`` (``facebook/VGGT-1B``) or ``vggt:PATH_OR_REPO``, a VGGT-format checkpoint
  (``DepthModel.from_vggt``; ``--vggt-overrides FILE`` holds the ``DepthModelConfig`` fields of a
  reduced one). Input width 518, VGGT-1B's. VGGT's global attention is the 2D ``rope``: no camera input.

Which settings run (one ``ConfigError`` line otherwise, before any weight is loaded):

* ``known_poses``: depthpe models. The true poses go through ``predict_depth``, which normalizes
  them (view 0 = identity, unit mean camera distance) and multiplies the depth back into metres. A
  VGGT checkpoint is refused: it was trained with depth normalized by the scene points' distance,
  not by depthpe's camera distance, so poses give it no metric scale.
* ``intrinsics_only``: models that read no camera at all (``global_pe`` ``rope`` or ``none``, no
  Plücker rays: ``camera_free``), VGGT included. They run with identity poses and scale 1, which
  they ignore; depth is in their own unit and median-aligned. A model whose encoding reads the
  poses is refused: identity poses would be false cameras, and RMVD gives it no true ones here.
* ``single_view``: every model, with the keyview alone (its pose is the identity in any case).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..config import ConfigError
from ..model.config import DepthModelConfig
from ..prediction.api import CAMERA_FREE_ENCODINGS, DEFAULT_IMAGE_WIDTH

__all__ = ["VGGT_1B", "ModelFacts", "vggt_source", "model_facts", "settings_problem", "load_model"]

VGGT_1B = "facebook/VGGT-1B"
_VGGT_PREFIX = "vggt:"


@dataclass(frozen=True)
class ModelFacts:
    """What is known of ``--model`` before its weights are loaded. spec: ``--model`` as given;
    kind: "depthpe" or "vggt"; source: the folder, Hub id or VGGT checkpoint it names; files: the
    local files loaded ({"config", "weights"}, VGGT: {"weights"}); config: the architecture;
    image_width: the input width of ``--input-size training`` and width_note: where it comes from;
    scale_reference: the camera-distance reference it was trained with; revision: its Hub revision."""

    spec: str
    kind: str
    source: str
    revision: str | None
    files: dict
    config: DepthModelConfig
    image_width: int
    width_note: str
    scale_reference: str

    @property
    def camera_free(self) -> bool:
        """Whether the model reads neither K nor the poses (encoding rope or none, no Plücker rays)."""
        pe = self.config.global_pe
        return isinstance(pe, str) and pe in CAMERA_FREE_ENCODINGS and not self.config.plucker

    def identity(self) -> dict:
        """The fingerprint entries of the model: spec and source (a local path resolved, so ``./m``
        and ``m`` agree on resume), the weights file's [size, mtime ns] and the SHA-256 of its config
        (config.json, or the VGGT overrides)."""
        st = Path(self.files["weights"]).stat()
        config = json.dumps(self.config.to_dict(), sort_keys=True, default=str).encode()
        return {"model": _resolved(self.spec), "model_source": _resolved(self.source), "revision": self.revision,
                "weights": [st.st_size, st.st_mtime_ns],
                "model_config": hashlib.sha256(config).hexdigest()}


def _resolved(spec: str | None) -> str | None:
    """``spec`` with a local path (also after ``vggt:``) made absolute; a Hub id or name unchanged."""
    if spec is None:
        return None
    prefix = _VGGT_PREFIX if spec.startswith(_VGGT_PREFIX) else ""
    path = Path(spec[len(prefix):])
    return prefix + str(path.resolve()) if path.exists() else spec


def vggt_source(spec: str) -> str | None:
    """The VGGT checkpoint ``spec`` names (``vggt-1b`` -> ``facebook/VGGT-1B``, ``vggt:X`` -> X), or
    None for a depthpe model."""
    if spec.lower() == "vggt-1b":
        return VGGT_1B
    return spec[len(_VGGT_PREFIX):] if spec.startswith(_VGGT_PREFIX) else None


def _vggt_overrides(path: str | None) -> dict:
    """The ``DepthModelConfig`` fields of ``--vggt-overrides FILE`` ({} without one)."""
    if path is None:
        return {}
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"--vggt-overrides {path}: not a readable JSON file ({err})") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"--vggt-overrides {path}: must be a JSON object of DepthModelConfig fields")
    return doc


def _vggt_facts(cfg, source: str) -> ModelFacts:
    """The facts of a VGGT checkpoint; the settings are checked before the file is looked for (or downloaded)."""
    from ..model.vggt_weights import resolve_vggt_file

    try:
        config = DepthModelConfig.from_dict(_vggt_overrides(cfg.vggt_overrides))
    except ValueError as err:
        raise ConfigError(f"--vggt-overrides {cfg.vggt_overrides}: {str(err).splitlines()[0]}") from None
    width = cfg.image_width or DEFAULT_IMAGE_WIDTH
    note = f"image width {width} (--image-width)" if cfg.image_width else f"image width {width} (VGGT-1B's)"
    facts = ModelFacts(cfg.model, "vggt", source, cfg.revision, {}, config, width, note, "others")
    _check_settings(facts, cfg.settings)
    try:
        weights = resolve_vggt_file(source, revision=cfg.revision)
    except RuntimeError as err:
        raise ConfigError(f"--model {cfg.model}: {str(err).splitlines()[0]}") from None
    return dataclasses.replace(facts, files={"weights": str(weights)})


def _depthpe_facts(cfg) -> ModelFacts:
    from ..model.depth_model import model_files
    from ..model.training_inputs import read_training_inputs

    files = model_files(cfg.model, cfg.revision)
    try:
        config = DepthModelConfig.from_json(files["config"])
        inputs = read_training_inputs(cfg.model, cfg.revision)
    except (OSError, ValueError) as err:
        raise ConfigError(f"--model {cfg.model}: {str(err).splitlines()[0]}") from None
    if cfg.image_width:
        width, note = cfg.image_width, f"image width {cfg.image_width} (--image-width)"
    elif inputs is None:
        width, note = DEFAULT_IMAGE_WIDTH, "image width 518 (the model records no training inputs)"
    else:
        width, note = inputs.image_width, f"image width {inputs.image_width} (training_inputs.json)"
    source = str(Path(cfg.model).resolve()) if os.path.isdir(cfg.model) else cfg.model
    facts = ModelFacts(cfg.model, "depthpe", source, cfg.revision, files, config, width, note,
                       inputs.scale_reference if inputs else "others")
    _check_settings(facts, cfg.settings)
    return facts


def model_facts(cfg) -> ModelFacts:
    """The ``ModelFacts`` of ``cfg.model`` (an ``RmvdConfig``); a model that cannot be found or read,
    or that cannot run one of ``cfg.settings`` (``settings_problem``), is one ``ConfigError`` line."""
    source = vggt_source(cfg.model)
    return _vggt_facts(cfg, source) if source is not None else _depthpe_facts(cfg)


def settings_problem(facts: ModelFacts, settings) -> str | None:
    """Why ``facts``' model cannot run one of ``settings`` (module docstring), as one line, or None."""
    if "known_poses" in settings and facts.kind == "vggt":
        return (f"--model {facts.spec} is a VGGT checkpoint: it takes no cameras, so it cannot run --setting "
                "known_poses (run intrinsics_only and single_view, or a depthpe model for known_poses)")
    if "intrinsics_only" in settings and not facts.camera_free:
        return (f"--model {facts.spec} reads the poses (global_pe {facts.config.global_pe!r}"
                f"{', Plücker rays' if facts.config.plucker else ''}), which --setting intrinsics_only does not give; "
                f"run known_poses and single_view, or a model without camera input (global_pe "
                f"{' or '.join(CAMERA_FREE_ENCODINGS)}, or --model vggt-1b) for intrinsics_only")
    return None


def _check_settings(facts: ModelFacts, settings) -> None:
    problem = settings_problem(facts, settings)
    if problem:
        raise ConfigError(problem)


def load_model(facts: ModelFacts, device: str):
    """The ``DepthModel`` of ``facts`` in eval mode on ``device``; a load failure is one ``ConfigError`` line."""
    from ..model import DepthModel

    try:
        if facts.kind == "vggt":
            return DepthModel.from_vggt(facts.files["weights"], map_location=device, **facts.config.to_dict())
        return DepthModel.from_pretrained(facts.spec, map_location=device, revision=facts.revision)
    except (OSError, RuntimeError, ValueError) as err:
        raise ConfigError(f"--model {facts.spec}: cannot load it ({str(err).splitlines()[0]})") from None
