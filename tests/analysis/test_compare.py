"""``depthpe compare``: evaluation folders written by hand with known numbers, checked against NumPy."""

import json
import math

import numpy as np
import pytest

from depthpe.cli import main
from depthpe.analysis.compare import bootstrap_interval, paired_comparison, run_compare
from depthpe.config import ConfigError
from tests.helpers.compare import GROUPS, MANIFEST, SCENES, SEEDS, scene_means, write_run







def evals(numbers, groups=GROUPS):
    return [str(numbers[(g, s)]["eval"]) for g in groups for s in SEEDS]


def test_mean_std_and_baseline_ratios_match_numpy(study):
    _, numbers = study
    result, markdown, meta = run_compare(evals(numbers), n_boot=200)
    for pe in GROUPS:
        stats = result["datasets"]["synth"][pe]["stats"]
        assert result["datasets"]["synth"][pe]["n_seeds"] == 3
        per = [numbers[(pe, s)]["summary"] for s in SEEDS]
        for name, row, metric in (("native_abs_rel", "native", "abs_rel"), ("scene_aligned_delta1", "scene_aligned", "delta1")):
            values = np.array([p[row][metric] for p in per])
            assert stats[name]["mean"] == pytest.approx(values.mean(), rel=1e-12)
            assert stats[name]["std"] == pytest.approx(values.std(ddof=1), rel=1e-12)
        for name, base in (("ratio_global_constant", "global_constant"), ("ratio_scene_constant", "scene_constant")):
            ratios = np.array([p["native"]["abs_rel"] / p[base]["abs_rel"] for p in per])
            assert stats[name]["mean"] == pytest.approx(ratios.mean(), rel=1e-12)
            assert stats[name]["std"] == pytest.approx(ratios.std(ddof=1), rel=1e-12)
        mean, std = stats["native_abs_rel"]["mean"], stats["native_abs_rel"]["std"]
        assert f"| {pe} | 3 | {mean:.4f} ± {std:.4f} |" in markdown
    assert meta["same_manifest"] and result["reference"] == "rope"


def expected_scene_values(numbers, pe):
    """Per scene (in SCENES order): mean over images, then mean over seeds (NumPy, from the numbers written)."""
    return np.array(list(scene_means(numbers, pe).values()))


def test_paired_difference_and_bootstrap_interval(study):
    _, numbers = study
    result, markdown, _ = run_compare(evals(numbers), n_boot=10_000, seed=3)
    paired = result["datasets"]["synth"]["prope"]["paired"]
    diffs = expected_scene_values(numbers, "prope") - expected_scene_values(numbers, "rope")
    assert paired["n_scenes"] == 5
    assert paired["mean"] == pytest.approx(diffs.mean(), abs=1e-12)
    assert paired["low"] <= diffs.mean() <= paired["high"]
    assert diffs.min() <= paired["low"] and paired["high"] <= diffs.max()
    assert paired["excludes_zero"] and paired["low"] > 0.03  # prope is worse by about 0.05
    assert "| yes |" in markdown and "(reference)" in markdown
    # scene-aligned rows are paired on their own: every image has scene-aligned AbsRel 9.0 in the fixture
    aligned = result["datasets"]["synth"]["prope"]["paired_scene_aligned"]
    assert (aligned["n_scenes"], aligned["mean"], aligned["excludes_zero"]) == (5, 0.0, False)
    assert "Δ scene-aligned AbsRel vs ref." in markdown and "| +0.0000 | [+0.0000, +0.0000] (5 scenes) | no |" in markdown
    again, _, _ = run_compare(evals(numbers), n_boot=10_000, seed=3)
    assert again["datasets"]["synth"]["prope"]["paired"] == paired  # seeded
    # the reference compared with itself: difference 0 and interval [0, 0]
    ref = result["datasets"]["synth"]["rope"]["paired"]
    assert ref["mean"] == 0 and (ref["low"], ref["high"]) == (0, 0) and not ref["excludes_zero"]
    flipped, _, _ = run_compare(evals(numbers), reference="prope", n_boot=10_000, seed=3)
    assert flipped["datasets"]["synth"]["rope"]["paired"]["mean"] == pytest.approx(-diffs.mean(), abs=1e-12)


def test_bootstrap_interval_against_normal_theory():
    rng = np.random.default_rng(0)
    diffs = rng.normal(0.1, 1.0, size=400)
    low, high = bootstrap_interval(diffs, n=10_000, seed=0)
    half = 1.96 * diffs.std(ddof=1) / math.sqrt(diffs.size)
    assert low == pytest.approx(diffs.mean() - half, abs=0.15 * half)
    assert high == pytest.approx(diffs.mean() + half, abs=0.15 * half)
    assert bootstrap_interval([0.2] * 7, n=500) == (pytest.approx(0.2), pytest.approx(0.2))
    same = {f"s{i}": float(v) for i, v in enumerate(diffs[:20])}
    assert paired_comparison(same, same, n_boot=1000) == {"n_scenes": 20, "mean": 0.0, "low": 0.0, "high": 0.0,
                                                           "excludes_zero": False}


def _hand_written_interval(diffs, n, seed, level=0.95, chunk=1000):
    """The percentile bootstrap depthpe computed by hand before it used scipy.stats.bootstrap."""
    arr = np.asarray(diffs, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = [arr[rng.integers(0, arr.size, size=(min(chunk, n - start), arr.size))].mean(axis=1)
             for start in range(0, n, chunk)]
    return tuple(float(q) for q in np.quantile(np.concatenate(means), [(1 - level) / 2, (1 + level) / 2]))


@pytest.mark.parametrize("size, n, seed", [(2, 500, 0), (16, 10_000, 0), (48, 10_000, 3), (7, 2_500, 1)])
def test_scipy_bootstrap_gives_the_numbers_of_the_hand_written_one(size, n, seed):
    diffs = np.random.default_rng(size).normal(0.05, 0.3, size=size)
    assert bootstrap_interval(diffs, n=n, seed=seed) == _hand_written_interval(diffs, n, seed)
    assert bootstrap_interval([0.3], n=100) == (0.3, 0.3) and all(map(math.isnan, bootstrap_interval([], n=100)))


def test_different_manifests_are_refused(study, tmp_path, capsys):
    root, numbers = study
    other = {**MANIFEST, f"synth/{SCENES[0]}": [0, 1, 2]}
    images = {s: [0.4, 0.4] for s in SCENES[:3]}
    odd = write_run(tmp_path, "gta_s0", seed=0, config={"model.global_pe": "gta"}, summary={}, images=images,
                    manifest=other)
    inputs = [str(numbers[("rope", 0)]["eval"]), str(odd / "eval")]
    with pytest.raises(ConfigError, match="different manifests.*other frames in 1 scene"):
        run_compare(inputs)
    assert main(["compare", *inputs]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "--allow-different-manifests" in err and "\n" not in err
    result, markdown, meta = run_compare(inputs, allow_different_manifests=True, n_boot=100)
    assert not meta["same_manifest"] and "DIFFERENT" in markdown
    assert result["datasets"]["synth"]["gta"]["paired"]["n_scenes"] == 3  # the common scenes


def test_group_by_another_key_and_mixed_groups_refused(tmp_path):
    images = {s: [0.3, 0.3] for s in SCENES}
    for lr in (1e-3, 1e-4):
        for seed in (0, 1):
            write_run(tmp_path, f"lr{lr}_s{seed}", seed=seed, config={"optim.lr": lr}, summary={}, images=images)
    inputs = [str(tmp_path / f"lr{lr}_s{seed}") for lr in (1e-3, 1e-4) for seed in (0, 1)]  # run folders
    result, markdown, _ = run_compare(inputs, group_by="optim.lr", n_boot=100)
    assert list(result["datasets"]["synth"]) == ["0.001", "0.0001"]
    assert result["datasets"]["synth"]["0.0001"]["seeds"] == [0, 1]
    with pytest.raises(ConfigError, match=r"differ in optim\.lr .*not only in the seed"):
        run_compare(inputs)  # all "rope": one group whose runs differ in optim.lr
    with pytest.raises(ConfigError, match="no such key.*did you mean 'optim.lr'"):
        run_compare(inputs, group_by="optim.lrr")
    with pytest.raises(ConfigError, match="same seed"):
        run_compare([inputs[0], inputs[0]], group_by="optim.lr")


def test_group_by_a_mapping_key_groups_by_its_whole_value(tmp_path):
    # model.pe_options is flattened into model.pe_options.<option>; {} stays a value of its own.
    images = {s: [0.3, 0.3] for s in SCENES}
    options = {"default": {}, "one": {"num_anchors": 1}, "channels": {"anchor_assignment": "channels"}}
    for name, pe_options in options.items():
        for seed in (0, 1):
            write_run(tmp_path, f"{name}_s{seed}", seed=seed, summary={}, images=images,
                      config={"model.global_pe": "urope", "model.pe_options": pe_options})
    inputs = [str(tmp_path / f"{name}_s{seed}") for name in options for seed in (0, 1)]
    result, _, _ = run_compare(inputs, group_by="model.pe_options", n_boot=100)
    assert list(result["datasets"]["synth"]) == ["{}", '{"num_anchors":1}', '{"anchor_assignment":"channels"}']
    assert all(g["seeds"] == [0, 1] for g in result["datasets"]["synth"].values())


def test_one_seed_notes_and_cli_outputs(study, tmp_path, capsys):
    _, numbers = study
    out = tmp_path / "cmp"
    line = {"step": 1000, "dataset": "synth", "metrics": {"native": {"abs_rel": 0.4, "delta1": 0.6}}}
    (numbers[("prope", 0)]["run"] / "val_history.jsonl").write_text(json.dumps(line) + "\n")
    args = ["compare", str(numbers[("rope", 0)]["eval"]), str(numbers[("prope", 0)]["run"]), "--bootstrap", "300",
            "--reference", "prope", "--dataset", "synth", "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "### synth" in printed and "± - |" in printed  # one seed: no std
    assert "Note: the groups also differ in model.global_pe" not in printed
    doc = json.loads((out / "compare.json").read_text())
    assert doc["meta"]["reference"] == "prope" and doc["meta"]["bootstrap"] == 300
    assert doc["result"]["datasets"]["synth"]["rope"]["stats"]["native_abs_rel"]["std"] is None
    assert (out / "compare.md").read_text().strip() in printed
    assert sorted(p.name for p in (out / "curves").iterdir()) == ["curves_synth.png", "curves_synth.svg"]
    assert main(["compare", str(numbers[("rope", 0)]["eval"]), "--reference", "nope"]) == 2
    assert "no such group" in capsys.readouterr().err
    assert main(["compare", str(numbers[("rope", 0)]["eval"]), "--dataset", "co3d"]) == 2
    assert "not in the evaluation" in capsys.readouterr().err


def test_run_folder_with_several_evaluations_asks_for_one(study, tmp_path):
    run = write_run(tmp_path, "two", seed=0, summary={}, images={SCENES[0]: [0.1, 0.2]})
    (run / "eval_b").mkdir()
    (run / "eval_b" / "summary.json").write_text((run / "eval" / "summary.json").read_text())
    with pytest.raises(ConfigError, match="several evaluations"):
        run_compare([str(run)])
    with pytest.raises(ConfigError, match="neither an evaluation folder"):
        run_compare([str(tmp_path)])


def test_run_of_an_evaluation_from_meta_model(study, tmp_path):
    """meta.model of a checkpoint finds its run; a model without a run folder (a Hub id) can only be
    grouped by model.global_pe, read from meta.global_pe."""
    _, numbers = study
    source = numbers[("prope", 1)]["eval"]
    doc = json.loads((source / "summary.json").read_text())
    for name, model in (("ckpt", str(numbers[("prope", 1)]["run"] / "checkpoints" / "step_0000004" / "model")),
                        ("hub", "someone/depthpe-prope")):
        out = tmp_path / name
        out.mkdir()
        for file in ("manifest.json", "metrics_per_image.csv"):
            (out / file).write_text((source / file).read_text())
        (out / "summary.json").write_text(json.dumps({**doc, "meta": {**doc["meta"], "model": model}}))
    result, _, meta = run_compare([str(numbers[("rope", 0)]["eval"]), str(tmp_path / "ckpt")], n_boot=50)
    assert meta["inputs"][1]["run_dir"] == str(numbers[("prope", 1)]["run"]) and meta["inputs"][1]["seed"] == 1
    result, _, meta = run_compare([str(numbers[("rope", 0)]["eval"]), str(tmp_path / "hub")], n_boot=50)
    assert meta["inputs"][1]["run_dir"] is None and result["datasets"]["synth"]["prope"]["seeds"] == [None]
    with pytest.raises(ConfigError, match="no run config.yaml found"):
        run_compare([str(tmp_path / "hub")], group_by="optim.lr")
