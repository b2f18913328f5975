"""An interrupted ``depthpe rmvd --model`` continues with the samples not done; other settings are refused
unless --restart."""

import json


from depthpe.testing.rmvd_samples import write_sample_list
from tests.helpers.rmvd import SamplePredictions, csv_rows, run_rmvd

SETTINGS = ["--setting", "known_poses", "single_view"]  # 2 settings x 3 samples = 6 predictions


def _scores(out):
    return [(r["setting"], r["sample"], r["views"], r["abs_rel"], r["inliers"]) for r in csv_rows(out)]


def test_an_interrupted_run_resumes_and_reuses_the_finished_samples(tmp_path, capsys, monkeypatch, rmvd_micro_model):
    lists = write_sample_list(tmp_path / "lists", num_samples=3, images=True)
    argv = ["--samples", lists, "--model", rmvd_micro_model, *SETTINGS, "--burn-in", "0"]
    status, _, err = run_rmvd(capsys, *argv, "--out", tmp_path / "whole")
    assert status == 0, err

    out = tmp_path / "out"
    crash = SamplePredictions(monkeypatch, fail_at=3)
    status, _, err = run_rmvd(capsys, *argv, "--out", out)
    assert status == 130 and err.startswith("interrupted (Ctrl-C)") and err.count("\n") == 1  # no traceback
    assert not (out / "summary.json").exists()
    kept = [line for line in (out / "partial" / "scenes.0.jsonl").read_text().splitlines() if line]
    assert len(kept) == 2

    again = SamplePredictions(monkeypatch)
    status, stdout, err = run_rmvd(capsys, *argv, "--out", out)
    assert status == 0, err
    assert again.calls == 4 and "resuming: 2 of 6 samples predicted already" in stdout
    assert _scores(out) == _scores(tmp_path / "whole")
    first = [r for r in csv_rows(out) if r["sample"] == "toy_000" and r["setting"] == "known_poses"][0]
    assert float(first["runtime_ms"]) > 0  # the runtime of the first run, kept in its record

    # the same settings again: nothing predicted, scored again (here with --ause)
    again = SamplePredictions(monkeypatch)
    status, _, err = run_rmvd(capsys, *argv, "--out", out, "--ause")
    assert status == 0 and again.calls == 0 and "ause" in csv_rows(out)[0]


def test_other_settings_are_refused_unless_restart(tmp_path, capsys, monkeypatch, rmvd_micro_model):
    lists = write_sample_list(tmp_path / "lists", num_samples=2, images=True)
    argv = ["--samples", lists, "--model", rmvd_micro_model, "--out", tmp_path / "out"]
    assert run_rmvd(capsys, *argv, *SETTINGS)[0] == 0
    status, _, err = run_rmvd(capsys, *argv, "--setting", "known_poses")
    assert status == 2 and err.count("\n") == 1
    assert ("holds the predictions of a depthpe rmvd --model run made with other settings: --setting was "
            "['known_poses', 'single_view'], now ['known_poses']") in err and "--restart" in err
    status, _, err = run_rmvd(capsys, *argv, *SETTINGS, "--input-size", "training", "--image-width", "14")
    assert status == 2 and "the input width (--image-width, or the model's training_inputs.json) changed" in err
    counted = SamplePredictions(monkeypatch)
    status, _, err = run_rmvd(capsys, *argv, "--setting", "known_poses", "--restart")
    assert status == 0 and counted.calls == 2
    assert not (tmp_path / "out" / "predictions" / "single_view").exists()  # the old predictions are gone
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["settings"].keys() == {"known_poses"}
