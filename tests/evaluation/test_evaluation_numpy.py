"""Evaluation numbers against an independent NumPy computation on the synthetic validation scenes:
a model returning the normalized ground truth scores AbsRel 0, one returning twice it scores native
AbsRel exactly 1, and the global-constant baseline is the median of all normalized valid GT with
the AbsRel that NumPy computes for it (per image, then per scene, then over scenes)."""

import numpy as np
import pytest

from depthpe.loader.datasets import SceneEvalDataset
from depthpe.evaluation.heldout import HeldOutProtocol, ViewDraw, InputSize, resolve_held_out
from depthpe.evaluation.loop import EvalOptions, evaluate
from depthpe.evaluation.protocol import discover_sources
from tests.helpers.models import GroundTruthModel

VIEWS, WIDTH = 3, 42




@pytest.fixture(scope="module")
def scenes(synth_root):
    sources = discover_sources(synth_root, "val")
    ds = SceneEvalDataset(sources, views=VIEWS, image_width=WIDTH)
    return sources, [ds[i] for i in range(len(ds))]


def _evaluate(model, sources):
    return evaluate(model, resolve_held_out(sources, HeldOutProtocol(ViewDraw(VIEWS)), InputSize(WIDTH)),
                    EvalOptions(progress=False))


def _numpy_abs_rel(items, predict) -> float:
    """Mean over scenes of the mean over images of mean |pred - gt| / gt over valid pixels."""
    per_scene = []
    for item in items:
        gt, valid = item["depth"].numpy().astype(np.float64), item["valid"].numpy()
        per_image = [np.mean(np.abs(predict(g[v]) - g[v]) / g[v]) for g, v in zip(gt, valid)]
        per_scene.append(np.mean(per_image))
    return float(np.mean(per_scene))


@pytest.mark.parametrize("factor, expected", [(1.0, 0.0), (2.0, 1.0)])
def test_a_model_returning_scaled_ground_truth(scenes, factor, expected):
    sources, items = scenes
    model = GroundTruthModel([it["depth"][None] for it in items], factor)
    native = _evaluate(model, sources).summary["synth"]["native"]
    assert native["abs_rel"] == pytest.approx(expected, abs=1e-6)
    assert native["delta1"] == (1.0 if factor == 1.0 else 0.0)


def test_global_constant_baseline_is_the_median_of_normalized_valid_ground_truth(scenes):
    sources, items = scenes
    model = GroundTruthModel([it["depth"][None] for it in items], 1.0)
    summary = _evaluate(model, sources).summary["synth"]
    values = np.concatenate([it["depth"].numpy()[it["valid"].numpy()] for it in items]).astype(np.float64)
    median = float(np.median(values))
    assert summary["global_constant"]["value"] == pytest.approx(median, rel=3e-4)  # streaming histogram
    expected = _numpy_abs_rel(items, lambda g: np.full_like(g, median))
    assert summary["global_constant"]["abs_rel"] == pytest.approx(expected, rel=1e-3)
    assert summary["native"]["n_scenes"] == len(items)
