"""``depthpe compare`` of ``depthpe rmvd`` output folders: datasets x settings rows in one table."""

import numpy as np
import pytest

from depthpe.analysis.rmvd_compare import is_rmvd_folder, run_rmvd_compare
from depthpe.cli import main
from depthpe.testing.rmvd_samples import write_sample_list
from tests.helpers.compare import write_rmvd_run

PAIRS = (("dtu", "known_poses"), ("kitti", "known_poses"), ("dtu", "single_view"), ("kitti", "single_view"))


@pytest.fixture
def rmvd_study(tmp_path, capsys):
    """2 groups x 2 seeds; per (dataset, setting) 3 samples; prope is worse by 1.0 + 0.1 * seed per sample."""
    rng = np.random.default_rng(0)
    base = {pair: rng.uniform(2, 10, 3) for pair in PAIRS}
    folders, numbers = {}, {}
    for pe, worse in (("rope", 0.0), ("prope", 1.0)):
        for seed in (0, 1):
            values = {pair: list(base[pair] + worse * (1 + 0.1 * seed) + 0.01 * seed) for pair in PAIRS}
            folders[pe, seed] = write_rmvd_run(tmp_path, f"{pe}_s{seed}", seed=seed, global_pe=pe, abs_rel=values,
                                               capsys=capsys)
            numbers[pe, seed] = values
    return folders, numbers


def test_datasets_by_settings_rows_with_seed_stats_and_paired_samples(rmvd_study):
    folders, numbers = rmvd_study
    paths = [str(folders[pe, s]) for pe in ("rope", "prope") for s in (0, 1)]
    assert all(is_rmvd_folder(p) for p in paths)
    result, markdown, meta = run_rmvd_compare(paths, n_boot=500)
    assert result["reference"] == "rope" and meta["kind"] == "rmvd"
    keys = [(r["dataset"], r["setting"], r["group"]) for r in result["rows"]]
    assert keys[:6] == [("dtu", "known_poses", "rope"), ("dtu", "known_poses", "prope"),
                        ("kitti", "known_poses", "rope"), ("kitti", "known_poses", "prope"),
                        ("mean", "known_poses", "rope"), ("mean", "known_poses", "prope")]
    assert len(keys) == 12
    row = next(r for r in result["rows"] if r["dataset"] == "kitti" and r["setting"] == "single_view"
               and r["group"] == "prope")
    per_seed = np.array([np.mean(numbers["prope", s]["kitti", "single_view"]) for s in (0, 1)])
    assert row["abs_rel"]["mean"] == pytest.approx(per_seed.mean()) and row["abs_rel"]["std"] == pytest.approx(
        per_seed.std(ddof=1))
    diffs = np.mean([np.array(numbers["prope", s]["kitti", "single_view"]) - numbers["rope", s]["kitti", "single_view"]
                     for s in (0, 1)], axis=0)
    assert row["paired"]["n_scenes"] == 3 and row["paired"]["mean"] == pytest.approx(diffs.mean())
    assert row["paired"]["excludes_zero"]
    mean_row = next(r for r in result["rows"] if r["dataset"] == "mean" and r["setting"] == "known_poses"
                    and r["group"] == "rope")
    expected = np.mean([np.mean([np.mean(numbers["rope", s][d, "known_poses"]) for d in ("dtu", "kitti")])
                        for s in (0, 1)])
    assert mean_row["abs_rel"]["mean"] == pytest.approx(expected) and mean_row["paired"] is None
    mean, std = row["abs_rel"]["mean"], row["abs_rel"]["std"]
    assert f"| kitti | single_view | index_distance | prope | 2 | {mean:.2f} ± {std:.2f} |" in markdown


def test_each_setting_pairs_its_own_samples(tmp_path, capsys):
    """Samples named alike (s0..s2) in two settings: prope is worse by 1.0 with known poses and by
    0.5 in single view; each setting's paired mean is its own."""
    rope = {("dtu", "known_poses"): [2.0, 3.0, 4.0], ("dtu", "single_view"): [5.0, 6.0, 9.0]}
    prope = {("dtu", "known_poses"): [3.0, 4.0, 5.0], ("dtu", "single_view"): [5.5, 6.5, 9.5]}
    paths = [str(write_rmvd_run(tmp_path, pe, seed=0, global_pe=pe, abs_rel=values, capsys=capsys))
             for pe, values in (("rope", rope), ("prope", prope))]
    result, _, _ = run_rmvd_compare(paths, n_boot=50)
    paired = {r["setting"]: r["paired"]["mean"] for r in result["rows"] if r["dataset"] == "dtu" and r["group"] == "prope"}
    assert paired == {"known_poses": pytest.approx(1.0), "single_view": pytest.approx(0.5)}


def test_depthpe_compare_reads_rmvd_folders_and_refuses_a_mix(rmvd_study, tmp_path, capsys):
    folders, _ = rmvd_study
    paths = [str(folders[pe, s]) for pe in ("rope", "prope") for s in (0, 1)]
    assert main(["compare", *paths, "--bootstrap", "200", "--dataset", "dtu", "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "### RMVD (datasets x settings)" in out and "| dtu | single_view |" in out and "| kitti |" not in out
    html = (tmp_path / "cmp" / "report.html").read_text()
    assert "RMVD (datasets x settings)" in html and "single_view" in html
    evaluation = tmp_path / "eval"
    evaluation.mkdir()
    (evaluation / "summary.json").write_text('{"summary": {}}')
    assert main(["compare", paths[0], str(evaluation)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a depthpe rmvd output" in err and "folders of one kind" in err
    assert main(["plot", paths[0], "--out", str(tmp_path / "plot")]) == 2
    assert "has no curves to plot" in capsys.readouterr().err


def test_compare_reads_rmvd_model_runs(tmp_path, capsys, rmvd_micro_model, rmvd_camera_model):
    lists = write_sample_list(tmp_path / "lists", num_samples=2, images=True)
    outs = []
    for name, model in (("rope", rmvd_micro_model), ("prope", rmvd_camera_model)):
        outs.append(str(tmp_path / name))
        argv = ["rmvd", "--samples", str(lists), "--model", str(model), "--out", outs[-1], "--quiet",
                "--setting", "known_poses", "single_view"]
        assert main(argv) == 0
    capsys.readouterr()
    assert main(["compare", *outs, "--bootstrap", "100"]) == 0
    out = capsys.readouterr().out
    for setting in ("known_poses", "single_view"):
        assert f"| toy | {setting} | " in out and f"| mean | {setting} | " in out
    assert "| prope | 1 |" in out and "(2 samples)" in out
