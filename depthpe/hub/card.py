"""Model cards (``README.md``) for exported depthpe models, regenerated on every Hub push.

A card has Hub metadata (front matter: ``library_name: depthpe``, ``pipeline_tag: depth-estimation``,
tags naming the global positional encoding and the training datasets, ``datasets`` (Hub names of the
training datasets), ``model-index`` (the evaluation numbers, rendered by huggingface_hub's
``ModelCardData`` / ``EvalResult``), ``license``, ``base_model`` when initialised from released
weights) and a body: what the model is, the input size it was trained at, how to load it, the
latest evaluation table (``native``, ``scene_aligned`` and ``image_aligned`` rows per dataset, as
printed by ``depthpe.evaluation.outputs.format_summary``), the training configuration and the licence.

Everything here is a pure function of a ``CardInfo``; nothing touches the network (the Hub's
metadata validation happens when the card is uploaded). The card knows nothing of the run layer: what
it says about training comes in a ``TrainingSection`` of plain values, which the run layer builds from
its ``RunConfig`` (``depthpe.run.pushes.card_training``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..model.training_inputs import TrainingInputs, read_training_inputs

if TYPE_CHECKING:
    from huggingface_hub import EvalResult, ModelCardData

__all__ = ["licence_problem", "CardInfo", "TrainingSection", "public_location", "INIT_WEIGHTS", "HUB_DATASETS", "CARD_MODES", "INDEX_METRICS", "render_model_card",
           "write_model_card", "card_info_for_folder", "init_weights_release"]

CARD_NAME = "README.md"
DEFAULT_LICENSE = "apache-2.0"
CARD_MODES = ("native", "scene_aligned", "image_aligned")  # evaluation rows shown on the card
CARD_METRICS = ("abs_rel", "delta1", "delta2", "rmse")
INDEX_METRICS = {"abs_rel": "AbsRel", "delta1": "delta1 < 1.25"}  # model-index: type -> name
SYNTH = "synth"  # depthpe's procedural scenes (depthpe.scenes.synth): no published dataset behind them

# Hub names (``datasets:`` metadata) and display names of the datasets depthpe has converters for.
# CO3D and ARKitScenes are distributed by their authors outside the Hub: plain names.
HUB_DATASETS: dict[str, tuple[str, str]] = {
    "co3d": ("co3d", "CO3Dv2"),
    "wildrgbd": ("hongchi/wildrgbd", "WildRGB-D"),
    "arkitscenes": ("arkitscenes", "ARKitScenes"),
    "megasynth": ("hwjiang/MegaSynth", "MegaSynth"),
    SYNTH: (SYNTH, "depthpe synth (procedural scenes)"),
}

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


def init_weights_release(init_from: str | None) -> str | None:
    """``init_from`` (a run's ``model.init_from``) when it names a known release (a key of
    ``INIT_WEIGHTS``, e.g. ``facebook/VGGT-1B``), else None (for a local copy of VGGT-1B set
    ``hub.license`` yourself)."""
    return init_from if init_from in INIT_WEIGHTS else None


@dataclass(frozen=True)
class TrainingSection:
    """What a card says about the training run, as plain values (``depthpe.run.pushes.card_training``
    builds it from a ``RunConfig``).

    datasets: the training datasets' names in config order (tags and ``datasets`` metadata;
        ``synth`` gets a note instead); init_from: the run's ``model.init_from`` (a Hub id, a local
        file or None; a known release sets ``base_model`` and the licence); rows: (setting, value)
        rows of the training table, after the global encoding row that the card takes from
        ``model_config``; config: the run config as a dict (``RunConfig.to_dict()``), shown in full
        without local paths (``root``, ``output_dir``, local weight folders) and without ``hub``.
    """

    datasets: tuple[str, ...] = ()
    init_from: str | None = None
    rows: tuple[tuple[str, str], ...] = ()
    config: dict = field(default_factory=dict)


LICENCE_ID = re.compile(r"[a-z0-9][a-z0-9.+-]{0,63}")


def licence_problem(licence) -> str | None:
    """Why ``licence`` cannot be the ``license`` of a model card, or None. The Hub's licence field takes
    a lowercase id (``apache-2.0``, ``mit``, ``cc-by-nc-4.0``, ... or ``other``): letters, digits, ``.``,
    ``+`` and ``-``, at most 64 characters; a free-text name ("Apache License 2.0") is refused."""
    if not isinstance(licence, str) or not LICENCE_ID.fullmatch(licence):
        hint = f" (did you mean {licence.lower()!r}?)" if isinstance(licence, str) and LICENCE_ID.fullmatch(licence.lower()) else ""
        return (f"{licence!r} is not a Hub licence id{hint}; use a lowercase id such as apache-2.0, mit, "
                "cc-by-4.0 or other")
    return None


@dataclass
class CardInfo:
    """What a model card says. All fields but ``model_config`` are optional.

    model_config: the model's ``config.json`` as a dict (``DepthModelConfig`` fields);
    repo_id / revision: where the card lives (used in the loading snippet; revision = a tag such as
        ``step-0000400`` or a branch, None = the default branch);
    training: what the card says about the training run (``TrainingSection``), None when unknown;
    step / total_steps: optimizer step of these weights and of the whole run; final: the run's
        final model (not an intermediate checkpoint);
    eval_summary: ``EvalResult.summary`` ({dataset: {mode: {metric: value, n_scenes, n_images}}});
    eval_note: where the numbers come from, e.g. "validation at step 400 (2 scenes per dataset)";
    license: SPDX-like Hub licence id of the weights (ignored when ``init_weights`` sets one);
    init_weights: Hub id of released weights the model was initialised from (a key of
        ``INIT_WEIGHTS``, e.g. ``facebook/VGGT-1B``): sets ``base_model``, the licence and a note.
        None = ``init_weights_release(training.init_from)``;
    training_inputs: the input sizes the model was trained at (``training_inputs.json``), if known.
    """

    model_config: dict
    repo_id: str | None = None
    revision: str | None = None
    training: TrainingSection | None = None
    step: int | None = None
    total_steps: int | None = None
    final: bool = False
    eval_summary: dict | None = None
    eval_note: str | None = None
    license: str = DEFAULT_LICENSE
    init_weights: str | None = None
    training_inputs: TrainingInputs | None = None
    extra_tags: list = field(default_factory=list)

    def __post_init__(self):
        if self.training is not None and not isinstance(self.training, TrainingSection):
            raise TypeError(f"CardInfo.training must be a TrainingSection or None, got "
                            f"{type(self.training).__name__} (build it from a RunConfig with "
                            "depthpe.run.pushes.card_training)")
        if self.init_weights is None:
            self.init_weights = init_weights_release(self.training.init_from if self.training else None)
        if self.init_weights is not None and self.init_weights not in INIT_WEIGHTS:
            raise ValueError(
                f"init_weights={self.init_weights!r} is not a known release; known: {sorted(INIT_WEIGHTS)}"
            )


# ------------------------------------------------------------------------------------ metadata
def _datasets(training: TrainingSection | None) -> list[str]:
    """Dataset names of the training sources, in config order, each once."""
    return list(dict.fromkeys(training.datasets)) if training else []


def _hub_datasets(names: list[str]) -> list[str]:
    """``datasets:`` metadata: Hub names where known, plain names otherwise, without ``synth``."""
    return list(dict.fromkeys(HUB_DATASETS.get(n, (n, n))[0] for n in names if n != SYNTH))


def _tag(text) -> str:
    """A Hub tag: lower case, '-' for spaces and '_'; a {qk, vo} encoding pair becomes qk-A-vo-B."""
    if isinstance(text, dict):
        text = "-".join(f"{key}-{value}" for key, value in sorted(text.items()))
    return str(text).strip().lower().replace(" ", "-").replace("_", "-")


def _model_name(info: CardInfo) -> str:
    """Name of the model in ``model-index``: the repository name, else ``depthpe-<global_pe>``."""
    if info.repo_id:
        return info.repo_id.split("/")[-1]
    return f"depthpe-{_tag(info.model_config.get('global_pe', 'model'))}"


def eval_results(summary: dict | None) -> list["EvalResult"]:
    """One huggingface_hub ``EvalResult`` per (dataset, ``CARD_MODES`` row, ``INDEX_METRICS`` metric)
    of an evaluation summary: dataset_type = the depthpe dataset name, metric_config = the row,
    values rounded to 4 decimals as in the table. Rows without scenes and NaN values are left out."""
    from huggingface_hub import EvalResult

    results = []
    for dataset in sorted(summary or {}):
        display = HUB_DATASETS.get(dataset, (dataset, dataset))[1]
        for mode in CARD_MODES:
            row = summary[dataset].get(mode) or {}
            if "n_scenes" not in row:
                continue
            for metric, label in INDEX_METRICS.items():
                value = row.get(metric)
                if value is None or math.isnan(float(value)):
                    continue
                results.append(EvalResult(
                    task_type="depth-estimation", task_name="Multi-view depth estimation", dataset_type=dataset,
                    dataset_name=display, metric_type=metric, metric_value=round(float(value), 4),
                    metric_name=f"{label} ({mode})", metric_config=mode))
    return results


def card_data(info: CardInfo) -> "ModelCardData":
    """The card's front matter as a huggingface_hub ``ModelCardData`` (``model-index`` included)."""
    from huggingface_hub import ModelCardData

    tags = ["depthpe", "multi-view-depth", "depth-estimation", "model_hub_mixin", "pytorch_model_hub_mixin"]
    pe = info.model_config.get("global_pe")
    if pe:
        tags.append(f"global-pe-{_tag(pe)}")
    names = _datasets(info.training)
    tags += [_tag(d) for d in names] + [_tag(t) for t in info.extra_tags]
    licence: dict = {"license": info.license}
    if info.init_weights:
        release = INIT_WEIGHTS[info.init_weights]
        licence = {k: release[k] for k in ("license", "license_name", "license_link") if k in release}
    results = eval_results(info.eval_summary)
    return ModelCardData(
        library_name="depthpe", pipeline_tag="depth-estimation", tags=list(dict.fromkeys(tags)),
        datasets=_hub_datasets(names) or None, base_model=info.init_weights,
        model_name=_model_name(info) if results else None, eval_results=results or None, **licence,
    )


# ------------------------------------------------------------------------------------ body
def eval_table(summary: dict, metrics=CARD_METRICS) -> str:
    """Markdown table of the ``CARD_MODES`` rows of an evaluation summary (empty string if none)."""
    from ..evaluation.outputs import format_summary

    rows = {ds: {m: v for m, v in modes.items() if m in CARD_MODES} for ds, modes in (summary or {}).items()}
    rows = {ds: modes for ds, modes in rows.items() if any("n_scenes" in v for v in modes.values())}
    if not rows:
        return ""
    present = [k for k in metrics if any(k in v for modes in rows.values() for v in modes.values())]
    return format_summary(rows, present)


_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def public_location(value: str) -> str:
    """A Hub id as it is; a local file by its name only (no local paths on a public card)."""
    if _HUB_ID.match(value) and not value.endswith((".pt", ".pth", ".bin", ".safetensors")):
        return value
    return Path(value).name


def _public_config(config: dict) -> dict:
    """A run config dict (``TrainingSection.config``) without local paths (``output_dir``, data
    ``root``; local weight files by name) and without the hub section."""
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in ("root", "output_dir", "hub")}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    doc = strip(config)
    for key in ("init_from", "backbone_weights"):
        if doc.get("model", {}).get(key):
            doc["model"][key] = public_location(doc["model"][key])
    return doc


def _intro_lines(info: CardInfo) -> list[str]:
    """Title, what the model is, which stage of the run and the input size it was trained at."""
    mc = info.model_config
    pe = mc.get("global_pe", "?")
    n = mc.get("backbone_blocks")
    backbone = f"`{mc.get('backbone', '?')}`" + (f", first {n} block{'s' if n != 1 else ''}" if n else "")
    lines = [
        f"# depthpe multi-view depth model (global PE: `{pe}`)", "",
        f"A VGGT-style multi-view depth model trained with depthpe: a frozen DINOv2 backbone ({backbone}), "
        f"an aggregator of {mc.get('num_blocks', '?')} frame + {mc.get('num_blocks', '?')} global attention "
        f"blocks ({mc.get('embed_dim', '?')} dims, {mc.get('num_heads', '?')} heads) whose global attention "
        f"uses the `{pe}` positional encoding, and a DPT depth head. It predicts z-depth for every view of a "
        "posed image set.", "",
    ]
    if info.final:
        lines += [f"Final model of the run{f', after {info.step} optimizer steps' if info.step is not None else ''}.", ""]
    elif info.step is not None:
        lines += [f"Intermediate checkpoint at optimizer step {info.step}"
                  f"{f' of {info.total_steps}' if info.total_steps else ''}.", ""]
    ti = info.training_inputs
    if ti is not None:
        lines += [f"Trained at image width {ti.image_width}, aspect [{ti.aspect[0]:g}, {ti.aspect[1]:g}] "
                  f"(height / width), views [{ti.views[0]}, {ti.views[1]}] per sample "
                  "(`training_inputs.json`; `depthpe eval` defaults to these).", ""]
    return lines


def _usage_lines(info: CardInfo) -> list[str]:
    """Loading snippet and evaluation command."""
    repo = info.repo_id or "<repo_id>"
    rev = f', revision="{info.revision}"' if info.revision else ""
    return [
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


def _evaluation_lines(info: CardInfo) -> list[str]:
    """The evaluation section: note, how to read the rows, the table (or "no results yet")."""
    lines = ["## Evaluation", ""]
    table = eval_table(info.eval_summary or {})
    if not table:
        return lines + ["No evaluation results yet.", ""]
    if info.eval_note:
        lines += [f"{info.eval_note}.", ""]
    return lines + [
        "Rows: `native` = no alignment, in the model's normalized scene unit (headline); `scene_aligned` "
        "= one median scale per scene; `image_aligned` = median scale per image. Metrics are averaged per "
        "scene, then over scenes.", "", table, "",
    ]


def _training_lines(info: CardInfo) -> list[str]:
    """The training section: summary table, synth note, full config (no local paths)."""
    import yaml

    training = info.training
    if training is None:
        return []
    rows = [("global positional encoding", f"`{info.model_config.get('global_pe')}`"), *training.rows]
    lines = ["## Training", "", "| setting | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    lines.append("")
    if SYNTH in _datasets(training):
        lines += ["`synth` is depthpe's built-in procedural scenes (`depthpe synth`, `depthpe.scenes.synth`), "
                  "not a published dataset, so it is not listed in the `datasets` metadata.", ""]
    lines += ["<details><summary>Full training config</summary>", "", "```yaml",
              yaml.safe_dump(_public_config(training.config), sort_keys=False).rstrip("\n"), "```", "", "</details>", ""]
    return lines


def _license_lines(info: CardInfo, meta: dict) -> list[str]:
    lines = ["## License", "", f"Weights: `{meta['license']}`"
             + (f" ({meta['license_name']})" if "license_name" in meta else "") + "."]
    if info.init_weights:
        lines += ["", INIT_WEIGHTS[info.init_weights]["note"]]
    return lines + ["", "depthpe's code is Apache-2.0; timm's pretrained DINOv2 backbone weights are Apache-2.0.", ""]


def render_model_card(info: CardInfo) -> str:
    """The full ``README.md`` text (YAML front matter + markdown body) for ``info``."""
    data = card_data(info)
    lines = ["---", data.to_yaml().rstrip("\n"), "---", ""]
    lines += _intro_lines(info) + _usage_lines(info) + _evaluation_lines(info) + _training_lines(info)
    lines += _license_lines(info, data.to_dict())
    return "\n".join(lines)


def write_model_card(folder: str | Path, info: CardInfo) -> Path:
    """Write ``render_model_card(info)`` to ``folder/README.md`` atomically (replacing any card there)."""
    from ..files import atomic_write_bytes

    return atomic_write_bytes(Path(folder) / CARD_NAME, render_model_card(info).encode("utf-8"))


def card_info_for_folder(folder: str | Path, **fields) -> CardInfo:
    """``CardInfo`` with ``model_config`` read from ``folder/config.json``, ``training_inputs`` from
    ``folder/training_inputs.json`` (when present and not given) and the other ``fields``."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{folder} has no config.json; is it the output of DepthModel.save_pretrained?")
    fields.setdefault("training_inputs", read_training_inputs(folder))
    return CardInfo(model_config=json.loads(path.read_text()), **fields)
