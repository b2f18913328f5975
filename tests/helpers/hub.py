"""Hub test helpers: a fake token, pointing this process at a fake Hub, and run/model folders made by hand."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from depthpe.model.training_inputs import TrainingInputs, write_training_inputs
from depthpe.run.loading import dump_run_config
from depthpe.run.schema import RunConfig
from depthpe.run.validation import write_val_summary
from tests.helpers.hub_server import FakeHub

TOKEN = "hf_secret_TOKEN_1234567890"
INPUTS = TrainingInputs(image_width=84, aspect=(0.5, 1.0), views=(4, 8))

SUMMARY = {
    "co3d": {"native": {"abs_rel": 0.1234, "delta1": 0.9, "n_scenes": 3, "n_images": 12},
             "scene_aligned": {"abs_rel": 0.1, "delta1": 0.92, "n_scenes": 3, "n_images": 12},
             "image_aligned": {"abs_rel": 0.09, "delta1": 0.93, "n_scenes": 3, "n_images": 12},
             "global_constant": {"abs_rel": 0.5, "delta1": 0.3, "n_scenes": 3, "n_images": 12, "value": 2.0}},
}


def point_in_process(monkeypatch, hub: FakeHub, cache: Path) -> None:
    """Point this process's huggingface_hub at ``hub`` (online, fake token, private cache)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_TOKEN", TOKEN)


_MICRO_PROPE: dict = {}  # the micro PRoPE model's config and state dict, built once


def _micro_prope() -> tuple:
    """(DepthModelConfig, state dict) of the micro PRoPE model (random weights, seed 0)."""
    if not _MICRO_PROPE:
        from depthpe.model import DepthModel, DepthModelConfig
        from tests.helpers.training import MICRO_MODEL

        torch.manual_seed(0)
        config = DepthModelConfig.from_preset("tiny", **{k: v for k, v in MICRO_MODEL.items() if k != "preset"},
                                              global_pe="prope")
        _MICRO_PROPE.update(config=config, state=DepthModel(config, load_backbone_weights=False).state_dict())
    return _MICRO_PROPE["config"], _MICRO_PROPE["state"]


def model_folder(path: Path, seed: int = 0, inputs: TrainingInputs | None = None) -> Path:
    """An exported model folder of the micro PRoPE model (``depthpe push`` checks that it loads) whose
    weights differ by ``seed`` (one bias), so that folders of different seeds differ byte for byte;
    ``inputs``: also training_inputs.json."""
    from safetensors.torch import save_file

    path.mkdir(parents=True)
    config, state = _micro_prope()
    config.to_json(path / "config.json")
    state = dict(state)
    bias = "depth_head.scratch.output_conv2.2.bias"
    state[bias] = state[bias] + float(seed)
    save_file({k: v.contiguous() for k, v in state.items()}, str(path / "model.safetensors"), metadata={"format": "pt"})
    (path / "README.md").write_text("---\nlicense: apache-2.0\n---\ncard\n")
    if inputs is not None:
        write_training_inputs(path, inputs)
    return path


def typed_run_config(*overrides: str, sources=None) -> RunConfig:
    """A ``RunConfig`` as training would have it (local paths in it, hub section set)."""
    sources = sources or [{"name": "co3d", "root": "/home/alice/data", "split": "train", "weight": 1.0},
                          {"name": "mega", "dataset": "megasynth", "root": "/d", "split": "train"}]
    doc = {"output_dir": "/home/alice/runs/x", "seed": 3, "model": {"preset": "tiny", "global_pe": "prope"},
           "data": {"sources": sources, "views": [2, 8], "image_width": 518},
           "optim": {"lr": 1e-4, "schedule": "constant"}, "train": {"steps": 240000}, "hub": {"repo_id": "alice/x"}}
    return RunConfig.from_dict(doc, overrides)


def hand_made_run(tmp_path: Path) -> Path:
    """A run folder as training leaves it: config.yaml, val_summary.json, final/ with training_inputs.json."""
    run = tmp_path / "runs" / "x"
    model_folder(run / "final", inputs=INPUTS)
    (run / "final" / "trainer_state.json").write_text(json.dumps({"step": 5}))
    (run / "config.yaml").write_text(dump_run_config(typed_run_config("train.steps=5")))
    write_val_summary(run, 5, SUMMARY, scenes=3, views=4)
    return run
