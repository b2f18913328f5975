"""The table of a camera-noise sweep (depthpe.analysis.noise_sweep.sweep_result) on evaluation
folders written by hand with known per-scene AbsRel: "vs first level" compares each group with its
own first level, and noise that makes an encoding worse gives a positive difference."""

import pytest

from depthpe.analysis.compare import resolve_input
from depthpe.analysis.noise_sweep import NoiseSweep, sweep_result
from tests.helpers.compare import SCENES, write_run

LEVELS = [{"rotation_deg": 0.0, "translation": 0.0, "focal": 0.0}, {"rotation_deg": 5.0, "translation": 0.1, "focal": 0.1}]


def _sweep(root) -> NoiseSweep:
    """rope (the reference): the same AbsRel at both levels; prope: 0.25 worse than rope at level 0
    and 1.0 worse again at level 1 (per scene, both images alike)."""
    rope = {scene: 2.0 + 0.5 * i for i, scene in enumerate(SCENES)}
    prope = [{scene: value + 0.25 + level for scene, value in rope.items()} for level in (0, 1)]
    evals = []
    for level in (0, 1):
        items = []
        for pe, values in (("rope", rope), ("prope", prope[level])):
            run = write_run(root, f"{pe}_level{level}", seed=0, config={"model.global_pe": pe}, summary={},
                            images={scene: [v, v] for scene, v in values.items()})
            items.append(resolve_input(str(run / "eval")))
        evals.append(items)
    return NoiseSweep([root], LEVELS, 0, evals)


def test_vs_first_level_is_each_groups_own_first_level_with_worse_positive(tmp_path):
    result = sweep_result(_sweep(tmp_path), n_boot=50)
    assert result["reference"] == "rope"
    table = result["datasets"]["synth"]
    assert table["prope"][0]["vs_first_level"]["mean"] == pytest.approx(0.0)  # itself, not rope
    assert table["prope"][1]["vs_first_level"]["mean"] == pytest.approx(1.0)  # worse with noise: > 0
    assert table["rope"][1]["vs_first_level"]["mean"] == pytest.approx(0.0)
    assert table["prope"][0]["vs_reference"]["mean"] == pytest.approx(0.25)
    assert table["prope"][1]["vs_reference"]["mean"] == pytest.approx(1.25)
