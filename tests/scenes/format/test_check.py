import json

import h5py
import numpy as np
import pytest

from depthpe.scenes.format.check import check_root, check_scene
from depthpe.scenes.format.scene_file import read_index, write_index
from depthpe.geometry import invert_w2c
from tests.helpers.scenes import plane_scene

import torch
from tests.helpers.check import run_cli, write






def test_consistent_scene_passes_with_tiny_disagreement(tmp_path):
    write(tmp_path, "good")
    r = check_scene(tmp_path / "good.h5")
    assert r.ok, r.problems
    assert r.pairs_used > 0
    assert r.median_rel_error < 1e-3  # float16 storage only
    assert r.median_scale == pytest.approx(1.0, abs=1e-3)


def test_camera_and_unit_traps_fail(tmp_path):
    sc = plane_scene(4, 30, 40, seed=1)
    c2w = invert_w2c(torch.from_numpy(sc["w2c"])).numpy()
    write(tmp_path, "c2w", w2c=c2w)
    r = check_scene(tmp_path / "c2w.h5")
    assert not r.ok
    write(tmp_path, "mm", depth=sc["depth"] * 1000)  # depth in mm, cameras in m
    assert not check_scene(tmp_path / "mm.h5").ok
    write(tmp_path, "scaled", depth=sc["depth"] * 1.5)  # unit error that still overlaps
    r = check_scene(tmp_path / "scaled.h5")
    assert not r.ok and any("reprojection" in p for p in r.problems)


def test_views_without_overlap_fail_unless_allowed(tmp_path):
    sc = plane_scene(2, 30, 40, seed=1)
    w2c = sc["w2c"].copy()
    w2c[1] = np.diag([-1.0, 1.0, -1.0]) @ w2c[0]  # same centre, looking the opposite way
    w2c[1, :, 3] += 0.5
    write(tmp_path, "apart", sc=sc, w2c=w2c)
    r = check_scene(tmp_path / "apart.h5")
    assert not r.ok and any("no overlapping view pair" in p for p in r.problems)
    r = check_scene(tmp_path / "apart.h5", allow_no_overlap=True)
    assert r.ok and r.warnings


def test_bad_values_fail(tmp_path):
    sc = plane_scene(4, 30, 40, seed=1)
    write(tmp_path, "scaled_rot")  # write_scene refuses a scaled rotation: scale it in the file
    with h5py.File(tmp_path / "scaled_rot.h5", "r+") as f:
        f["w2c"][2, :3, :3] = f["w2c"][2, :3, :3] * 1.3
    assert any("non-orthonormal" in p for p in check_scene(tmp_path / "scaled_rot.h5").problems)
    K = sc["K"].copy()
    K[1, 0, 0] = -K[1, 0, 0]
    write(tmp_path, "neg_f", K=K)
    assert any("focal" in p for p in check_scene(tmp_path / "neg_f.h5").problems)
    write(tmp_path, "empty", depth=np.zeros_like(sc["depth"]))
    assert any("valid depth" in p for p in check_scene(tmp_path / "empty.h5").problems)


def test_non_finite_stored_depth_fails_and_the_stored_valid_mask_counts(tmp_path):
    """NaN/inf stored in a file (write_scene refuses them: edited in the file) is a problem; the
    valid fraction is of depth > 0 inside the stored ``valid`` mask."""
    write(tmp_path, "nan")
    with h5py.File(tmp_path / "nan.h5", "r+") as f:
        depth = f["depth"][1]
        depth[:2, :3] = np.nan
        depth[2, 0] = np.inf
        f["depth"][1] = depth
    report = check_scene(tmp_path / "nan.h5")
    assert "7 non-finite depth values (must be stored as 0)" in report.problems
    sc = plane_scene(4, 30, 40, seed=1)
    half = np.zeros((4, 30, 40), bool)
    half[:, :, :20] = True
    write(tmp_path, "half", valid=half)
    write(tmp_path, "full")
    masked, full = check_scene(tmp_path / "half.h5"), check_scene(tmp_path / "full.h5")
    expected = float(np.mean([((d > 0) & half[i]).mean() for i, d in enumerate(sc["depth"])]))
    assert masked.valid_fraction == pytest.approx(expected, abs=1e-6)
    assert full.valid_fraction == pytest.approx(float(np.mean([(d > 0).mean() for d in sc["depth"]])), abs=1e-6)


def test_a_single_view_scene_passes_with_a_warning(tmp_path):
    sc = plane_scene(1, 30, 40, seed=1)
    write(tmp_path, "one", sc=sc)
    report = check_scene(tmp_path / "one.h5")
    assert report.ok and report.warnings == ["single view: geometric consistency not measured"]


def test_a_json_report_path_that_is_a_folder_is_refused_before_checking(tmp_path, capsys):
    write(tmp_path / "toy" / "train", "good")
    assert run_cli([str(tmp_path), "--json", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert out == f"error: --json {tmp_path} is a folder, not a file (give a file path, e.g. {tmp_path / 'results.json'})\n"
    assert run_cli([str(tmp_path), "--json", str(tmp_path / "reports" / "check.json")]) in (0, 1)
    assert (tmp_path / "reports" / "check.json").is_file()  # its folder created


def test_root_table_and_exit_codes(tmp_path, capsys):
    split = tmp_path / "toy" / "train"
    entries = [write(split, "a"), write(split, "b")]
    write_index(split, entries, dataset="toy", split="train")
    assert run_cli([str(tmp_path), "--quiet", "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "| toy/train | a |" in out and "2 scenes checked, 0 failed" in out
    assert len(json.loads((tmp_path / "r.json").read_text())["reports"]) == 2

    # a corrupt file, a listed-but-missing file and an unlisted file
    (split / "b.h5").write_bytes(b"broken" * 100)
    entries.append({"path": "gone.h5", "scene_id": "gone", "num_frames": 4, "height": 30, "width": 40})
    write_index(split, entries, dataset="toy", split="train")
    write(split, "extra")
    reports, index_problems = check_root(tmp_path, progress=False)
    status = {r.path.split("/")[-1]: r.ok for r in reports}
    assert status == {"a.h5": True, "b.h5": False, "gone.h5": False}
    assert len(index_problems) == 1 and "not listed" in index_problems[0]
    assert run_cli([str(tmp_path), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "file not found" in out


def test_empty_root_fails(tmp_path):
    assert run_cli([str(tmp_path), "--quiet"]) == 1
    assert run_cli([str(tmp_path / "missing"), "--quiet"]) == 2


def test_workers_give_the_same_reports_in_the_same_order(tmp_path, capsys):
    """16 scenes (2 workers' worth) with a corrupt one and a missing one: 2 processes check them exactly
    as 1 does, and the failures are counted, not fatal."""
    split = tmp_path / "toy" / "train"
    entries = [write(split, f"s{i:02d}", plane_scene(3, 20, 24, seed=i)) for i in range(16)]
    (split / "s03.h5").write_bytes(b"broken" * 100)
    entries.append({"path": "gone.h5", "scene_id": "gone", "num_frames": 3, "height": 20, "width": 24})
    write_index(split, entries, dataset="toy", split="train")
    from dataclasses import asdict

    one, problems_one = check_root(tmp_path, progress=False, workers=1)
    two, problems_two = check_root(tmp_path, progress=False, workers=2)
    as_text = lambda reports: json.dumps([asdict(r) for r in reports])  # noqa: E731 - NaN == NaN as text
    assert as_text(two) == as_text(one) and problems_two == problems_one
    assert [r.path.rsplit("/", 1)[-1] for r in two] == [e["path"] for e in read_index(split)]
    assert [r.ok for r in two].count(False) == 2
    assert run_cli([str(tmp_path), "--workers", "2"]) == 1
    captured = capsys.readouterr()
    assert "17 scenes checked, 2 failed" in captured.out and "scene/s" in captured.err  # tqdm: rate and ETA


def test_scenes_are_checked_with_one_thread_and_the_count_is_restored(tmp_path, monkeypatch):
    """Two OpenMP threads made the check of small tensors 17x slower on a busy 2-core machine."""
    from depthpe.scenes.format import check

    split = tmp_path / "toy" / "train"
    write_index(split, [write(split, "a")], dataset="toy", split="train")
    seen = []
    monkeypatch.setattr(check, "check_scene", lambda path, **kw: seen.append(torch.get_num_threads()) or
                        check.SceneReport(path=str(path)))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        check_root(tmp_path, progress=False, workers=1)
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
