"""The held-out set: one value that says which scenes, which views and at what input size a model is
evaluated, resolved once (``resolve_held_out``) and passed to everything that runs a model on it:
``evaluation.loop.evaluate``, training's ``validate``, ``probe.runner.probe_attention`` and the
viewer's held-out scene (``evaluation.scene``). Resolving reads each source's index.json once and
the model's training_inputs.json once (``model_input_size``); nothing later reads either again.

Conventions: a scene is named by its manifest key "<source name>/<scene_id>"; the input size is a
width in pixels (a multiple of 14), a fixed height / width aspect (None = each scene's own) and the
scale reference of the normalized scene unit (``others`` or ``all``, as the model was trained).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Collection, Sequence

from depthpe.loader.config import SourceConfig
from depthpe.loader.datasets import SceneEvalDataset
from ..metrics import MIN_VALID_FRACTION
from .protocol import SourceScenes, discover_sources, load_manifest, read_source, scene_indices, usable_sources

__all__ = ["InputSize", "ViewDraw", "view_draw", "HeldOutProtocol", "HeldOutSet", "model_input_size",
           "resolve_held_out", "held_out_of_config"]

DEFAULT_WIDTH = 518


@dataclass(frozen=True)
class InputSize:
    """How a held-out scene becomes the model's input: image_width (px, multiple of 14), aspect
    (height / width, None = each scene's own), scale_reference (the normalized scene unit), note (where
    they come from, for the console)."""

    image_width: int = DEFAULT_WIDTH
    aspect: float | None = None
    scale_reference: str = "others"
    note: str = ""


@dataclass(frozen=True)
class ViewDraw:
    """The views of each held-out scene, as one value from the command line (``--views``, ``--seed``,
    ``--manifest`` of ``config.inference.ViewProtocol``, their one declaration) or the run config's
    ``val`` down to the dataset: views per scene (a scene with fewer is evaluated with all of them),
    seed of the view draw (and of ``selection="random"``), manifest: fixed frames per scene key from
    an earlier run's manifest.json (None = drawn)."""

    views: int = 8
    seed: int = 0
    manifest: dict | None = None


def view_draw(protocol) -> ViewDraw:
    """The ``ViewDraw`` of a ``ViewProtocol`` (``views``, ``seed`` and the path ``manifest``, read here).
    Raises ValueError for a manifest that cannot be read."""
    return ViewDraw(protocol.views, protocol.seed, load_manifest(protocol.manifest))


@dataclass(frozen=True)
class HeldOutProtocol:
    """Which scenes and views: the views of each scene (``draw``); max_scenes per source (None = all; a
    source's own ``max_scenes`` wins), the first ones or a random draw (``selection``, seeded by
    ``draw.seed``); only_scenes: only these "<source>/<scene_id>" keys (None = all);
    min_valid_fraction: the valid depth a scene's views and each scored image need (``SceneEvalDataset``)."""

    draw: ViewDraw = ViewDraw()
    max_scenes: int | None = None
    selection: str = "first"
    only_scenes: Collection[str] | None = None
    min_valid_fraction: float = MIN_VALID_FRACTION


@dataclass(frozen=True)
class HeldOutSet:
    """A resolved held-out set: the sources with their read index entries, the chosen scenes (item
    indices ``order`` of ``dataset()`` and their keys ``scenes``, in evaluation order), the views of
    each scene (``draw``), min_valid_fraction and the input size."""

    sources: tuple[SourceScenes, ...]
    order: tuple[int, ...]
    scenes: tuple[str, ...]
    draw: ViewDraw
    min_valid_fraction: float
    size: InputSize

    def dataset(self) -> SceneEvalDataset:
        """The evaluation dataset of these sources (from the index entries already read; no file is
        opened until an item is read); ``order`` indexes its items."""
        return _dataset(self.sources, self.draw, self.min_valid_fraction, self.size)

    def with_manifest(self, manifest: dict) -> "HeldOutSet":
        """The same set narrowed to the scenes of ``manifest`` (an evaluation's ``EvalResult.manifest``)
        with exactly its frames: what validation's correspondence probe runs on."""
        kept = [(i, key) for i, key in zip(self.order, self.scenes) if key in manifest]
        return dataclasses.replace(self, draw=dataclasses.replace(self.draw, manifest=dict(manifest)),
                                   order=tuple(i for i, _ in kept), scenes=tuple(key for _, key in kept))


def _dataset(sources: Sequence[SourceScenes], draw: ViewDraw, min_valid_fraction: float,
             size: InputSize) -> SceneEvalDataset:
    return SceneEvalDataset([s.source for s in sources], views=draw.views, seed=draw.seed, image_width=size.image_width,
                            aspect=size.aspect, manifest=draw.manifest, scale_reference=size.scale_reference,
                            min_valid_fraction=min_valid_fraction, indexes=[s.index for s in sources])


def resolve_held_out(sources: Sequence[SourceConfig | dict | SourceScenes], protocol: HeldOutProtocol = HeldOutProtocol(),
                     model_inputs: InputSize = InputSize()) -> HeldOutSet:
    """The ``HeldOutSet`` of ``sources`` (``SourceScenes`` as read; others have their index.json read
    here, once) under ``protocol`` at ``model_inputs`` (``model_input_size``). Raises ``SceneFileError``
    for an unreadable index, ``ValueError`` for fewer than 2 views or an unknown selection."""
    read = tuple(read_source(s) for s in sources)
    dataset = _dataset(read, protocol.draw, protocol.min_valid_fraction, model_inputs)
    order = scene_indices(dataset, protocol.max_scenes, protocol.selection, protocol.draw.seed, protocol.only_scenes)
    return HeldOutSet(sources=read, order=tuple(order), scenes=tuple(dataset.scene_key(i) for i in order),
                      draw=protocol.draw, min_valid_fraction=protocol.min_valid_fraction, size=model_inputs)


def model_input_size(model: str, revision: str | None, image_width: int | None) -> InputSize:
    """The input size for evaluating ``model`` (folder or Hub id), from its training_inputs.json read
    once: ``image_width`` if given, else the width it was trained at, else 518; its one training
    aspect if it had one (None = each scene's own); the scale reference it was trained in (``others``
    without a record). Raises ``ConfigError`` for a width that is not a positive multiple of 14."""
    from ..config import ConfigError
    from ..model.depth_model import model_files
    from ..model.training_inputs import read_training_inputs

    if image_width is not None and (image_width <= 0 or image_width % 14):
        raise ConfigError(f"--image-width must be a positive multiple of 14, got {image_width} (e.g. 518 = 37 * 14)")
    model_files(model, revision)  # one line for a typo, a checkpoint or run folder, a bad Hub id
    inputs = read_training_inputs(model, revision)
    aspect = inputs.fixed_aspect if inputs else None
    reference = inputs.scale_reference if inputs else "others"
    if image_width is not None:
        return InputSize(image_width, aspect, reference, f"image width {image_width} (--image-width)")
    if inputs is None:
        return InputSize(DEFAULT_WIDTH, None, reference,
                         "image width 518 (the model records no training inputs; pass --image-width)")
    return InputSize(inputs.image_width, aspect, reference,
                     f"image width {inputs.image_width} and aspect {aspect or 'of each scene'} "
                     "from the model's training inputs (training_inputs.json)")


def held_out_of_config(cfg) -> tuple[HeldOutSet, list[str]]:
    """(the held-out set of a command's ``HeldOutScenes`` config: the datasets of ``cfg.data`` /
    ``cfg.split`` (``cfg.datasets``), its views (``view_draw``: ``cfg.views``, ``cfg.seed``, the frames of
    ``cfg.manifest``), ``cfg.max_scenes``, ``cfg.min_valid_fraction`` if it has one, at the input size of ``cfg.model``;
    one warning per empty dataset left out). Raises ``ConfigError`` for missing or empty data and a
    bad width."""
    from ..config import ConfigError

    size = model_input_size(cfg.model, cfg.revision, cfg.image_width)  # a bad --model is named first
    try:
        found = discover_sources(cfg.data, cfg.split, cfg.datasets)
    except FileNotFoundError as err:
        raise ConfigError(str(err)) from None
    sources, warnings = usable_sources(found, named=bool(cfg.datasets))
    protocol = HeldOutProtocol(view_draw(cfg), max_scenes=cfg.max_scenes,
                               min_valid_fraction=getattr(cfg, "min_valid_fraction", MIN_VALID_FRACTION))
    return resolve_held_out(sources, protocol, size), warnings
