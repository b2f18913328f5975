"""Run the correspondence probe over held-out scenes: ``probe_attention`` (also validation's).

Scenes and views are those of a resolved held-out set (``depthpe.evaluation.heldout.HeldOutSet``: the same
scenes, views, input size and normalized scene unit as the evaluation of that set), and the model runs through the one inference path
(``evaluation.scene_prediction`` -> ``predict_depth``) with ``capture.capture_global_attention``
active; the matches come from the scene's GT depth and cameras (``depthpe.geometry.patch_matches``).
"""

from __future__ import annotations

from typing import Sequence

import torch

from ..evaluation.heldout import HeldOutSet
from ..evaluation.loop import scene_loader, scene_prediction
from .capture import attention_bytes, capture_global_attention
from ..geometry import patch_matches
from .lift import LiftAccumulator

__all__ = ["probe_attention", "probe_scene", "run_probe", "urope_anchors", "MAX_ATTENTION_BYTES"]

MAX_ATTENTION_BYTES = 2**31  # one layer's captured weights (B, heads, N, N) float32 may not exceed this


def urope_anchors(config) -> list[float] | None:
    """The depth anchors (normalized scene unit) of a model config whose global encoding is URoPE
    (``pe_options.anchors``, else URoPE's default), None for every other encoding."""
    from ..pe.spec import encoding_pair
    from ..pe.urope import default_anchors

    if encoding_pair(config.global_pe)[0] != "urope":
        return None
    anchors = config.pe_options.get("anchors")
    return [float(a) for a in anchors] if anchors else default_anchors()


@torch.no_grad()
def probe_attention(model, held_out: HeldOutSet, *, dtype: str = "fp32", radii: Sequence[int] = (0, 1),
                    depth_tolerance: float = 0.05, progress: bool = False) -> dict[str, LiftAccumulator]:
    """Correspondence lift of ``model`` (a ``DepthModel``, possibly DDP-wrapped) per dataset, on the
    scenes and views of ``held_out`` (one scene per forward pass; an unusable scene is skipped); radii: window radii in patches; depth_tolerance: relative depth
    agreement of the occlusion test (``depthpe.geometry.patch_matches``). Returns {dataset:
    ``LiftAccumulator``} (datasets without a usable scene are absent). Raises ``ValueError`` when a
    scene's attention matrix would exceed ``MAX_ATTENTION_BYTES`` (fewer views or a smaller width).
    """
    from tqdm.auto import tqdm

    loader = scene_loader(held_out.dataset(), list(held_out.order), 0)
    anchors = urope_anchors(getattr(model, "module", model).config)
    found: dict[str, LiftAccumulator] = {}
    for batch in tqdm(loader, desc="probe attention", disable=not progress, unit="scene"):
        if batch["error"] is not None:
            continue
        name = batch["dataset"][0]
        probe_scene(model, batch, found.setdefault(name, LiftAccumulator(radii, anchors)), dtype=dtype,
                    depth_tolerance=depth_tolerance)
    return found


def probe_scene(model, batch: dict, acc: LiftAccumulator, *, dtype: str = "fp32",
                depth_tolerance: float = 0.05) -> None:
    """Add one evaluation batch (``collate_eval``: images (1, S, 3, H, W), K, w2c, depth, valid in
    the normalized scene frame) to ``acc``: its matches, then every global layer's weights."""
    config = getattr(model, "module", model).config
    B, S, _, H, W = batch["images"].shape
    grid = (H // config.patch_size, W // config.patch_size)
    tokens = S * (config.num_special_tokens + grid[0] * grid[1])
    size = attention_bytes(B, config.num_heads, tokens)
    if size > MAX_ATTENTION_BYTES:
        raise ValueError(f"the probe would hold {size / 2**30:.1f} GiB of attention weights per layer ({S} views "
                         f"at {W}x{H}); probe fewer views (--views) or a smaller --image-width")
    matches = patch_matches(batch["depth"], batch["valid"], batch["K"], batch["w2c"], grid,
                            depth_tolerance=depth_tolerance)
    acc.start(matches, config.num_special_tokens)

    def on_layer(index: int, probs: torch.Tensor, encoding) -> None:
        acc.add(index, probs.cpu(), getattr(encoding, "G", None))  # URoPE's number of anchor groups

    with capture_global_attention(model, on_layer):
        scene_prediction(model, batch, dtype)


def run_probe(cfg) -> dict[str, LiftAccumulator]:
    """``depthpe probe attention``: probe ``cfg.model`` (a ``ProbeConfig``) on ``cfg.data``, write the
    tables and figures to ``cfg.out`` (``report.write_probe_outputs``) and print the layer tables.
    Raises ``ConfigError`` for missing or empty data, when no scene could be probed, and for an
    ``out`` that holds other outputs (``depthpe.files.output_folder``; ``--overwrite``)."""
    from ..files.output_folder import owned_output_folder, settings_fingerprint

    with owned_output_folder(cfg.out, "depthpe probe attention", settings_fingerprint(cfg), replace=cfg.overwrite):
        return _probe_into(cfg)


def _probe_into(cfg) -> dict[str, LiftAccumulator]:
    """``run_probe`` in the owned ``cfg.out``."""
    import time

    from ..config import ConfigError
    from ..evaluation.heldout import held_out_of_config
    from ..model import DepthModel
    from .report import format_layer_table, write_probe_outputs

    held_out, warnings = held_out_of_config(cfg)
    for line in warnings:
        print(line, flush=True)
    size = held_out.size
    device = "cuda" if torch.cuda.is_available() and not cfg.cpu else "cpu"
    try:
        model = DepthModel.from_pretrained(cfg.model, revision=cfg.revision).to(device)
    except (OSError, ValueError) as err:
        raise ConfigError(f"--model {cfg.model}: cannot load it ({str(err).splitlines()[0]})") from None
    print(f"probing {model.config.global_pe} at {size.note}", flush=True)
    start = time.perf_counter()
    found = probe_attention(model, held_out, dtype=cfg.dtype, radii=cfg.radii, depth_tolerance=cfg.depth_tolerance,
                            progress=True)
    seconds = time.perf_counter() - start
    if not found:
        raise ConfigError(f"no scene of {', '.join(s.source.name for s in held_out.sources)} could be probed (all unusable; "
                          "run `depthpe check` on the data)")
    meta = {"model": cfg.model, "revision": cfg.revision, "global_pe": model.config.global_pe,
            "pe_options": model.config.pe_options, "data": cfg.data, "split": cfg.split, "views": cfg.views,
            "seed": cfg.seed, "image_width": size.image_width, "aspect": size.aspect, "dtype": cfg.dtype, "radii": cfg.radii,
            "depth_tolerance": cfg.depth_tolerance, "anchors": urope_anchors(model.config), "seconds": seconds}
    write_probe_outputs(found, cfg.out, meta)
    for name, acc in sorted(found.items()):
        print(f"\n{name}: correspondence lift of the global attention ({acc.samples} scenes)\n"
              f"{format_layer_table(acc)}")
    print(f"\nwrote {cfg.out}/lift.csv, summary.json, summary.md and figures ({seconds:.1f} s)")
    return found
