"""The evaluation of ``depthpe study correspondence``: held-out samples, the extrapolation settings,
and one pass that scores every global layer (docs/correspondence.md).

A *setting* says how the held-out scenes reach the model: views per scene, a zoom-in (centre crop
resized back, ``zoom_center``) and noise on the input cameras (``geometry.perturb_cameras``); the true matches
always come from the true cameras of the images the model sees. ``evaluate_setting`` runs the
aggregator with the probe's capture (``depthpe.probe.capture``) and, per global layer, scores the
head-averaged attention of every query patch over the patches of every other view: top-1 and
within-1-patch accuracy (``depthpe.geometry.match_hits``) and the probe's correspondence lift
with its same-position control (``depthpe.probe.lift.LiftAccumulator``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F

from depthpe.geometry import match_hits, pair_blocks, pair_targets, patch_matches
from depthpe.geometry import crop_intrinsics, perturb_cameras, resize_intrinsics
from depthpe.probe.capture import capture_global_attention
from depthpe.probe.lift import LiftAccumulator

__all__ = ["Setting", "settings_of", "load_samples", "batches", "zoom_center", "evaluate_setting", "hit_counts",
           "all_pairs"]

KEYS = ("images", "K", "w2c", "depth", "valid")


@dataclass(frozen=True)
class Setting:
    """How held-out scenes are shown: views per scene, zoom (>= 1), rotation noise (degrees) and
    translation noise (fraction of the scene scale) of the input cameras; name: its key in the results."""

    name: str
    views: int
    zoom: float = 1.0
    rotation_deg: float = 0.0
    translation: float = 0.0


def settings_of(cfg) -> list[Setting]:
    """The settings of a ``CorrespondenceConfig``: ``base`` (the training views, nothing changed),
    then one per ``eval_views``, ``eval_zooms``, ``eval_rotation_noise``, ``eval_translation_noise``."""
    out = [Setting("base", cfg.views)]
    out += [Setting(f"views{v}", v) for v in cfg.eval_views]
    out += [Setting(f"zoom{z:g}", cfg.views, zoom=z) for z in cfg.eval_zooms]
    out += [Setting(f"rotation{d:g}deg", cfg.views, rotation_deg=d) for d in cfg.eval_rotation_noise]
    out += [Setting(f"translation{t:g}", cfg.views, translation=t) for t in cfg.eval_translation_noise]
    return out


def load_samples(root: str, dataset: str, split: str, views: int, image_width: int, *, seeds: Sequence[int] = (0,),
                 max_scenes: int | None = None) -> list[dict]:
    """Samples of ``root/<dataset>/<split>`` as ``depthpe eval`` reads them (``resolve_held_out``: no
    augmentation, normalized scene frame, square images of ``image_width``), one view subset per
    scene and seed; each {images (S, 3, H, W), K, w2c (S, 4, 4), depth (S, H, W), valid, scene (its
    key, ``"<dataset>/<scene>"``)}. Unusable
    scenes are left out. Raises ``FileNotFoundError`` without an index.json."""
    from depthpe.loader.config import SourceConfig
    from depthpe.evaluation.heldout import HeldOutProtocol, InputSize, ViewDraw, resolve_held_out

    source = SourceConfig(name=dataset, root=str(root), split=split)
    if not (source.split_dir / "index.json").is_file():
        raise FileNotFoundError(f"{source.split_dir / 'index.json'} not found: generate scenes with "
                                f"`depthpe synth --out {root}` or pass --data ROOT of such a folder")
    samples = []
    for seed in seeds:
        held_out = resolve_held_out([source], HeldOutProtocol(ViewDraw(views, seed), max_scenes=max_scenes),
                                    InputSize(image_width, 1.0))
        dataset_ = held_out.dataset()
        for i in held_out.order:
            item = dataset_[i]
            if item["error"] is None and item["images"].shape[0] == views:
                samples.append({**{key: item[key] for key in KEYS}, "scene": dataset_.scene_key(i)})
    return samples


def batches(samples: list[dict], size: int) -> list[list[torch.Tensor]]:
    """Consecutive batches of ``size`` samples: [images, K, w2c, depth, valid] each with a batch dim."""
    return [[torch.stack([s[key] for s in samples[i:i + size]]) for key in KEYS]
            for i in range(0, len(samples), size)]


def zoom_center(images, K, depth, valid, zoom: float):
    """Zoom in by ``zoom`` >= 1: the centre crop of round(H/zoom) x round(W/zoom) pixels resized back
    to H x W (images bilinear, depth and valid nearest), K cropped and resized to match (focal
    length x zoom). images (B, S, 3, H, W), K (B, S, 3, 3), depth and valid (B, S, H, W)."""
    if zoom == 1:
        return images, K, depth, valid
    B, S, _, H, W = images.shape
    ch, cw = max(1, round(H / zoom)), max(1, round(W / zoom))
    top, left = (H - ch) // 2, (W - cw) // 2

    def crop(x, mode):
        x = x[..., top:top + ch, left:left + cw].flatten(0, 1)
        x = x if x.ndim == 4 else x[:, None]
        kwargs = {"align_corners": False} if mode == "bilinear" else {}
        return F.interpolate(x.float(), size=(H, W), mode=mode, **kwargs)

    out_images = crop(images, "bilinear").view(B, S, 3, H, W).clamp(0, 1)
    out_depth = crop(depth, "nearest-exact").view(B, S, H, W)
    out_valid = crop(valid, "nearest-exact").view(B, S, H, W) > 0.5
    out_K = resize_intrinsics(crop_intrinsics(K, left, top), W / cw, H / ch)
    return out_images, out_K, out_depth, out_valid


def all_pairs(num_views: int) -> list[tuple[int, int]]:
    """Every ordered pair (i, j), i != j, of ``num_views`` views."""
    return [(i, j) for i in range(num_views) for j in range(num_views) if i != j]


def evaluate_setting(model, samples: list[dict], setting: Setting, *, radii: Sequence[int], depth_tolerance: float,
                     seed: int, batch_size: int = 8) -> list[dict]:
    """One row per global layer of ``model`` (a ``DepthModel``) on ``samples`` shown as ``setting``:
    layer, matches, top1, within1 (fractions of the matches), and per radius r ``lift_r{r}``,
    ``same_position_lift_r{r}`` and ``lift_minus_same_r{r}`` (NaN without matches). Pose noise is
    drawn from ``seed`` (the same at every call)."""
    config = model.config
    generator = torch.Generator().manual_seed(seed)
    lift = LiftAccumulator(radii)
    hits: dict[int, list[torch.Tensor]] = {}  # layer -> per sample [top-1 hits, within-1 hits, matches]
    for images, K, w2c, depth, valid in batches(samples, batch_size):
        images, K, depth, valid = zoom_center(images, K, depth, valid, setting.zoom)
        _, seen = perturb_cameras(K, w2c, rotation_deg=setting.rotation_deg, translation=setting.translation,
                                  generator=generator)
        grid = (images.shape[-2] // config.patch_size, images.shape[-1] // config.patch_size)
        matches = patch_matches(depth, valid, K, w2c, grid, depth_tolerance=depth_tolerance)
        pairs = all_pairs(images.shape[1])
        target = pair_targets(matches, pairs)
        lift.start(matches, config.num_special_tokens)

        def on_layer(index, probs, encoding):
            lift.add(index, probs)
            mean = pair_blocks(probs.mean(dim=1, keepdim=True), grid, config.num_special_tokens, pairs)[:, 0]
            hits.setdefault(index, []).append(hit_counts(mean, target, grid))

        with torch.no_grad(), capture_global_attention(model, on_layer):
            model.aggregator(images, K, seen)
    return _layer_rows(lift, hits)


def hit_counts(scores: torch.Tensor, target: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """(B, 3) float64 per sample: top-1 hits, within-1 hits (``geometry.match_hits``) and matches,
    of ``scores`` (B, Q, h*w) against ``target`` (B, Q). A sample with a non-finite score in a row of
    a matched query has NaN hits: its argmax means nothing, so its accuracy is undefined, not a number."""
    counts = torch.stack([match_hits(scores, target, grid, 0).sum(1), match_hits(scores, target, grid, 1).sum(1),
                          (target >= 0).sum(1)], dim=1).double()
    undefined = (~torch.isfinite(scores).all(dim=-1) & (target >= 0)).any(dim=1)
    counts[undefined, :2] = math.nan
    return counts


def _layer_rows(lift: LiftAccumulator, hits: dict[int, list[torch.Tensor]]) -> list[dict]:
    """The rows of ``evaluate_setting`` from the lift sums and the per-sample hit counts per layer
    (each row also has ``scene_top1`` / ``scene_within1``: per sample, in order, the fraction of its
    matches, None for a sample without one, and ``scene_matches``). A sample whose scores were not
    finite (``hit_counts``) makes its fractions and the layer's top1 / within1 NaN (written as null)."""
    by_layer: dict[int, dict] = {}
    for row in lift.layer_rows():
        r = row["radius"]
        entry = by_layer.setdefault(row["layer"], {})
        entry[f"lift_r{r}"] = row["lift"]
        entry[f"same_position_lift_r{r}"] = row["same_position_lift"]
        entry[f"lift_minus_same_r{r}"] = row["lift"] - row["same_position_lift"]
    rows = []
    for layer in sorted(hits):
        per_sample = torch.cat(hits[layer]).tolist()
        top1, within1, n = (sum(column) for column in zip(*per_sample))
        fraction = lambda k: [c[k] / c[2] if c[2] else None for c in per_sample]  # noqa: E731
        rows.append({"layer": layer, "matches": int(n), "top1": top1 / n if n else math.nan,
                     "within1": within1 / n if n else math.nan, **by_layer.get(layer, {}),
                     "scene_top1": fraction(0), "scene_within1": fraction(1),
                     "scene_matches": [int(c[2]) for c in per_sample]})
    return rows
