"""One optimizer step (``depthpe.run.step.run_step``) against a hand-computed update, in process with a
tiny convolution as the model (seconds, no data set, no ``accelerate launch``).

The expected update is computed here independently of ``run_step``: the loss of every micro-batch
with the config's loss weights (``depth_loss`` called directly), their mean, its gradient by
``torch.autograd.grad`` on a copy of the model, and plain SGD (``p - lr * g``). This pins: the loss
config reaching the step (``loss.l1_weight``, ``loss.gradient_scales``), the division of the loss by
``train.grad_accum``, gradients accumulated over (not reset between) micro-batches, and the
non-finite streak that a good step resets.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from depthpe.run.losses import depth_loss
from depthpe.run import RunConfig
from depthpe.run.state import TrainState
from depthpe.run.step import NonFiniteError, run_step

B, S, H, W = 2, 2, 16, 16
LR = 0.05


class TinyDepth(torch.nn.Module):
    """(B, S, 3, H, W) images -> {"depth": (B, S, H, W)} positive depth; K and w2c are ignored."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 1, 3, padding=1)

    def forward(self, images, K, w2c):
        b, s = images.shape[:2]
        d = self.conv(images.flatten(0, 1)).view(b, s, *images.shape[-2:])
        return {"depth": torch.nn.functional.softplus(d) + 0.1}


@pytest.fixture(scope="module")
def accelerator():
    from accelerate import Accelerator

    return Accelerator(cpu=True)


def _config(**train) -> RunConfig:
    """Non-default loss weights (so that a dropped one shows), no warm-up (lr = LR), no clipping."""
    return RunConfig.from_dict({
        "optim": {"lr": LR, "min_lr": 0.0, "warmup_steps": 0, "schedule": "constant", "grad_clip": 1e9},
        "loss": {"l1_weight": 0.37, "gradient_weight": 0.8, "gradient_scales": 2},
        "train": {"steps": 100, "cpu": True, **train},
    })


def _batch(seed: int, nan: bool = False) -> dict:
    """One micro-batch of random images and a smooth positive target (NaN images when ``nan``)."""
    g = torch.Generator().manual_seed(seed)
    images = torch.rand(B, S, 3, H, W, generator=g)
    if nan:
        images[0, 0, 0, 0, 0] = math.nan
    ramp = torch.linspace(0.5, 2.0, W).expand(H, W)
    depth = (ramp * (1 + torch.rand(B, S, 1, 1, generator=g))).contiguous()
    return {"images": images, "K": torch.eye(3).expand(B, S, 3, 3), "w2c": torch.eye(4)[:3].expand(B, S, 3, 4),
            "depth": depth, "valid": torch.ones(B, S, H, W, dtype=torch.bool), "redraws": 1, "skipped_files": 0,
            "bad_files": []}


def _model_and_optimizer(seed: int = 0):
    torch.manual_seed(seed)
    model = TinyDepth()
    return model, torch.optim.SGD(model.parameters(), lr=123.0)  # run_step sets the lr of the step


def _expected(model, batches, loss_cfg, **loss_kw):
    """(mean loss terms, mean gradient per parameter) of ``batches`` with the loss weights of
    ``loss_cfg`` (overridden by ``loss_kw``), computed directly on a copy of ``model``."""
    ref = copy.deepcopy(model)
    weights = dict(l1_weight=loss_cfg.l1_weight, gradient_weight=loss_cfg.gradient_weight,
                   gradient_scales=loss_cfg.gradient_scales, conf_weight=loss_cfg.conf_weight,
                   conf_alpha=loss_cfg.conf_alpha)
    weights.update(loss_kw)
    per_batch = [depth_loss(ref(b["images"], b["K"], b["w2c"])["depth"], b["depth"], b["valid"], **weights)
                 for b in batches]
    terms = {k: sum(t[k] for t in per_batch) / len(per_batch) for k in per_batch[0]}
    grads = torch.autograd.grad(terms["total"], list(ref.parameters()))
    return {k: v.item() for k, v in terms.items()}, grads


def _step(cfg, model, optimizer, batches, accelerator, state=None):
    state = state or TrainState(cfg.train.smoothing)
    before = [p.detach().clone() for p in model.parameters()]
    result = run_step(model, optimizer, iter(batches), cfg, state, accelerator)
    return result, state, before


def test_loss_config_reaches_the_training_step(accelerator):
    """The logged terms and the update use loss.l1_weight and loss.gradient_scales of the config."""
    cfg = _config()
    model, optimizer = _model_and_optimizer()
    batches = [_batch(1)]
    terms, grads = _expected(model, batches, cfg.loss)
    default_terms, _ = _expected(model, batches, cfg.loss, l1_weight=1.0, gradient_scales=4)
    # the test can tell: the config's weights give other terms than the defaults
    assert abs(terms["grad"] - default_terms["grad"]) > 1e-3 * abs(terms["grad"])
    assert abs(terms["total"] - default_terms["total"]) > 1e-3 * abs(terms["total"])
    result, _, before = _step(cfg, model, optimizer, batches, accelerator)
    for k in ("total", "l1", "grad"):
        assert result.terms[k] == pytest.approx(terms[k], rel=1e-6), k
    for p, p0, g in zip(model.parameters(), before, grads):
        torch.testing.assert_close(p.detach(), p0 - LR * g, rtol=1e-5, atol=1e-7)


def test_accumulated_step_applies_the_mean_gradient_of_its_micro_batches(accelerator):
    """grad_accum=3: the update is -lr * (mean of the 3 micro-batch gradients), i.e. each loss is
    divided by grad_accum and gradients add up over the micro-batches (none is dropped); the
    reported norm is that of the mean gradient, the terms are the mean terms, counters add up."""
    cfg = _config(grad_accum=3)
    model, optimizer = _model_and_optimizer()
    batches = [_batch(1), _batch(2), _batch(3)]
    terms, grads = _expected(model, batches, cfg.loss)
    _, last_only = _expected(model, batches[-1:], cfg.loss)
    assert any((g - h).abs().max() > 1e-3 * g.abs().max() for g, h in zip(grads, last_only))  # batches differ
    result, state, before = _step(cfg, model, optimizer, batches, accelerator)
    assert result.lr == LR and not result.skipped
    assert result.grad_norm == pytest.approx(torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads])).item(),
                                             rel=1e-5)
    for k in ("total", "l1", "grad"):
        assert result.terms[k] == pytest.approx(terms[k], rel=1e-6), k
    for p, p0, g in zip(model.parameters(), before, grads):
        torch.testing.assert_close(p.detach(), p0 - LR * g, rtol=1e-5, atol=1e-7)
    assert state.step == 1 and state.counters["images"] == 3 * B * S and state.counters["redraws"] == 3
    assert all(p.grad is None for p in model.parameters())  # cleared for the next step


def test_a_good_step_resets_the_nonfinite_streak(accelerator):
    """max_nonfinite_in_row=2: bad, good, bad, good, bad never stops (each good step resets the
    streak); two bad steps in a row do. Skipped steps leave the weights alone."""
    cfg = _config(max_nonfinite_in_row=2)
    model, optimizer = _model_and_optimizer()
    state = TrainState(cfg.train.smoothing)
    streaks, skipped = [], []
    for i, bad in enumerate([True, False, True, False, True]):
        result, _, before = _step(cfg, model, optimizer, [_batch(10 + i, nan=bad)], accelerator, state)
        streaks.append(state.nonfinite_in_row)
        skipped.append(result.skipped)
        moved = any(not torch.equal(p.detach(), p0) for p, p0 in zip(model.parameters(), before))
        assert moved != bad, i
        assert math.isnan(result.grad_norm) == bad, i
    assert streaks == [1, 0, 1, 0, 1] and skipped == [True, False, True, False, True]
    assert state.counters["nonfinite_steps"] == 3 and state.step == 5
    with pytest.raises(NonFiniteError, match="2 optimizer steps in a row"):
        _step(cfg, model, optimizer, [_batch(20, nan=True)], accelerator, state)
