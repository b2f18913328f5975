"""One inference path (depthpe.model.inference.predict_depth): `depthpe predict`, evaluation and
DepthModel.predict give bit-identical depth for the same views."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import depthpe
from depthpe.evaluation import loop as evaluation
from depthpe.evaluation.heldout import HeldOutProtocol, ViewDraw, InputSize, resolve_held_out
from depthpe.cli import main
from depthpe.loader.config import SourceConfig
from depthpe.geometry import DegenerateSceneError
from depthpe.model import DepthModel
from depthpe.model.training_inputs import read_training_inputs
from tests.helpers.training import micro_model


def _as_model_input(frames):
    """(images (S, 3, H, W) float in [0, 1], K (S, 3, 3), w2c (S, 3, 4) float64) of prepared frames."""
    images = torch.from_numpy(np.stack([f.image for f in frames])).permute(0, 3, 1, 2).float() / 255
    K = torch.as_tensor(np.stack([f.K for f in frames]), dtype=torch.float32)
    w2c = torch.as_tensor(np.stack([f.w2c for f in frames]), dtype=torch.float64)
    return images, K, w2c


def test_predict_command_equals_depthmodel_predict(model_dir, inputs, tmp_path):
    out = tmp_path / "pred"
    assert main(["predict", "--model", str(model_dir), "--images", str(inputs / "images"), "--cameras",
                 str(inputs / "cams.json"), "--out", str(out), "--max-views", "4"]) == 0
    result = depthpe.predict(model_dir, inputs / "images", inputs / "cams.json", max_views=4)
    model = DepthModel.from_pretrained(model_dir).eval()
    reference = read_training_inputs(model_dir).scale_reference
    direct = model.predict(*_as_model_input(result.frames), scale_reference=reference)["depth"].numpy()
    for i, frame in enumerate(result.frames):
        written = np.load(out / f"{frame.name.rsplit('.', 1)[0]}_depth.npy")
        assert written.dtype == np.float32 and np.array_equal(written, direct[i]), frame.name


def test_evaluation_goes_through_predict_depth(model_dir, synth_root, monkeypatch):
    calls = []
    real = evaluation.predict_depth

    def recording(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append((args, kwargs, out))
        return out

    monkeypatch.setattr(evaluation, "predict_depth", recording)
    model = DepthModel.from_pretrained(model_dir).eval()
    held_out = resolve_held_out([SourceConfig(name="synth", root=str(synth_root), split="val")],
                                HeldOutProtocol(ViewDraw(3), max_scenes=1), InputSize(42))
    result = evaluation.evaluate(model, held_out, evaluation.EvalOptions(progress=False))
    assert len(calls) == 1 and result.summary["synth"]["native"]["n_scenes"] == 1
    (_, images, K, w2c), kwargs, out = calls[0]
    assert kwargs["scale"] == 1.0  # the dataset normalized the scene already
    again = model.predict(images, K, w2c, scale=1.0)
    assert torch.equal(again["depth"], out["depth"]) and torch.equal(again["conf"], out["conf"])


def test_one_error_type_for_cameras_that_do_not_move():
    model = micro_model("prope")
    images = torch.rand(2, 3, 28, 42)
    K = torch.tensor([[40.0, 0, 21], [0, 40, 14], [0, 0, 1]]).expand(2, 3, 3)
    still = torch.eye(4)[:3].expand(2, 3, 4)
    with pytest.raises(DegenerateSceneError, match="scale="):
        model.predict(images, K, still)
    from depthpe.config import ConfigError
    from depthpe.prediction.api import run_views

    frames = (images.permute(0, 2, 3, 1).numpy() * 255).astype(np.uint8)
    with pytest.raises(ConfigError, match="unusable input for the model: .*no scale"):
        run_views(model, frames, K.numpy(), still.numpy())
