"""``loss.correspondence_weight``: training adds the correspondence term of the global attention to the
depth loss (``depthpe.run.step``, ``depthpe.run.correspondence``), on the analytic stereo pair of
tests/geometry/test_correspondence.py (28 x 56 px, every match two patches to the left)."""

from __future__ import annotations

import copy

import pytest
import torch

from depthpe.config import ConfigError
from depthpe.geometry import cyclic_pairs, pair_targets, patch_matches, query_patches
from depthpe.model import DepthModel
from depthpe.model.attention_hooks import record_global_scores
from depthpe.run import RunConfig
from depthpe.run.correspondence import forward_with_correspondence
from depthpe.run.losses import correspondence_loss, depth_loss
from depthpe.run.state import TrainState
from depthpe.run.step import run_step
from tests.helpers.training import MICRO_MODEL

H, W, GRID = 28, 56, (2, 4)


@pytest.fixture(scope="module")
def accelerator():
    from accelerate import Accelerator

    return Accelerator(cpu=True)


def _config(weight: float, **model) -> RunConfig:
    return RunConfig.from_dict({
        "model": {**MICRO_MODEL, **model},
        "optim": {"lr": 0.01, "warmup_steps": 0, "schedule": "constant", "grad_clip": 1e9},
        "loss": {"correspondence_weight": weight, "correspondence_queries": 3},
        "train": {"steps": 10, "cpu": True},
    })


def _batch() -> dict:
    g = torch.Generator().manual_seed(0)
    K = torch.tensor([[56.0, 0, (W - 1) / 2], [0, 56.0, (H - 1) / 2], [0, 0, 1]]).expand(1, 2, 3, 3)
    w2c = torch.eye(4).repeat(1, 2, 1, 1)
    w2c[0, 1, 0, 3] = -1.0
    depth = torch.full((1, 2, H, W), 2.0)
    return {"images": torch.rand(1, 2, 3, H, W, generator=g), "K": K, "w2c": w2c, "depth": depth,
            "valid": depth > 0, "redraws": 0, "skipped_files": 0, "bad_files": []}


def _model(cfg: RunConfig) -> DepthModel:
    torch.manual_seed(0)
    return DepthModel(cfg.model_config(), load_backbone_weights=False).train()


def test_the_step_adds_the_weighted_correspondence_term(accelerator):
    cfg = _config(0.5)
    model, batch = _model(cfg), _batch()
    ref = copy.deepcopy(model)
    x = [batch[k] for k in ("images", "K", "w2c", "depth", "valid")]
    out, corr = forward_with_correspondence(ref, lambda: ref(*x[:3]), x[3], x[4], x[1], x[2], GRID,
                                            pairs=cyclic_pairs(2), patches=query_patches(8, 3, 0))
    depth_total = depth_loss(out["depth"], x[3], x[4])["total"]
    state = TrainState(cfg.train.smoothing)
    result = run_step(model, torch.optim.SGD(model.parameters(), lr=1.0), iter([batch]), cfg, state, accelerator)
    corr, depth_total = corr.item(), depth_total.item()
    assert result.terms["correspondence"] == pytest.approx(corr, rel=1e-5)
    assert result.terms["total"] == pytest.approx(depth_total + 0.5 * corr, rel=1e-5)
    assert corr > 0


def test_the_term_is_the_mean_over_the_global_layers_not_their_sum():
    model, batch = _model(_config(1.0)), _batch()
    images, K, w2c, depth, valid = (batch[k] for k in ("images", "K", "w2c", "depth", "valid"))
    pairs, patches = cyclic_pairs(2), query_patches(8, 3, 0)
    with torch.no_grad():
        _, corr = forward_with_correspondence(model, lambda: model(images, K, w2c), depth, valid, K, w2c, GRID,
                                              pairs=pairs, patches=patches)
        with record_global_scores(model, GRID, pairs, patches) as scores:
            model(images, K, w2c)
        target = pair_targets(patch_matches(depth, valid, K, w2c, GRID), pairs, patches)
        layers = [correspondence_loss(scores[i], target).item() for i in sorted(scores)]
    assert len(layers) == MICRO_MODEL["num_blocks"] and len(set(layers)) > 1 and min(layers) > 0
    assert corr.item() == pytest.approx(sum(layers) / len(layers), rel=1e-6)


def test_off_by_default_and_refused_with_compile(accelerator):
    cfg = _config(0.0)
    result = run_step(_model(cfg), torch.optim.SGD(_model(cfg).parameters(), lr=0.0), iter([_batch()]), cfg,
                      TrainState(cfg.train.smoothing), accelerator)
    assert "correspondence" not in result.terms and RunConfig().loss.correspondence_weight == 0
    with pytest.raises(ConfigError, match="train.compile=false"):
        RunConfig.from_dict({"loss": {"correspondence_weight": 1.0}, "train": {"compile": True}})
    with pytest.raises(ConfigError, match="correspondence_queries must be >= 1"):
        RunConfig.from_dict({"loss": {"correspondence_queries": 0}})


def test_refused_with_gradient_checkpointing():
    """The scores are kept for the backward, which checkpointed blocks recompute without them."""
    with pytest.raises(ConfigError, match="model.gradient_checkpointing=false"):
        _config(1.0, gradient_checkpointing=True)
    assert _config(0.0, gradient_checkpointing=True).model.gradient_checkpointing
