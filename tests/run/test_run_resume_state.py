"""A run's progress besides the weights: the smoothed training metrics (a bias-corrected exponential
moving average, checked against its closed form) and what ``trainer_state.json`` gives back on
resume (step, counters, smoother), both in isolation and through a real resumed ``train`` run."""

from __future__ import annotations

import json
import math

import pytest

from depthpe.run.checkpoints import STATE_FILE
from depthpe.run.state import Smoother, TrainState
from depthpe.run.trainer import train
from tests.helpers.training import run_config


def weighted_mean(values: list[float], beta: float) -> float:
    """The bias-corrected EMA of ``values`` in closed form: sum_i beta^(n-1-i) x_i / sum_i beta^(n-1-i)
    over the finite values (the (1 - beta) factors and the 1 - beta^n correction cancel out)."""
    kept = [v for v in values if math.isfinite(v)]
    w = [beta ** (len(kept) - 1 - i) for i in range(len(kept))]
    return sum(wi * v for wi, v in zip(w, kept)) / sum(w)


def test_smoother_is_the_bias_corrected_moving_average():
    beta = 0.9
    seq_a = [4.0, 1.0, 2.5, math.nan, 3.0, -1.0]
    seq_b = [None, 10.0, math.inf, 12.0, 11.0, 9.0]  # starts one update later; inf is ignored
    smoother = Smoother(beta)
    for n in range(len(seq_a)):
        update = {"a": seq_a[n]}
        if seq_b[n] is not None:
            update["b"] = seq_b[n]
        got = smoother.update(update)
        assert got == smoother.get()
        assert got["a"] == pytest.approx(weighted_mean(seq_a[:n + 1], beta), rel=1e-12), n
        if n >= 1:
            assert got["b"] == pytest.approx(weighted_mean(seq_b[1:n + 1], beta), rel=1e-12), n
    assert Smoother(0.99).update({"x": 5.0}) == {"x": 5.0}  # first value: no pull towards 0


def _state_with_history() -> TrainState:
    state = TrainState(smoothing=0.8, world_size=2)
    for i, loss in enumerate([1.0, 0.7, math.nan, 0.5]):
        state.smoother.update({"loss/total": loss, "lr": 1e-4 * (i + 1)})
    state.step = 4
    state.counters.update(nonfinite_steps=1, redraws=5, skipped_files=3, bad_files=1, images=96)
    state.bad_files["a.h5"] = "truncated"
    state.nonfinite_in_row = 1
    return state


def test_trainer_state_json_restores_step_counters_and_smoother():
    saved = _state_with_history()
    doc = json.loads(json.dumps(saved.to_json()))  # as written to and read from trainer_state.json
    fresh = TrainState(smoothing=0.8, world_size=1)
    fresh.load_json(doc)
    assert fresh.step == 4 and fresh.world_size == 1  # this run's world size is kept
    assert fresh.counters == {"nonfinite_steps": 1, "redraws": 5, "skipped_files": 3, "bad_files": 1, "images": 96}
    assert fresh.bad_files == {"a.h5": "truncated"} and fresh.nonfinite_in_row == 1
    assert fresh.smoother.get() == saved.smoother.get()
    # and it continues exactly like the uninterrupted average
    assert fresh.smoother.update({"loss/total": 0.4}) == saved.smoother.update({"loss/total": 0.4})
    expected = weighted_mean([1.0, 0.7, 0.5, 0.4], 0.8)
    assert fresh.smoother.get()["loss/total"] == pytest.approx(expected, rel=1e-12)


DETERMINISTIC = ("loss/", "lr", "grad_norm")  # smoothed scalars that do not depend on timing


def test_resumed_run_continues_counters_and_smoothed_metrics(synth_root, tmp_path):
    """Resuming at step 1 writes the same checkpoint of step 2 and the same final counters as the
    uninterrupted run: counters and the smoother are restored, not started afresh."""
    out = tmp_path / "run"
    cfg = run_config(synth_root, out, train={"steps": 3, "checkpoint_every": 1})
    final = train(cfg)
    at2 = json.loads((out / "checkpoints" / "step_0000002" / STATE_FILE).read_text())
    final_doc = json.loads((final / STATE_FILE).read_text())
    assert at2["counters"]["images"] > 0 and at2["smoother"]["weights"]

    final = train(cfg, resume=str(out / "checkpoints" / "step_0000001"))
    again = json.loads((out / "checkpoints" / "step_0000002" / STATE_FILE).read_text())
    assert again["step"] == 2 and again["counters"] == at2["counters"]
    assert json.loads((final / STATE_FILE).read_text())["counters"] == final_doc["counters"]
    assert again["smoother"]["weights"] == pytest.approx(at2["smoother"]["weights"], rel=1e-12)
    for key, value in at2["smoother"]["values"].items():
        if key.startswith(DETERMINISTIC):
            assert again["smoother"]["values"][key] == pytest.approx(value, rel=1e-6), key
