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
    assert main(["bench", "data", "--config", str(write_config(synth_root, tmp_path)), "--workers", "0", "1",
                 "--batches", "3"]) == 0
    rows = table_rows(capsys.readouterr().out, ("0", "1"))
    assert set(rows) == {"0", "1"}
    for samples_s, images_s, per_worker, s_per_batch, relative in rows.values():
        assert 2 <= images_s / samples_s <= 3  # images per sample = S, drawn from data.views = [2, 3]
        assert per_worker == images_s  # 0 workers: the main process loads; 1 worker
    # relative = samples/s over the 0-worker row's; the table rounds samples/s to 0.1 and the ratio to 0.01
    (a, b), half = (rows["1"][0], rows["0"][0]), 0.05
    assert rows["0"][4] == 1.0 and (a - half) / (b + half) - 0.005 <= rows["1"][4] <= (a + half) / (b - half) + 0.005


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
