"""``depthpe rmvd --model``: a model predicts the samples (through predict_depth), the harness scores them."""

import json
import math

import numpy as np

from depthpe.files import lock_folder
from depthpe.rmvd.measure import cpu_peak_available
from depthpe.testing.rmvd_samples import write_sample_list
from tests.helpers.rmvd import TRAINED_WIDTH, csv_rows, depth, run_rmvd


def _lists(root, baseline=0.5, num_samples=2, num_views=3):
    return write_sample_list(root, num_samples=num_samples, num_views=num_views, baseline=baseline, images=True)


def test_known_poses_end_to_end_in_metres(tmp_path, capsys, rmvd_micro_model):
    near, far = _lists(tmp_path / "near", 0.5, num_samples=3), _lists(tmp_path / "far", 1.0, num_samples=3)
    for lists, out in ((near, tmp_path / "out"), (far, tmp_path / "out_far")):
        status, stdout, err = run_rmvd(capsys, "--samples", lists, "--model", rmvd_micro_model, "--out", out,
                                       "--burn-in", "1")
        assert status == 0, err
    out = tmp_path / "out"
    pred = depth(out, None, "toy_001")
    # training_inputs.json's width 28 and the keyview's aspect 8/12: 28 x 14 (the nearest multiple of 14)
    assert pred.shape == (14, TRAINED_WIDTH)
    # the same images with every baseline doubled: the depth is brought back to metres with the poses
    np.testing.assert_allclose(depth(tmp_path / "out_far", None, "toy_001"), 2 * pred, rtol=1e-5)
    assert (out / "predictions" / "toy" / "toy_001~conf.npy").is_file()
    rows = csv_rows(out)
    assert [r["sample"] for r in rows] == ["toy_000", "toy_001", "toy_002"] and rows[0]["views"] == "0 1 2"
    assert math.isnan(float(rows[0]["runtime_ms"])) and math.isnan(float(rows[0]["peak_memory_mib"]))  # burn-in
    assert all(float(r["runtime_ms"]) > 0 for r in rows[1:])
    assert all(math.isfinite(float(r["peak_memory_mib"])) == cpu_peak_available() for r in rows[1:])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["meta"]["input_width"] == "image width 28 (training_inputs.json)"
    assert summary["meta"]["kind"] == "depthpe" and summary["meta"]["batch_size"] == 1
    assert summary["settings"]["known_poses"]["mean"]["runtime_ms"] > 0
    assert "toy_002" in (out / "report.html").read_text()
    assert "--burn-in" not in stdout  # every dataset has measured samples: no note
    # one scoring path: the harness scores the written predictions to the same table
    status, rescored, _ = run_rmvd(capsys, "--samples", near, "--predictions", out / "predictions", "--out",
                                   tmp_path / "rescored")
    assert status == 0 and rescored == (out / "summary.md").read_text().split("\n\nMeans over datasets")[0] + "\n"


def test_a_burn_in_longer_than_a_dataset_explains_its_nan_runtime(tmp_path, capsys, rmvd_micro_model):
    out = tmp_path / "out"
    status, stdout, err = run_rmvd(capsys, "--samples", _lists(tmp_path / "l", num_samples=2), "--model",
                                   rmvd_micro_model, "--out", out, "--burn-in", "5")
    assert status == 0, err
    assert all(math.isnan(float(r["runtime_ms"])) for r in csv_rows(out))
    note = ("runtime_ms and peak_memory_mib are nan for toy (known_poses, 2 sample(s)): the first --burn-in 5 "
            "samples of each setting and dataset are not measured, and these have no more; lower --burn-in")
    assert note in stdout and note in (out / "summary.md").read_text()


def test_intrinsics_only_gives_no_poses_and_single_view_the_keyview_alone(tmp_path, capsys, rmvd_micro_model):
    outs = {}
    for baseline in (0.5, 1.0):
        out = tmp_path / f"out_{baseline}"
        status, _, err = run_rmvd(capsys, "--samples", _lists(tmp_path / f"l{baseline}", baseline), "--model",
                                  rmvd_micro_model, "--out", out, "--setting", "intrinsics_only", "single_view")
        assert status == 0, err
        outs[baseline] = out
    for setting in ("intrinsics_only", "single_view"):
        np.testing.assert_array_equal(depth(outs[0.5], setting, "toy_000"), depth(outs[1.0], setting, "toy_000"))
    rows = csv_rows(outs[0.5])
    assert [(r["setting"], r["views"]) for r in rows[:2]] == [("intrinsics_only", "0 1 2"), ("single_view", "0")]
    assert float(rows[0]["scale"]) != 1.0  # median-aligned


def test_vggt_runs_intrinsics_only_and_refuses_known_poses(tmp_path, capsys, rmvd_vggt):
    checkpoint, overrides = rmvd_vggt
    model = ["--model", f"vggt:{checkpoint}", "--vggt-overrides", overrides, "--image-width", "28"]
    lists = _lists(tmp_path / "lists")
    status, stdout, err = run_rmvd(capsys, "--samples", lists, *model, "--out", tmp_path / "out",
                                   "--setting", "intrinsics_only", "--ause")
    assert status == 0, err
    assert "| toy | 2 |" in stdout
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["meta"]["kind"] == "vggt" and summary["meta"]["camera_free"] is True
    assert summary["meta"]["input_width"] == "image width 28 (--image-width)"
    rows = csv_rows(tmp_path / "out")
    assert len(rows) == 2 and all(math.isfinite(float(r["abs_rel"])) and math.isfinite(float(r["ause"])) for r in rows)
    # no camera input: other poses, the same depth
    status, _, err = run_rmvd(capsys, "--samples", _lists(tmp_path / "far", 2.0), *model, "--out",
                              tmp_path / "out_far", "--setting", "intrinsics_only")
    assert status == 0, err
    np.testing.assert_array_equal(depth(tmp_path / "out", None, "toy_001"), depth(tmp_path / "out_far", None, "toy_001"))
    status, _, err = run_rmvd(capsys, "--samples", lists, *model, "--out", tmp_path / "kp", "--setting", "known_poses")
    assert status == 2 and err.count("\n") == 1
    assert "is a VGGT checkpoint: it takes no cameras, so it cannot run --setting known_poses" in err
    assert not (tmp_path / "kp").exists()


def test_a_camera_model_refuses_intrinsics_only(tmp_path, capsys, rmvd_camera_model):
    status, _, err = run_rmvd(capsys, "--samples", _lists(tmp_path / "lists"), "--model", rmvd_camera_model,
                              "--out", tmp_path / "out", "--setting", "known_poses", "intrinsics_only")
    assert status == 2 and err.count("\n") == 1
    assert "reads the poses (global_pe 'prope'), which --setting intrinsics_only does not give" in err
    assert not (tmp_path / "out").exists()


def test_oracle_ordering_predicts_each_view_set_once(tmp_path, capsys, rmvd_micro_model):
    out = tmp_path / "out"
    status, _, err = run_rmvd(capsys, "--samples", _lists(tmp_path / "lists", num_samples=1, num_views=4),
                              "--model", rmvd_micro_model, "--out", out, "--setting", "intrinsics_only",
                              "--ordering", "quasi-optimal", "--max-source-views", "2")
    assert status == 0, err
    # the 3 pairs, then the best pair again (not predicted twice) and the best two sources
    maps = sorted(p.name for p in (out / "predictions" / "toy" / "toy_000").glob("views_*.npy"))
    assert len([m for m in maps if "~conf" not in m]) == 4 and len(maps) == 8
    assert {"views_0-1.npy", "views_0-2.npy", "views_0-3.npy"} <= set(maps)
    row = csv_rows(out)[0]
    assert f"views_{row['views'].replace(' ', '-')}.npy" in maps and row["ordering"] == "quasi-optimal"


def test_bad_runs_are_one_line(tmp_path, capsys, rmvd_micro_model):
    lists = _lists(tmp_path / "lists")
    status, _, err = run_rmvd(capsys, "--samples", lists, "--model", rmvd_micro_model, "--predictions", "p",
                              "--out", tmp_path / "o1")
    assert status == 2 and "give either --predictions DIR" in err and err.count("\n") == 1
    status, _, err = run_rmvd(capsys, "--samples", lists, "--model", rmvd_micro_model, "--out", tmp_path / "o2",
                              "--input-size", "rmvd")
    assert status == 2 and "RMVD has no input size for dataset 'toy'" in err and not (tmp_path / "o2").exists()
    status, _, err = run_rmvd(capsys, "--samples", lists, "--model", rmvd_micro_model, "--out", tmp_path / "o3",
                              "--max-source-views", "0")
    assert status == 2 and "--setting known_poses needs at least one source view per sample" in err
    lock = lock_folder(tmp_path / "held")
    try:
        status, _, err = run_rmvd(capsys, "--samples", lists, "--model", rmvd_micro_model, "--out", tmp_path / "held")
    finally:
        lock.release()
    assert status == 2 and "is in use by" in err


def test_bad_vggt_overrides_and_a_missing_checkpoint_are_one_line(tmp_path, capsys, rmvd_vggt):
    """--vggt-overrides that is no JSON, no object or a bad field, and a vggt: checkpoint that is not
    there: one line each, nothing written."""
    checkpoint, overrides = rmvd_vggt
    lists = _lists(tmp_path / "lists")
    (tmp_path / "cut.json").write_text('{"embed_dim": ')
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "field.json").write_text('{"embed_dimm": 64}')
    cases = [([f"vggt:{checkpoint}", "--vggt-overrides", tmp_path / "cut.json"], "not a readable JSON file"),
             ([f"vggt:{checkpoint}", "--vggt-overrides", tmp_path / "list.json"],
              "must be a JSON object of DepthModelConfig fields"),
             ([f"vggt:{checkpoint}", "--vggt-overrides", tmp_path / "field.json"], "embed_dimm"),
             ([f"vggt:{tmp_path / 'nowhere.pt'}", "--vggt-overrides", overrides], f"--model vggt:{tmp_path / 'nowhere.pt'}: ")]
    for i, (model, message) in enumerate(cases):
        status, _, err = run_rmvd(capsys, "--samples", lists, "--model", *model, "--out", tmp_path / f"o{i}",
                                  "--setting", "intrinsics_only", "--image-width", "28")
        assert status == 2 and err.count("\n") == 1 and message in err, err
        assert not (tmp_path / f"o{i}").exists()


def test_rmvd_input_sizes():
    from depthpe.rmvd.views import input_hw

    assert input_hw("rmvd", "eth3d", (4032, 6048), 518) == (770, 1148)  # 768 x 1152 rounded to multiples of 14
    assert input_hw("rmvd", "kitti", (1, 1), 518) == (378, 1274)
    assert input_hw("training", "anything", (375, 1242), 518) == (154, 518)
