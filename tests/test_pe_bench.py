"""``depthpe bench attention`` on a tiny configuration (table, JSON, CPU peak-memory children)."""

from __future__ import annotations

import argparse
import json

from depthpe.bench import attention


def test_bench_attention_tiny(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    attention.add_arguments(parser)
    out = tmp_path / "bench.json"
    args = parser.parse_args(["--views", "2", "--tokens-per-view", "7", "--special", "1",
                              "--heads", "4", "--head-dim", "16", "--repeats", "1",
                              "--methods", "prope", "urope", "--threads", "1",
                              "--no-memory", "--json", str(out)])
    assert attention.run(args) == 0
    table = capsys.readouterr().out
    for name in ("rope", "prope", "urope", "x rope", "prepare ms"):
        assert name in table
    data = json.loads(out.read_text())
    assert set(data["results"]) == {"rope", "prope", "urope"}
    for r in data["results"].values():
        assert r["fwd_bwd_ms"] > 0 and r["prepare_ms"] > 0
    # the CPU peak-memory measurement (run in-process here; the command uses fresh subprocesses)
    setup = attention.Setup(args)
    assert attention.peak_memory_mib(setup, "urope") >= 0


def test_grid_for_picks_the_most_square_grid():
    assert attention.grid_for(261, 5) == (16, 16)
    assert attention.grid_for(5 + 37 * 28, 5) == (28, 37)
