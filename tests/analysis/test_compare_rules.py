"""``depthpe compare``'s rules on its inputs, each on the smallest input that shows it: which rows of
``metrics_per_image.csv`` count, how seeds pool per scene, which config keys may differ inside a group
and which are reported across groups, and what the refusals say."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from depthpe.analysis.compare import (EvalInput, check_manifests, group_label, group_scene_values, lookup_key,
                                      paired_comparison, row_value, run_compare, scene_values, seed_stats,
                                      write_compare)
from depthpe.config import ConfigError
from tests.helpers.compare import GROUPS, SCENES, SEEDS, edit_summary, scene_means, write_run


def _item(csv_rows=(), summary=None, manifest=None, name="x") -> EvalInput:
    """An evaluation held in memory: its summary.json document and its metrics_per_image.csv rows."""
    return EvalInput(path=name, eval_dir=Path(name), summary=summary or {}, manifest=manifest,
                     extra={"csv": [dict(r) for r in csv_rows]})


def _row(scene, image, value, n_valid="10", mode="native", dataset="synth"):
    return {"dataset": dataset, "scene": scene, "image": str(image), "mode": mode, "abs_rel": value, "n_valid": n_valid}


def test_a_scene_value_is_the_mean_of_its_scored_images_of_that_dataset_and_mode():
    item = _item([
        _row("a", 0, "0.2"),
        _row("a", 1, "0.4", n_valid=""),  # no count written: the image counts
        _row("a", 2, "0.9", n_valid="0"),  # a value, but no evaluated pixel: left out
        _row("a", 3, "", n_valid="5"),  # no value: left out
        _row("b", 0, "nan"),  # only non-finite values: the scene has none
        _row("a", 0, "7.0", mode="scene_aligned"),
        _row("a", 0, "5.0", dataset="co3d"),
    ])
    assert scene_values(item, "synth") == {"a": pytest.approx(0.3)}
    assert scene_values(item, "synth", "scene_aligned") == {"a": 7.0}
    assert scene_values(item, "co3d") == {"a": 5.0}


def test_a_group_pools_each_scene_over_the_seeds_that_have_it():
    first = _item([_row("a", 0, "0.2"), _row("b", 0, "0.4")])
    second = _item([_row("a", 0, "0.4")])
    assert group_scene_values([first, second], "synth") == {"a": pytest.approx(0.3), "b": pytest.approx(0.4)}


def test_a_missing_dataset_row_or_metric_reads_as_nan_and_seed_values_keep_their_order():
    summary = {"summary": {"synth": {"native": {"abs_rel": 0.4, "delta1": None},
                                     "global_constant": {"abs_rel": 0.8}}}}
    item = _item(summary=summary)
    assert row_value(item, "synth", "native", "abs_rel") == 0.4
    for dataset, row, metric in (("co3d", "native", "abs_rel"), ("synth", "scene_aligned", "abs_rel"),
                                 ("synth", "native", "delta1"), ("synth", "native", "rmse")):
        assert math.isnan(row_value(item, dataset, row, metric)), (dataset, row, metric)
    other = _item(summary={"summary": {"synth": {"native": {"abs_rel": 0.2}, "global_constant": {"abs_rel": 0.4}}}})
    stats = seed_stats([item, other], "synth")
    assert stats["native_abs_rel"]["values"] == [0.4, 0.2]
    assert stats["ratio_global_constant"]["values"] == [0.5, 0.5]
    assert math.isnan(stats["ratio_scene_constant"]["mean"])  # no scene_constant row anywhere


def test_the_manifest_refusal_says_which_scenes_only_one_side_has():
    ours = {"synth/a": [0, 1], "synth/b": [0, 1]}
    cases = [({"synth/a": [0, 1]}, "1 scene(s) only in the first, 0 only in the other, e.g. synth/b"),
             ({**ours, "synth/c": [0, 1]}, "0 scene(s) only in the first, 1 only in the other, e.g. synth/c"),
             ({"synth/a": [0, 1], "synth/c": [0, 1]}, "1 scene(s) only in the first, 1 only in the other, e.g. synth/b"),
             ({**ours, "synth/b": [0, 2]}, "other frames in 1 scene(s), e.g. synth/b")]
    for theirs, detail in cases:
        with pytest.raises(ConfigError) as err:
            check_manifests([_item(manifest=ours, name="A"), _item(manifest=theirs, name="B")], allow_different=False)
        assert f"B and A were evaluated on different manifests ({detail})" in str(err.value)
        assert check_manifests([_item(manifest=ours), _item(manifest=theirs)], allow_different=True) is False
    assert check_manifests([_item(manifest=ours), _item(manifest=dict(ours))], allow_different=False) is True


def test_the_groups_also_differ_note_names_the_other_keys_only(tmp_path):
    images = {s: [0.3, 0.3] for s in SCENES}
    inputs = []
    for pe, lr in (("rope", 1e-3), ("prope", 1e-4)):
        for seed in (0, 1):
            inputs.append(str(write_run(tmp_path, f"{pe}_s{seed}", seed=seed, summary={}, images=images,
                                        config={"model.global_pe": pe, "optim.lr": lr})))
    _, markdown, meta = run_compare(inputs, n_boot=20)
    assert meta["groups_also_differ_in"] == ["optim.lr"]  # not the grouping key, the seed or output_dir
    assert "Note: the groups also differ in optim.lr." in markdown
    _, markdown, meta = run_compare(inputs[:1] + inputs[2:3], n_boot=20, group_by="optim.lr")
    assert meta["groups_also_differ_in"] == ["model.global_pe"]


def test_an_option_set_in_one_run_of_a_group_only_is_a_difference(tmp_path):
    images = {s: [0.3, 0.3] for s in SCENES}
    inputs = [str(write_run(tmp_path, f"urope_s{seed}", seed=seed, summary={}, images=images,
                            config={"model.global_pe": "urope", "model.pe_options": options}))
              for seed, options in ((0, {}), (1, {"num_anchors": 1}))]
    with pytest.raises(ConfigError, match=r"differ in model\.pe_options(\.num_anchors)? .*not only in the seed"):
        run_compare(inputs, n_boot=20)


def test_a_run_folder_without_an_evaluation_says_how_to_make_one_and_several_are_named(tmp_path):
    run = write_run(tmp_path, "r", seed=0, summary={}, images={SCENES[0]: [0.1, 0.2]})
    (run / "eval" / "summary.json").rename(run / "eval" / "old.json")
    with pytest.raises(ConfigError) as err:
        run_compare([str(run)])
    assert f"run folder {run} has no eval*/summary.json (evaluate it with `depthpe eval --model {run}/final" in str(err.value)
    for name in ("eval_a", "eval_b"):
        (run / name).mkdir()
        (run / name / "summary.json").write_text((run / "eval" / "old.json").read_text())
    with pytest.raises(ConfigError) as err:
        run_compare([str(run)])
    assert f"several evaluations ({run / 'eval_a'}, {run / 'eval_b'})" in str(err.value)


def test_a_model_entry_that_is_not_a_path_falls_back_to_the_folder_above(tmp_path):
    run = write_run(tmp_path, "r", seed=4, summary={}, images={SCENES[0]: [0.1, 0.2]})
    edit_summary(run / "eval", lambda doc: doc["meta"].update(model=12))
    _, _, meta = run_compare([str(run / "eval")], n_boot=20)
    assert meta["inputs"][0]["run_dir"] == str(run) and meta["inputs"][0]["seed"] == 4


def test_an_evaluation_without_its_per_image_table_says_how_to_get_one(tmp_path):
    inputs = [str(write_run(tmp_path, f"{pe}_s0", seed=0, summary={}, images={SCENES[0]: [0.1, 0.2]},
                            config={"model.global_pe": pe}) / "eval") for pe in ("rope", "prope")]
    (tmp_path / "prope_s0" / "eval" / "metrics_per_image.csv").unlink()
    with pytest.raises(ConfigError, match=r"prope_s0/eval: no metrics_per_image\.csv next to summary\.json "
                                          r"\(needed for the paired per-scene comparison\); evaluate again"):
        run_compare(inputs, n_boot=20)


def test_compare_json_is_strict_json_in_a_new_nested_folder(tmp_path):
    """NaN and infinity are null (strict JSON readers refuse NaN), numpy numbers plain numbers."""
    result = {"datasets": {"synth": {"rope": {"stats": {"a": {"mean": float("nan"), "std": None,
                                                            "values": [np.float32(0.5), float("inf"), 2]}}}}}}
    paths = write_compare(result, "# table\n", tmp_path / "new" / "cmp", meta={"seeds": (np.int64(3),)})
    text = paths["json"].read_text()
    doc = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in compare.json"))
    assert doc == {"meta": {"seeds": [3]},
                   "result": {"datasets": {"synth": {"rope": {"stats": {"a": {"mean": None, "std": None,
                                                                               "values": [0.5, None, 2]}}}}}}}
    assert paths["markdown"].read_text() == "# table\n"


def test_the_bootstrap_count_and_seed_reach_the_paired_columns_and_the_meta(study):
    _, numbers = study
    paths = [str(numbers[(g, s)]["eval"]) for g in GROUPS for s in SEEDS]
    result, markdown, meta = run_compare(paths, n_boot=50, seed=7)
    expected = paired_comparison(scene_means(numbers, "prope"), scene_means(numbers, "rope"), n_boot=50, seed=7)
    assert result["datasets"]["synth"]["prope"]["paired"] == expected
    for other in ({"n_boot": 50, "seed": 0}, {"n_boot": 10_000, "seed": 7}):  # both matter, so the check above sees them
        assert paired_comparison(scene_means(numbers, "prope"), scene_means(numbers, "rope"), **other) != expected
    assert {k: meta[k] for k in ("group_by", "reference", "bootstrap", "seed", "same_manifest")} == {
        "group_by": "model.global_pe", "reference": "rope", "bootstrap": 50, "seed": 7, "same_manifest": True}
    assert [(i["path"], i["group"], i["seed"]) for i in meta["inputs"]] == [
        (p, g, s) for p, (g, s) in zip(paths, [(g, s) for g in GROUPS for s in SEEDS])]
    assert "Manifests: identical." in markdown and "bootstrap over scenes, 50 resamples, seed 7" in markdown
    with pytest.raises(ConfigError, match="--bootstrap must be at least 1, got 0"):
        run_compare(paths, n_boot=0)
    assert run_compare(paths, n_boot=1)[0]["datasets"]["synth"]["prope"]["paired"]["n_scenes"] == 5


def test_a_group_whose_runs_differ_names_both_runs_and_values_and_the_hub_may_differ(tmp_path):
    images = {s: [0.3, 0.3] for s in SCENES}
    runs = [str(write_run(tmp_path, f"a_s{seed}", seed=seed, summary={}, images=images, config={"optim.lr": lr}))
            for seed, lr in ((0, 1e-3), (1, 1e-4))]
    with pytest.raises(ConfigError, match=r"group 'rope': runs a_s0 and a_s1 differ in optim\.lr \(0\.001 vs 0\.0001\), "
                                          r"not only in the seed; compare them with --group-by optim\.lr"):
        run_compare(runs, n_boot=20)
    pushed = [str(write_run(tmp_path, f"h_s{seed}", seed=seed, summary={}, images=images,
                            config={"hub.repo_id": f"someone/run-{seed}"})) for seed in (0, 1)]
    assert run_compare(pushed, n_boot=20)[0]["datasets"]["synth"]["rope"]["seeds"] == [0, 1]


def test_a_mapping_group_key_is_not_also_reported_as_a_difference(tmp_path):
    images = {s: [0.3, 0.3] for s in SCENES}
    inputs = [str(write_run(tmp_path, f"u{i}", seed=0, summary={}, images=images,
                            config={"model.global_pe": "urope", "model.pe_options": options}))
              for i, options in enumerate(({"num_anchors": 1}, {"num_anchors": 2}))]
    _, _, meta = run_compare(inputs, group_by="model.pe_options", n_boot=20)
    assert meta["groups_also_differ_in"] == []


def test_evaluations_without_a_run_config_group_by_the_encoding_and_count_once(tmp_path):
    images = {s: [0.3, 0.3] for s in SCENES}
    evals = []
    for name in ("a", "b"):
        run = write_run(tmp_path, name, seed=0, summary={}, images=images)
        (run / "config.yaml").unlink()
        evals.append(str(run / "eval"))
    result, _, meta = run_compare(evals, n_boot=20)
    assert result["datasets"]["synth"]["rope"]["seeds"] == [None, None] and meta["inputs"][0]["run_dir"] is None
    with pytest.raises(ConfigError, match="give each run once"):
        run_compare([evals[0], evals[0]], n_boot=20)
    with pytest.raises(ConfigError, match=rf"no run config.yaml found \(meta.model='{tmp_path}/a/final'\) to read 'optim.lr'"):
        run_compare(evals, group_by="optim.lr", n_boot=20)


def test_the_datasets_compared_are_the_common_ones_or_the_chosen_ones(tmp_path):
    images = {s: [0.3, 0.3] for s in SCENES}
    evals = [write_run(tmp_path, pe, seed=0, summary={}, images=images, config={"model.global_pe": pe}) / "eval"
             for pe in ("rope", "prope")]
    for folder in evals:
        edit_summary(folder, lambda doc: doc["summary"].update(co3d=doc["summary"]["synth"]))
    assert list(run_compare([str(e) for e in evals], n_boot=20)[0]["datasets"]) == ["co3d", "synth"]
    assert list(run_compare([str(e) for e in evals], datasets=["synth"], n_boot=20)[0]["datasets"]) == ["synth"]
    edit_summary(evals[1], lambda doc: doc.update(summary={"wildrgbd": doc["summary"]["synth"]}))
    with pytest.raises(ConfigError, match="the evaluations have no dataset in common; pass --dataset"):
        run_compare([str(e) for e in evals], n_boot=20)


def test_group_labels_and_the_key_hint():
    assert group_label("rope") == "rope" and group_label(0.001) == "0.001"
    assert group_label({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'  # keys sorted: one label per value
    with pytest.raises(ConfigError, match=r"--group-by 'zzz': no such key in W \(a dotted key such as "
                                          r"model\.global_pe or optim\.lr\)$"):
        lookup_key({"model.global_pe": "rope"}, "zzz", "W")
    assert lookup_key({"model.pe_options.num_anchors": 2, "model.global_pe": "urope"}, "model.pe_options", "W") == {
        "num_anchors": 2}


def test_unreadable_inputs_name_the_file(tmp_path):
    run = write_run(tmp_path, "r", seed=0, summary={}, images={SCENES[0]: [0.1, 0.2]})
    for text, detail in (("model: [unclosed\n", "line 2 is not valid YAML"),
                         ("model: {global_pe: nope}\n", "model.global_pe: unknown encoding 'nope'")):
        (run / "config.yaml").write_text(text)
        with pytest.raises(ConfigError) as err:
            run_compare([str(run / "eval")], n_boot=20)
        assert str(err.value).startswith(f"{run}/config.yaml: {detail}")  # the file named once
    for text, message in (("{not json", "cannot read"), ("[1]", "expected a JSON object")):
        (run / "eval" / "summary.json").write_text(text)
        with pytest.raises(ConfigError, match=rf"{run}/eval/summary\.json.*{message}|{message} {run}/eval/summary\.json"):
            run_compare([str(run / "eval")], n_boot=20)
