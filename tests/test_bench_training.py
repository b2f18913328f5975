import yaml

from depthpe.cli import main
from tests.test_training import run_config, synth_root  # noqa: F401 (fixture)


def write_config(root, tmp_path):
    path = tmp_path / "micro.yaml"
    path.write_text(yaml.safe_dump(run_config(root, tmp_path / "run").to_dict()))
    return path


def test_bench_data_prints_a_row_per_worker_count(synth_root, tmp_path, capsys):
    assert main(["bench", "data", "--config", str(write_config(synth_root, tmp_path)), "--workers", "0", "1",
                 "--batches", "3"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| 0 |") or line.startswith("| 1 |")]
    assert len(rows) == 2 and rows[0].endswith("| 1.00 |")
    assert float(rows[1].split("|")[2]) > 0  # samples/s


def test_bench_train_splits_step_time(synth_root, tmp_path, capsys):
    assert main(["bench", "train", "--config", str(write_config(synth_root, tmp_path)), "--steps", "2",
                 "--num-workers", "0"]) == 0
    out = capsys.readouterr().out
    parts = {line.split("|")[1].strip(): float(line.split("|")[2]) for line in out.splitlines()
             if line.startswith("| ") and line.split("|")[1].strip() in ("data", "forward", "backward", "optimizer", "total")}
    assert set(parts) == {"data", "forward", "backward", "optimizer", "total"}
    assert abs(sum(v for k, v in parts.items() if k != "total") - parts["total"]) < 2e-3
    assert parts["forward"] > 0 and "images/s:" in out and "peak memory" in out
