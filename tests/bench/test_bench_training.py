"""`depthpe bench data` and `depthpe bench train` on a micro config: the printed numbers must agree
with each other and with the config (no timing thresholds: these hold on any machine)."""

import json

import pytest
import yaml

from depthpe.cli import main
from tests.helpers.tables import table_rows
from tests.helpers.training import run_config


def write_config(root, tmp_path):
    path = tmp_path / "micro.yaml"
    path.write_text(yaml.safe_dump(run_config(root, tmp_path / "run").to_dict()))
    return path


def test_bench_data_rows_agree_with_the_view_range(synth_root, tmp_path, capsys):
    # the unrounded numbers the benchmark computed (--json), not the rounded printout: holds under any load
    result_path = tmp_path / "data.json"
    assert main(["bench", "data", "--config", str(write_config(synth_root, tmp_path)), "--workers", "0", "1",
                 "--batches", "3", "--json", str(result_path)]) == 0
    out = capsys.readouterr().out
    result = json.loads(result_path.read_text())
    rows = {row["workers"]: row for row in result["rows"]}
    assert list(rows) == [0, 1] and result["data"]["views"] == [2, 3]
    for row in rows.values():
        # every timed batch holds floor(6 / S) samples of S views, S drawn from data.views = [2, 3]
        assert 3 * 2 <= row["samples"] <= 3 * 3 and row["images"] == 3 * 6
        assert 2 <= row["images"] / row["samples"] <= 3
        assert row["images_per_s"] == row["images"] / row["seconds"]
        assert row["samples_per_s"] == row["samples"] / row["seconds"]
        assert row["images_per_s_per_worker"] == row["images_per_s"]  # 0 workers: the main process; 1 worker
        assert row["x_first_row"] == row["samples_per_s"] / rows[0]["samples_per_s"]
    assert rows[0]["x_first_row"] == 1.0 and result["raw_images_per_s"] is None
    printed = table_rows(out, ("0", "1"))  # the table prints exactly these numbers, rounded
    for workers, row in rows.items():
        assert printed[str(workers)] == [round(row["samples_per_s"], 1), round(row["images_per_s"], 1),
                                         round(row["images_per_s_per_worker"], 1), round(row["s_per_batch"], 3),
                                         round(row["x_first_row"], 2)], workers


def test_bench_train_parts_shares_and_throughput_agree(synth_root, tmp_path, capsys):
    # the unrounded numbers the benchmark computed (--json), not the rounded printout: holds under any load
    result_path = tmp_path / "bench.json"
    assert main(["bench", "train", "--config", str(write_config(synth_root, tmp_path)), "--steps", "2",
                 "--num-workers", "0", "--json", str(result_path)]) == 0
    out = capsys.readouterr().out
    result = json.loads(result_path.read_text())
    assert set(result["seconds"]) == {"data", "forward", "backward", "optimizer"}
    assert sum(result["seconds"].values()) == pytest.approx(2 * result["step_s"], rel=1e-9)
    # every batch holds floor(6 / S) * S = 6 images for S in data.views = [2, 3]
    assert result["images"] == 2 * 6
    assert result["images_per_s"] * result["step_s"] == pytest.approx(6, rel=1e-9)
    parts = table_rows(out, ("data", "forward", "backward", "optimizer", "total"))
    for name, seconds in result["seconds"].items():  # the table prints exactly these numbers, rounded
        assert parts[name] == [round(seconds / 2, 4), round(seconds / 2 / result["step_s"], 2)], name
    assert parts["total"] == [round(result["step_s"], 4), 1.0]
    assert f"images/s: {result['images_per_s']:.1f};" in out
    assert "(rope)" in out  # the config's encoding is named in the header


def test_bench_with_a_bad_config_is_one_error_line(tmp_path, capsys):
    assert main(["bench", "train", "--config", "quickstart", "train.stepz=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: unknown config key 'train.stepz'")


@pytest.mark.parametrize("bench", ["train", "data"])
def test_bench_without_scenes_is_one_error_line(bench, tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert main(["bench", bench, "--config", "quickstart", f"data.sources.0.root={missing}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: data.sources.0 (synth):") and "depthpe synth" in err[0]
