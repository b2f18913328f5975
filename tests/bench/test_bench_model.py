"""``depthpe bench model`` on a tiny config: the printed medians are the JSON runs' medians, one step
really runs forward and backward (gradients reach the trainable parameters), the peak memory of a
larger input is larger, and bad arguments give one-line errors."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

import pytest
import torch

from depthpe.bench import model as bench_model

TINY = ["--config", "quickstart", "--views", "2", "--height", "28", "--width", "28", "--threads", "1"]


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench_model.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_table_reports_the_medians_of_the_json_runs(tmp_path, capsys):
    out = tmp_path / "model.json"
    assert bench_model.run(_args(*TINY, "--repeats", "3", "--json", str(out))) == 0
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert len(data["wall_s"]) == len(data["cpu_s"]) == 3 and len(data["warmup_s"]) == 1
    row = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| step")][0]
    cells = [c.strip() for c in row.strip("|").split("|")]
    # the table prints exactly the statistics of the unrounded runs of the JSON (no tolerance: any load)
    wall, cpu = statistics.median(data["wall_s"]), statistics.median(data["cpu_s"])
    spread = {k: (max(data[k]) - min(data[k])) / statistics.median(data[k]) for k in ("wall_s", "cpu_s")}
    assert cells[:6] == [f"{wall * 1e3:.1f}", f"{spread['wall_s']:.2f}", f"{cpu * 1e3:.1f}",
                         f"{spread['cpu_s']:.2f}", f"{2 / wall:.2f}", f"{data['peak_mib']:.0f}"]
    assert "global_pe prope" in text and "S=2 28x28" in text


def test_one_step_backpropagates_into_every_trainable_parameter():
    from depthpe.run import load_run_config

    cfg = load_run_config("quickstart", [])
    model, forward = bench_model.build(cfg, "none", torch.device("cpu"))
    inputs = bench_model.make_inputs(1, 2, 28, 28, "cpu")
    timing = bench_model.time_steps(model, forward, inputs, repeats=1, warmup=0)
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert trainable and all(p.grad is not None for p in trainable)
    assert all(p.grad is None for p in model.parameters() if not p.requires_grad)
    assert timing["wall_s"][0] > 0


_PEAK_IN_A_FRESH_PROCESS = """
import json, torch
from depthpe.bench import model as bench_model

def big_step():
    x = torch.ones(16 * 2**20)  # 64 MiB of float32
    assert float(x[-1]) == 1.0

big, kind = bench_model.peak_step_mib(big_step, torch.device("cpu"))
small, _ = bench_model.peak_step_mib(lambda: None, torch.device("cpu"))
print(json.dumps([big, small, kind]))
"""


def test_peak_memory_counts_what_a_step_allocates():
    """A step that holds 64 MiB at its peak measures at least that much (a fresh allocation that large
    is mapped from the OS, so the peak resident set grows by it) and a no-op step much less. Measured
    in a fresh process, as ``depthpe bench model`` runs: in a pytest worker that earlier tests left
    with resident free memory the allocation can reuse it (CI once measured 0.0 MiB that way)."""
    done = subprocess.run([sys.executable, "-c", _PEAK_IN_A_FRESH_PROCESS], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    big, small, kind = json.loads(done.stdout.strip().splitlines()[-1])
    assert kind == "cpu VmHWM - VmRSS"
    assert 60 <= big < 200 and small < 16


@pytest.mark.parametrize("argv, message", [
    (["--views", "1"], "--views must be >= 2"),
    (["--height", "30"], "positive multiples of 14"),
    (["--repeats", "0"], "--repeats and --batch must be >= 1"),
])
def test_bad_arguments_give_one_line_errors(argv, message, capsys):
    from depthpe.cli import main

    assert main(["bench", "model", *TINY, *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
