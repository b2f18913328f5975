"""`depthpe compare` of `depthpe study correspondence` folders: the per-scene top-1 the benchmark
records add up to its aggregate, groups are the encodings (URoPE's ablations and Plücker apart),
the paired interval is computed per held-out scene, and mixing kinds or held-out sets is one line."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from depthpe.studies.correspondence.compare import encoding_label, run_correspondence_compare
from depthpe.cli import main

MICRO = ["--image-width", "56", "--embed-dim", "32", "--num-heads", "2", "--num-blocks", "2", "--steps", "2",
         "--batch-size", "2", "--train-draws", "1", "--eval-steps", "2", "--eval-views", "3"]


@pytest.fixture(scope="module")
def corr_runs(synth_root, tmp_path_factory):
    """Micro correspondence runs: rope (seeds 0 and 1 in one folder), prope (seed 0), prope (seed 1)."""
    root = tmp_path_factory.mktemp("corr")
    runs = {"rope": ["--pe", "rope", "--seeds", "0", "1"], "prope_s0": ["--pe", "prope", "--seeds", "0"],
            "prope_s1": ["--pe", "prope", "--seeds", "1"]}
    for name, args in runs.items():
        assert main(["bench", "correspondence", "--data", str(synth_root), "--out", str(root / name), *args, *MICRO]) == 0
    return root


def test_the_per_scene_scores_add_up_to_the_aggregate(corr_runs):
    doc = json.loads((corr_runs / "rope" / "results.json").read_text())
    scenes = doc["meta"]["eval_scenes_of"]["2"]
    assert len(scenes) == 2 and all(s.startswith("synth/") for s in scenes)
    for row in doc["runs"][0]["curve"][-1]["settings"]["base"]:
        n = np.array(row["scene_matches"])
        assert n.sum() == row["matches"] and len(n) == len(scenes)
        hits = np.array(row["scene_top1"]) * n
        assert hits.sum() / n.sum() == pytest.approx(row["top1"], abs=1e-12)
        assert np.allclose(hits, np.round(hits))  # whole numbers of matches found


def test_compare_groups_by_encoding_and_pairs_per_scene(corr_runs, tmp_path, capsys):
    paths = [str(corr_runs / n) for n in ("rope", "prope_s0", "prope_s1")]
    assert main(["compare", *paths, "--bootstrap", "200", "--out", str(tmp_path / "cmp")]) == 0
    printed = capsys.readouterr().out
    assert "### base (layer 1)" in printed and "### views3 (layer 1)" in printed
    result = json.loads((tmp_path / "cmp" / "compare.json").read_text())["result"]
    base = result["settings"]["base"]
    assert list(base) == ["rope", "prope"] and base["rope"]["n_seeds"] == 2 and base["prope"]["n_seeds"] == 2
    # the paired difference by hand: per scene, the mean over seeds of top-1 at the last layer
    docs = [json.loads((corr_runs / n / "results.json").read_text()) for n in ("rope", "prope_s0", "prope_s1")]
    last = [[run["curve"][-1]["settings"]["base"][-1]["scene_top1"] for run in d["runs"]] for d in docs]
    rope, prope = np.mean(last[0], axis=0), np.mean([last[1][0], last[2][0]], axis=0)
    assert base["prope"]["paired"]["mean"] == pytest.approx(float(np.mean(prope - rope)), abs=1e-12)
    assert base["prope"]["top1"]["mean"] == pytest.approx(
        np.mean([d["runs"][0]["curve"][-1]["settings"]["base"][-1]["top1"] for d in docs[1:]]))
    assert (tmp_path / "cmp" / "report.html").is_file()
    # the layer is the model's last global layer, whatever the number of seeds of the first folder
    assert main(["compare", paths[1], paths[0], "--bootstrap", "50"]) == 0
    assert "### base (layer 1)" in capsys.readouterr().out


def test_the_table_shows_the_last_step_not_the_first(corr_runs, tmp_path):
    doc = json.loads((corr_runs / "rope" / "results.json").read_text())
    for run in doc["runs"]:  # an earlier curve point whose top-1 is 0.75 everywhere
        early = copy.deepcopy(run["curve"][-1])
        early["step"] = 0
        for rows in early["settings"].values():
            for row in rows:
                row["top1"], row["scene_top1"] = 0.75, [0.75 for _ in row["scene_top1"]]
        run["curve"].insert(0, early)
    (tmp_path / "rope").mkdir()
    (tmp_path / "rope" / "results.json").write_text(json.dumps(doc))
    result, _, _ = run_correspondence_compare([str(tmp_path / "rope")], n_boot=10)
    last = [run["curve"][-1]["settings"]["base"][-1]["top1"] for run in doc["runs"]]
    assert result["settings"]["base"]["rope"]["top1"]["values"] == last and 0.75 not in last


def test_mixing_kinds_and_held_out_sets_is_one_line(corr_runs, synth_root, tmp_path, capsys):
    assert main(["bench", "correspondence", "--data", str(synth_root), "--out", str(tmp_path / "other"), "--pe", "gta",
                 *MICRO, "--eval-scenes", "1"]) == 0
    capsys.readouterr()
    assert main(["compare", str(corr_runs / "rope"), str(tmp_path / "other")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "different held-out scenes" in err
    (tmp_path / "ev").mkdir()
    (tmp_path / "ev" / "summary.json").write_text("{}")
    assert main(["compare", str(corr_runs / "rope"), str(tmp_path / "ev")]) == 2
    assert "folders of one kind" in capsys.readouterr().err


def test_encoding_labels_keep_the_ablations_apart():
    base = {"pe": "urope", "anchors": None, "anchor_assignment": None, "plucker": False, "depth_weight": 0.0}
    assert encoding_label(base) == "urope"
    assert encoding_label({**base, "anchors": 1}) == "urope/anchors=1"
    assert encoding_label({**base, "anchor_assignment": "channels"}) == "urope/channels"
    assert encoding_label({**base, "pe": "rope", "plucker": True}) == "rope+plucker"
    assert encoding_label({**base, "pe": "prope", "depth_weight": 0.5}) == "prope/depth=0.5"


def test_plot_draws_the_curves_of_each_setting(corr_runs, tmp_path, capsys):
    paths = [str(corr_runs / n) for n in ("rope", "prope_s0", "prope_s1")]
    assert main(["plot", *paths, "--out", str(tmp_path / "p")]) == 0
    printed = capsys.readouterr().out
    for setting in ("base", "views3"):
        assert (tmp_path / "p" / f"correspondence_{setting}.png").stat().st_size > 1000
    assert printed.count("(3 panels)") == 2
    assert main(["plot", paths[0], str(tmp_path / "p"), "--out", str(tmp_path / "q")]) == 2
    assert "folders of one kind" in capsys.readouterr().err


def test_a_non_number_score_is_one_line(corr_runs, tmp_path, capsys):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(corr_runs / "prope_s0", bad)
    doc = json.loads((bad / "results.json").read_text())
    doc["runs"][0]["curve"][-1]["settings"]["base"][0]["top1"] = "abc"
    (bad / "results.json").write_text(json.dumps(doc))
    for command in (["compare", str(corr_runs / "rope"), str(bad)], ["plot", str(bad), "--out", str(tmp_path / "p")]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "results.json has top1 = 'abc' (seed 0, step 2, setting base, layer 0) where " \
                                       "a score (a number or null) belongs" in err


def _edited_copy(corr_runs, tmp_path, name: str, edit) -> str:
    """A copy of the prope seed-0 folder whose results.json ``edit(doc)`` changed (or replaced: its return)."""
    import shutil

    folder = tmp_path / name
    shutil.copytree(corr_runs / "prope_s0", folder)
    doc = json.loads((folder / "results.json").read_text())
    changed = edit(doc)
    (folder / "results.json").write_text(changed if isinstance(changed, str) else json.dumps(doc))
    return str(folder)


def test_unreadable_and_old_results_are_one_line(corr_runs, tmp_path, capsys):
    """A results.json cut short or without its runs, and one written before per-scene scores were
    recorded (it cannot be paired per scene): one line each, naming the folder."""
    def drop_scene_scores(doc):
        for row in doc["runs"][0]["curve"][-1]["settings"]["base"]:
            row.pop("scene_top1")

    cases = [(_edited_copy(corr_runs, tmp_path, "cut", lambda doc: '{"meta": {'), "not a readable `depthpe study "
              "correspondence` folder"),
             (_edited_copy(corr_runs, tmp_path, "noruns", lambda doc: doc.pop("runs")), "not a readable"),
             (_edited_copy(corr_runs, tmp_path, "old", drop_scene_scores), "results.json has no per-scene scores "
              "(written before they were recorded); run the benchmark again")]
    for folder, message in cases:
        assert main(["compare", str(corr_runs / "rope"), folder]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"error: {folder}: ") and message in err, err


def test_group_by_names_a_setting_or_says_which_exist(corr_runs, tmp_path, capsys):
    folders = [str(corr_runs / "prope_s0"), str(corr_runs / "prope_s1")]
    assert main(["compare", *folders, "--group-by", "colour", "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--group-by 'colour': not a setting of" in err and "(settings: " in err
    assert "pe" in err.split("(settings: ")[1]
