"""One held-out scene predicted exactly as ``depthpe eval`` predicts it (same views, input size,
normalized unit and inference path), with its GT, cameras and metric rows: what ``depthpe view
--model M --data ROOT --scene NAME`` (or an evaluation folder) shows.

Conventions: images (S, H, W, 3) uint8 RGB; K (S, 3, 3) pixel intrinsics; w2c (S, 3, 4) OpenCV
world-to-camera in the normalized scene frame (view 0 = identity, unit mean camera distance);
depth, gt (S, H, W) float32 z-depth in that unit (gt 0 = invalid).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..metrics import MIN_VALID_FRACTION, scene_rows, scene_scale, scene_summaries
from .heldout import HeldOutProtocol, HeldOutSet, model_input_size, resolve_held_out, view_draw
from .loop import scene_prediction
from .protocol import discover_sources

__all__ = ["EvalSceneSpec", "PredictedScene", "spec_from_eval_dir", "held_out_of_spec", "predict_held_out_scene",
           "predict_eval_scene", "scene_metrics"]


@dataclass
class EvalSceneSpec:
    """Which scene and how: model (folder or Hub id), data root and split, scene ("<dataset>/<id>"
    or just the id), views and seed of the view draw, image_width (None = the model's), manifest
    (an evaluation's manifest.json: its frames win), dtype ("fp32" / "bf16"), min_valid_fraction (the
    valid depth a view needs to be scored, as ``depthpe eval --min-valid-fraction``)."""

    model: str
    data: str
    scene: str | None = None
    split: str = "val"
    views: int = 8
    seed: int = 0
    image_width: int | None = None
    manifest: str | None = None
    revision: str | None = None
    dtype: str = "fp32"
    min_valid_fraction: float = MIN_VALID_FRACTION


@dataclass
class PredictedScene:
    """A predicted held-out scene (module docstring for shapes); frames: the scene file's frame indices."""

    dataset: str
    scene: str
    frames: list[int]
    images: np.ndarray
    K: np.ndarray
    w2c: np.ndarray
    gt: np.ndarray
    depth: np.ndarray
    conf: np.ndarray | None


def spec_from_eval_dir(eval_dir: str | Path, scene: str | None = None, **overrides) -> EvalSceneSpec:
    """The spec of a scene of a ``depthpe eval`` output folder: model, data, split, views, seed,
    width, dtype and min_valid_fraction from its summary.json, frames from its manifest.json;
    ``overrides`` that are not None win. Raises ValueError if the folder is not an evaluation."""
    folder = Path(eval_dir)
    if not (folder / "summary.json").is_file():
        raise ValueError(f"{folder}: no summary.json (not a depthpe eval output folder)")
    meta = json.loads((folder / "summary.json").read_text()).get("meta", {})
    if not meta.get("model") or not meta.get("data"):
        raise ValueError(f"{folder / 'summary.json'}: its meta names no model or data; pass --model and --data")
    spec = EvalSceneSpec(model=meta["model"], data=meta["data"], scene=scene, split=meta.get("split", "val"),
                         views=int(meta.get("views") or 8), seed=int(meta.get("seed") or 0),
                         image_width=meta.get("image_width"), revision=meta.get("revision"),
                         dtype=meta.get("dtype") or "fp32",
                         min_valid_fraction=float(meta.get("min_valid_fraction", MIN_VALID_FRACTION)),
                         manifest=str(folder / "manifest.json") if (folder / "manifest.json").is_file() else None)
    for key, value in overrides.items():
        if value is not None:
            setattr(spec, key, value)
    return spec


def _find_item(held_out: HeldOutSet, wanted: str | None) -> int:
    """Item index of the held-out scene whose key is ``wanted`` ("<dataset>/<id>", or an id matching
    one key); the first scene when None. Raises ValueError listing some keys otherwise."""
    keys = list(held_out.scenes)
    if not keys:
        raise ValueError("no scene with 2 or more frames in this split")
    if wanted is None:
        return held_out.order[0]
    hits = [i for i, k in zip(held_out.order, keys) if k == wanted or k.split("/", 1)[1] == wanted]
    if len(hits) != 1:
        shown = ", ".join(keys[:8]) + (", ..." if len(keys) > 8 else "")
        problem = "no scene" if not hits else f"{len(hits)} scenes"
        raise ValueError(f"{problem} named {wanted!r}; pass one of: {shown}")
    return hits[0]


def held_out_of_spec(spec: EvalSceneSpec) -> HeldOutSet:
    """The held-out set ``spec`` picks its scene from: every scene of ``spec.data`` / ``spec.split``
    with ``spec``'s views, seed, manifest and min_valid_fraction, at the model's input size
    (``model_input_size``). Raises FileNotFoundError without data, ValueError for a bad manifest."""
    size = model_input_size(spec.model, spec.revision, spec.image_width)
    protocol = HeldOutProtocol(view_draw(spec), min_valid_fraction=spec.min_valid_fraction)
    return resolve_held_out(discover_sources(spec.data, spec.split), protocol, size)


def predict_held_out_scene(held_out: HeldOutSet, scene: str | None, model, dtype: str = "fp32") -> PredictedScene:
    """Load the scene named ``scene`` (``_find_item``; None = the first) of ``held_out`` as the
    evaluation does and predict it with ``model`` (a ``DepthModel``; ``scene_prediction``). Raises
    ValueError for an unknown or unusable scene."""
    import torch

    from depthpe.loader.batching import collate_eval

    dataset = held_out.dataset()
    batch = collate_eval([dataset[_find_item(held_out, scene)]])
    if batch["error"] is not None:
        raise ValueError(f"scene {batch['dataset']}/{batch['scene']} cannot be used: {batch['error']}")
    with torch.no_grad():
        out = scene_prediction(model, batch, dtype)
    conf = out.get("conf")
    return PredictedScene(
        dataset=batch["dataset"][0], scene=batch["scene"][0], frames=[int(i) for i in batch["frames"][0]],
        images=(batch["images"][0].permute(0, 2, 3, 1).numpy() * 255).round().astype(np.uint8),
        K=batch["K"][0].double().numpy(), w2c=batch["w2c"][0, :, :3].double().numpy(),
        gt=(batch["depth"][0] * batch["valid"][0]).numpy(), depth=out["depth"][0].float().cpu().numpy(),
        conf=None if conf is None else conf[0].float().cpu().numpy())


def predict_eval_scene(spec: EvalSceneSpec, model=None, device: str = "cpu") -> PredictedScene:
    """Load ``spec``'s scene as the evaluation does (``held_out_of_spec``) and predict it
    (``predict_held_out_scene``). model: an already loaded ``DepthModel`` (None = load ``spec.model``)."""
    held_out = held_out_of_spec(spec)
    _find_item(held_out, spec.scene)  # an unknown scene is an error before the model is loaded
    if model is None:
        from ..model import DepthModel

        model = DepthModel.from_pretrained(spec.model, revision=spec.revision).to(device).eval()
    return predict_held_out_scene(held_out, spec.scene, model, spec.dtype)


def scene_metrics(scene: PredictedScene) -> tuple[dict[str, dict], dict[str, float]]:
    """({row: {metric: mean over the scene's images}} for the rows native, scene_aligned and
    image_aligned (``depthpe.metrics``), {"native": 1.0, "scene_aligned": median-ratio scale})."""
    valid = scene.gt > 0
    rows = scene_rows(scene.depth, scene.gt, valid, dataset=scene.dataset, scene=scene.scene)
    by_mode = {s["mode"]: s for s in scene_summaries(rows)}
    table = {mode: by_mode[mode] for mode in ("native", "scene_aligned", "image_aligned") if mode in by_mode}
    return table, {"native": 1.0, "scene_aligned": float(scene_scale(scene.depth, scene.gt, valid))}
