"""Helpers of the ``depthpe rmvd --model`` tests: small models on disk (a micro depthpe model with its
training inputs, a small random VGGT-format checkpoint), running the command, reading its outputs,
and a counter of the runner's sample predictions that can fail like a crash."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import torch

import depthpe.rmvd.runner as runner
from depthpe import cli
from tests.helpers.training import micro_model

# A reduced VGGT: the backbone's width is embed_dim (VGGT has no projection), 2 frame + 2 global
# blocks, a DPT head of >= 64 features (VGGT's last hidden conv is 32 wide).
SMALL_VGGT = dict(backbone="vit_small_patch14_reg4_dinov2", backbone_blocks=1, pretrained=False, embed_dim=384,
                  num_blocks=2, num_heads=6, head_features=64, head_out_channels=[16, 32, 64, 64],
                  head_layers=[0, 1, 1, 1])
TRAINED_WIDTH = 28  # training_inputs.json of the micro model: 2 patches high, 2 wide for the 12 x 8 fixture


def save_micro_model(folder: Path, global_pe: str = "rope", seed: int = 0) -> Path:
    """The micro model (random weights, ``seed``) saved with a training_inputs.json of width 28."""
    from depthpe.model.training_inputs import TrainingInputs, write_training_inputs

    torch.manual_seed(seed)
    micro_model(global_pe).save_pretrained(folder)
    write_training_inputs(folder, TrainingInputs(TRAINED_WIDTH, (0.5, 1.0), (2, 3)))
    return folder


def save_small_vggt(folder: Path) -> tuple[Path, Path]:
    """(a random VGGT-format checkpoint of ``SMALL_VGGT`` built by ``depthpe_to_vggt``, the JSON file
    of its config overrides for ``--vggt-overrides``)."""
    from safetensors.torch import save_file

    from depthpe import DepthModel
    from depthpe.model.vggt_weights import depthpe_to_vggt

    torch.manual_seed(0)
    model = DepthModel(SMALL_VGGT, load_backbone_weights=False)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(depthpe_to_vggt(model.state_dict()), str(folder / "model.safetensors"))
    (folder / "overrides.json").write_text(json.dumps(SMALL_VGGT))
    return folder / "model.safetensors", folder / "overrides.json"


def run_rmvd(capsys, *argv) -> tuple[int, str, str]:
    """``depthpe rmvd ARGV --quiet``: (exit status, stdout, stderr)."""
    capsys.readouterr()
    status = cli.main(["rmvd", *map(str, argv), "--quiet"])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def csv_rows(out: Path) -> list[dict]:
    with open(out / "per_sample.csv", newline="") as f:
        return list(csv.DictReader(f))


def depth(out: Path, setting: str | None, sample: str, dataset: str = "toy") -> np.ndarray:
    """A predicted depth map of a ``--model`` run (``setting`` None: a one-setting run)."""
    root = out / "predictions" / (setting or "")
    return np.load(root / dataset / f"{sample}.npy")


class SamplePredictions:
    """Counts the runner's sample predictions; raises ``error`` at call ``fail_at`` (1-based), like a crash."""

    def __init__(self, monkeypatch, fail_at: int | None = None, error=KeyboardInterrupt):
        self.calls, self.fail_at, self.error = 0, fail_at, error
        self._predict = runner.predict_sample
        monkeypatch.setattr(runner, "predict_sample", self)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.fail_at:
            raise self.error()
        return self._predict(*args, **kwargs)
