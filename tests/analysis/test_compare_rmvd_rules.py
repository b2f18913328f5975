"""``depthpe compare`` of RMVD folders: which (dataset, setting) rows it compares, what it refuses,
the reference and bootstrap settings it passes on, and what its table and meta say."""

import json
import math

import pytest

from depthpe.analysis.compare import paired_comparison
from depthpe.analysis.rmvd_compare import is_rmvd_folder, run_rmvd_compare
from depthpe.config import ConfigError
from tests.helpers.compare import edit_summary, write_rmvd_run

# Six samples with distinct differences, so that the bootstrap interval depends on its count and seed.
ROPE = {("dtu", "known_poses"): [2.0, 3.0, 4.0, 2.5, 3.5, 3.0], ("kitti", "known_poses"): [5.0, 6.0, 7.0, 5.0, 6.0, 7.0]}
PROPE = {("dtu", "known_poses"): [3.0, 4.5, 5.0, 2.7, 3.6, 4.9], ("kitti", "known_poses"): [5.5, 6.0, 7.5, 5.1, 6.3, 7.7]}


def _folders(tmp_path, capsys, **extra):
    """A rope and a prope folder (seed 0 each), with ``extra`` (dataset, setting) values added to both."""
    return [str(write_rmvd_run(tmp_path, pe, seed=0, global_pe=pe, abs_rel={**values, **extra}, capsys=capsys))
            for pe, values in (("rope", ROPE), ("prope", PROPE))]


def test_the_reference_and_the_bootstrap_settings_reach_the_paired_rows(tmp_path, capsys):
    paths = _folders(tmp_path, capsys)
    result, markdown, meta = run_rmvd_compare(paths, reference="prope", n_boot=50, seed=7)
    assert result["reference"] == "prope"
    row = next(r for r in result["rows"] if (r["dataset"], r["group"]) == ("dtu", "rope"))
    samples = lambda values: {f"s{i}": v for i, v in enumerate(values)}  # noqa: E731
    expected = paired_comparison(samples(ROPE["dtu", "known_poses"]), samples(PROPE["dtu", "known_poses"]),
                                 n_boot=50, seed=7)
    assert row["paired"] == expected and expected["mean"] == pytest.approx(-0.95)
    for other in ({"n_boot": 50, "seed": 0}, {"n_boot": 10_000, "seed": 7}):  # both matter, so the check above sees them
        assert paired_comparison(samples(ROPE["dtu", "known_poses"]), samples(PROPE["dtu", "known_poses"]), **other) != expected
    assert row["runs"] == ["rope"] and row["seeds"] == [0] and row["abs_rel"]["values"] == [3.0]
    assert meta == {"kind": "rmvd", "group_by": "model.global_pe", "reference": "prope", "bootstrap": 50, "seed": 7,
                    "inputs": [{"path": p, "eval_dir": p, "run_dir": str(tmp_path / pe), "group": pe, "seed": 0}
                               for p, pe in zip(paths, ("rope", "prope"))]}
    assert markdown.startswith("RMVD folders grouped by `model.global_pe`; reference group `prope`;")
    with pytest.raises(ConfigError, match=r"--reference 'gta': no such group \(groups: rope, prope\)"):
        run_rmvd_compare(paths, reference="gta", n_boot=50)


def test_the_table_cells_of_reference_group_and_mean_rows(tmp_path, capsys):
    paths = _folders(tmp_path, capsys)
    result, markdown, _ = run_rmvd_compare(paths, n_boot=50)
    lines = [line for line in markdown.splitlines() if line.startswith("| ") and "known_poses" in line]
    by_key = {tuple(c.strip() for c in line.strip("|").split("|")[:4:3]): line for line in lines}
    assert by_key["dtu", "rope"].endswith("| (reference) |  |  |")
    paired = next(r for r in result["rows"] if (r["dataset"], r["group"]) == ("dtu", "prope"))["paired"]
    assert by_key["dtu", "prope"].endswith(f"| {paired['mean']:+.2f} | [{paired['low']:+.2f}, {paired['high']:+.2f}] "
                                           f"(6 samples) | {'yes' if paired['excludes_zero'] else 'no'} |")
    assert by_key["mean", "prope"].endswith("|  |  |  |")
    assert "| 3.00 ± - | 97.0 ± - |" in by_key["dtu", "rope"]  # AbsRel with 2 decimals, inliers with 1


def test_only_settings_and_datasets_every_folder_has_are_compared(tmp_path, capsys):
    paths = _folders(tmp_path, capsys)
    extra = write_rmvd_run(tmp_path, "rope_more", seed=1, global_pe="rope", capsys=capsys,
                           abs_rel={("dtu", "single_view"): [1.0, 2.0, 3.0], **ROPE})
    # single_view comes first in that folder's summary and only it has the setting: skipped, not the end
    edit_summary(extra, lambda doc: doc.update(settings={"single_view": doc["settings"]["single_view"],
                                                            "known_poses": doc["settings"]["known_poses"]}))
    result, _, _ = run_rmvd_compare([str(extra), *paths], n_boot=20)
    assert {(r["dataset"], r["setting"]) for r in result["rows"]} == {
        ("dtu", "known_poses"), ("kitti", "known_poses"), ("mean", "known_poses")}
    result, _, _ = run_rmvd_compare(paths, datasets=["kitti"], n_boot=20)
    assert {(r["dataset"], r["setting"]) for r in result["rows"]} == {("kitti", "known_poses")}  # no mean row
    with pytest.raises(ConfigError, match="no dataset and setting in common"):
        run_rmvd_compare(paths, datasets=["eth3d"], n_boot=20)


def test_other_orderings_missing_values_and_missing_sample_files(tmp_path, capsys):
    paths = _folders(tmp_path, capsys)
    edit_summary(paths[1], lambda doc: doc["settings"]["known_poses"].update(ordering="nearest"))
    with pytest.raises(ConfigError, match=r"setting known_poses: the folders used different source-view orderings "
                                          r"\(index_distance, nearest\); compare like with like"):
        run_rmvd_compare(paths, n_boot=20)
    edit_summary(paths[1], lambda doc: doc["settings"]["known_poses"].update(ordering="index_distance"))
    edit_summary(paths[1], lambda doc: doc["settings"]["known_poses"]["datasets"]["dtu"].update(inliers=None))
    result, _, _ = run_rmvd_compare(paths, n_boot=20)
    row = next(r for r in result["rows"] if (r["dataset"], r["group"]) == ("dtu", "prope"))
    assert math.isnan(row["inliers"]["values"][0]) and math.isnan(row["inliers"]["mean"])
    (tmp_path / "prope" / "rmvd" / "per_sample.csv").unlink()
    with pytest.raises(ConfigError, match=r"prope/rmvd: no per_sample\.csv next to summary\.json .*score it again"):
        run_rmvd_compare(paths, n_boot=20)


def test_the_bootstrap_count_must_be_positive_and_one_is_enough(tmp_path, capsys):
    paths = _folders(tmp_path, capsys)
    with pytest.raises(ConfigError, match="--bootstrap must be at least 1, got 0"):
        run_rmvd_compare(paths, n_boot=0)
    result, _, _ = run_rmvd_compare(paths, n_boot=1)
    assert result["rows"][1]["paired"]["n_scenes"] == 6


@pytest.mark.parametrize("doc,expected", [({"settings": {}}, True), ({"settings": {}, "summary": {}}, False),
                                          ({}, False), ({"settings": []}, False), ([1], False)])
def test_an_rmvd_folder_is_a_summary_with_settings_and_no_evaluation_summary(tmp_path, doc, expected):
    (tmp_path / "summary.json").write_text(json.dumps(doc))
    assert is_rmvd_folder(tmp_path) is expected
    assert is_rmvd_folder(tmp_path / "missing") is False
