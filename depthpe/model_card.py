"""Model cards (``README.md``) for exported depthpe models, regenerated on every Hub push.

A card has Hub metadata (front matter: ``library_name: depthpe``, ``pipeline_tag: depth-estimation``,
tags naming the global positional encoding and the training datasets, ``license``, ``base_model``
when initialised from released weights) and a body: what the model is, how to load it, the latest
evaluation table (``native``, ``scene_aligned`` and ``image_aligned`` rows per dataset, as printed by
``depthpe.evaluation.format_summary``), the training configuration and the licence.

Everything here is a pure function of a ``CardInfo``; nothing touches the network (the Hub's
metadata validation happens when the card is uploaded).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CardInfo", "INIT_WEIGHTS", "CARD_MODES", "render_model_card", "write_model_card", "card_info_for_folder"]

CARD_NAME = "README.md"
DEFAULT_LICENSE = "apache-2.0"
CARD_MODES = ("native", "scene_aligned", "image_aligned")  # evaluation rows shown on the card
CARD_METRICS = ("abs_rel", "delta1", "delta2", "rmse")

# Released weights a model may be initialised from: Hub metadata and the licence note they impose.
INIT_WEIGHTS: dict[str, dict] = {
    "facebook/VGGT-1B": {
        "license": "cc-by-nc-4.0",
        "note": "This model was initialised from the VGGT-1B weights (`facebook/VGGT-1B`), which are "
                "released under CC BY-NC 4.0. The fine-tuned weights are derived from them and may only "
                "be used for non-commercial purposes.",
    },
    "facebook/VGGT-1B-Commercial": {
        "license": "other",
        "license_name": "vggt-aup-license",
        "license_link": "https://huggingface.co/facebook/VGGT-1B-Commercial",
        "note": "This model was initialised from the VGGT-1B-Commercial weights "
                "(`facebook/VGGT-1B-Commercial`), released under the VGGT licence and its Acceptable Use "
                "Policy (commercial use allowed, military use prohibited); the fine-tuned weights keep "
                "those terms.",
    },
}


@dataclass
class CardInfo:
    """What a model card says. All fields but ``model_config`` are optional.

    model_config: the model's ``config.json`` as a dict (``DepthModelConfig`` fields);
    repo_id / revision: where the card lives (used in the loading snippet; revision = a tag such as
        ``step-0000400`` or a branch, None = the default branch);
    run_config: the resolved training config (``RunConfig.to_dict()``), None when unknown;
    step / total_steps: optimizer step of these weights and of the whole run; final: the run's
        final model (not an intermediate checkpoint);
    eval_summary: ``EvalResult.summary`` ({dataset: {mode: {metric: value, n_scenes, n_images}}});
    eval_note: where the numbers come from, e.g. "validation at step 400 (2 scenes per dataset)";
    license: SPDX-like Hub licence id of the weights (ignored when ``init_weights`` sets one);
    init_weights: Hub id of released weights the model was initialised from (a key of
        ``INIT_WEIGHTS``, e.g. ``facebook/VGGT-1B``): sets ``base_model``, the licence and a note.
    """

    model_config: dict
    repo_id: str | None = None
    revision: str | None = None
    run_config: dict | None = None
    step: int | None = None
    total_steps: int | None = None
    final: bool = False
    eval_summary: dict | None = None
    eval_note: str | None = None
    license: str = DEFAULT_LICENSE
    init_weights: str | None = None
    extra_tags: list = field(default_factory=list)

    def __post_init__(self):
        if self.init_weights is not None and self.init_weights not in INIT_WEIGHTS:
            raise ValueError(
                f"init_weights={self.init_weights!r} is not a known release; known: {sorted(INIT_WEIGHTS)}"
            )


def _datasets(run_config: dict | None) -> list[str]:
    """Dataset names of the training sources (folder name, else source name), in config order."""
    if not run_config:
        return []
    names = []
    for src in (run_config.get("data") or {}).get("sources") or []:
        name = src.get("dataset") or src.get("name")
        if name and name not in names:
            names.append(str(name))
    return names


def _tag(text: str) -> str:
    return str(text).strip().lower().replace(" ", "-").replace("_", "-")


def card_metadata(info: CardInfo) -> dict:
    """Front-matter fields (a plain dict, keys as the Hub expects them)."""
    tags = ["depthpe", "multi-view-depth", "depth-estimation", "model_hub_mixin", "pytorch_model_hub_mixin"]
    pe = info.model_config.get("global_pe")
    if pe:
        tags.append(f"global-pe-{_tag(pe)}")
    tags += [_tag(d) for d in _datasets(info.run_config)]
    tags += [_tag(t) for t in info.extra_tags]
    meta = {"library_name": "depthpe", "pipeline_tag": "depth-estimation", "license": info.license,
            "tags": list(dict.fromkeys(tags))}
    if info.init_weights:
        release = INIT_WEIGHTS[info.init_weights]
        meta["base_model"] = info.init_weights
        meta.update({k: release[k] for k in ("license", "license_name", "license_link") if k in release})
    return meta


def eval_table(summary: dict, metrics=CARD_METRICS) -> str:
    """Markdown table of the ``CARD_MODES`` rows of an evaluation summary (empty string if none)."""
    from .evaluation import format_summary

    rows = {ds: {m: v for m, v in modes.items() if m in CARD_MODES} for ds, modes in (summary or {}).items()}
    rows = {ds: modes for ds, modes in rows.items() if any("n_scenes" in v for v in modes.values())}
    if not rows:
        return ""
    present = [k for k in metrics if any(k in v for modes in rows.values() for v in modes.values())]
    return format_summary(rows, present)


def _training_summary(cfg: dict, model_config: dict) -> list[tuple[str, str]]:
    """(setting, value) rows of the card's training table; settings absent from ``cfg`` are left out."""
    data, optim, train, loss = (cfg.get(k) or {} for k in ("data", "optim", "train", "loss"))

    def row(label: str, template: str, section: dict, *keys: str) -> None:
        if all(section.get(k) is not None for k in keys):
            rows.append((label, template.format(*(section[k] for k in keys))))

    rows = [("global positional encoding", f"`{model_config.get('global_pe')}`")]
    srcs = [f"{s.get('dataset') or s.get('name')} ({s.get('split', 'train')}, weight {s.get('weight', 1.0)})"
            for s in data.get("sources") or []]
    if srcs:
        rows.append(("training data", ", ".join(srcs)))
    row("views per sample", "{0[0]}-{0[1]}", data, "views")
    row("image width", "{} px, height/width in {}", data, "image_width", "aspect")
    row("images per batch (per process)", "{}", data, "max_images_per_batch")
    row("optimizer", "AdamW, lr {}, weight decay {}", optim, "lr", "weight_decay")
    row("schedule", "{}, {} warm-up steps, min lr {}", optim, "schedule", "warmup_steps", "min_lr")
    row("optimizer steps", "{}", train, "steps")
    row("gradient accumulation", "{}", train, "grad_accum")
    row("mixed precision", "{}", train, "mixed_precision")
    row("loss", "L1 x {} + gradient x {} ({} scales)", loss, "l1_weight", "gradient_weight", "gradient_scales")
    row("seed", "{}", cfg, "seed")
    return rows


def _public_config(cfg: dict) -> dict:
    """The run config without local paths (``output_dir``, data ``root``) and the hub section."""
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in ("root", "output_dir", "hub")}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    return strip(cfg)


def render_model_card(info: CardInfo) -> str:
    """The full ``README.md`` text (YAML front matter + markdown body) for ``info``."""
    import yaml
    from huggingface_hub import ModelCardData

    meta = card_metadata(info)
    front = ModelCardData(**meta).to_yaml()
    mc = info.model_config
    pe = mc.get("global_pe", "?")
    title = f"depthpe multi-view depth model (global PE: `{pe}`)"
    if info.final:
        stage = f"Final model of the run{f', after {info.step} optimizer steps' if info.step is not None else ''}."
    elif info.step is not None:
        total = f" of {info.total_steps}" if info.total_steps else ""
        stage = f"Intermediate checkpoint at optimizer step {info.step}{total}."
    else:
        stage = ""
    backbone = mc.get("backbone", "?")
    if mc.get("backbone_blocks"):
        n = mc["backbone_blocks"]
        backbone += f"`, first {n} block{'s' if n != 1 else ''}"
    else:
        backbone += "`"
    lines = [
        "---", front.rstrip("\n"), "---", "", f"# {title}", "",
        f"A VGGT-style multi-view depth model trained with depthpe: a "
        f"frozen DINOv2 backbone (`{backbone}), an aggregator of {mc.get('num_blocks', '?')} frame + "
        f"{mc.get('num_blocks', '?')} global attention blocks ({mc.get('embed_dim', '?')} dims, "
        f"{mc.get('num_heads', '?')} heads) whose global attention uses the `{pe}` positional encoding, "
        "and a DPT depth head. It predicts z-depth for every view of a posed image set.", "",
    ]
    if stage:
        lines += [stage, ""]
    repo = info.repo_id or "<repo_id>"
    rev = f', revision="{info.revision}"' if info.revision else ""
    lines += [
        "## Usage", "", "```python", "from depthpe.model import DepthModel", "",
        f'model = DepthModel.from_pretrained("{repo}"{rev})',
        "# images (S, 3, H, W) RGB in [0, 1], H and W multiples of 14; K (S, 3, 3) pixel intrinsics;",
        "# w2c (S, 3, 4) OpenCV world-to-camera; view 0 is the reference. Depth comes back in your units.",
        "out = model.predict(images, K, w2c)   # out['depth']: (S, H, W)",
        "```", "",
        "Evaluate on held-out scenes:", "", "```bash",
        f"python eval/evaluate.py --model {repo}{f' --revision {info.revision}' if info.revision else ''} "
        "--data DATA_ROOT --out eval_out",
        "```", "",
    ]
    lines += ["## Evaluation", ""]
    table = eval_table(info.eval_summary or {})
    if table:
        if info.eval_note:
            lines += [f"{info.eval_note}.", ""]
        lines += [
            "Rows: `native` = no alignment, in the model's normalized scene unit (headline); `scene_aligned` "
            "= one median scale per scene; `image_aligned` = median scale per image. Metrics are averaged per "
            "scene, then over scenes.", "", table, "",
        ]
    else:
        lines += ["No evaluation results yet.", ""]
    if info.run_config:
        lines += ["## Training", "", "| setting | value |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in _training_summary(info.run_config, mc)]
        lines += ["", "<details><summary>Full training config</summary>", "", "```yaml",
                  yaml.safe_dump(_public_config(info.run_config), sort_keys=False).rstrip("\n"), "```", "",
                  "</details>", ""]
    lines += ["## License", "", f"Weights: `{meta['license']}`"
              + (f" ({meta['license_name']})" if "license_name" in meta else "") + "."]
    if info.init_weights:
        lines += ["", INIT_WEIGHTS[info.init_weights]["note"]]
    lines += ["", "depthpe's code is Apache-2.0; timm's pretrained DINOv2 backbone weights are Apache-2.0.", ""]
    return "\n".join(lines)


def write_model_card(folder: str | Path, info: CardInfo) -> Path:
    """Write ``render_model_card(info)`` to ``folder/README.md`` (replacing any card there)."""
    path = Path(folder) / CARD_NAME
    tmp = path.with_name(f".{CARD_NAME}.tmp")
    tmp.write_text(render_model_card(info), encoding="utf-8")
    tmp.replace(path)
    return path


def card_info_for_folder(folder: str | Path, **fields) -> CardInfo:
    """``CardInfo`` with ``model_config`` read from ``folder/config.json`` and the other ``fields``."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{folder} has no config.json; is it the output of DepthModel.save_pretrained?")
    return CardInfo(model_config=json.loads(path.read_text()), **fields)
