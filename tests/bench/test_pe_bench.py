"""``depthpe bench attention`` on tiny configurations: the table agrees with the JSON results, the
timings are the documented statistics of the runs, bad arguments give clear errors, and the CPU
peak-memory children measure what one fwd+bwd allocates."""

from __future__ import annotations

import json
import statistics

import pytest
import torch

from depthpe.bench import attention
from tests.helpers.bench_attention import TINY, attention_args

# q, k and v of (1, 8, 4 * 261, 64) float32: 2 MiB each, so one backward allocates >= 6 MiB of gradients
LARGER = ["--views", "4", "--tokens-per-view", "261", "--special", "5", "--heads", "8", "--head-dim", "64",
          "--threads", "1"]
LARGER_GRAD_MIB = 3 * (1 * 8 * 4 * 261 * 64) * 4 / 2**20


_args = attention_args


def _table_rows(text: str) -> dict[str, list[str]]:
    """``{method: cells}`` of the printed table (the lines after the dashed rule)."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line and set(line) == {"-"})
    return {cells[0]: cells for cells in (line.split() for line in lines[rule + 1:] if line.strip())}


def _run(argv: list[str], tmp_path, capsys) -> tuple[str, dict]:
    out = tmp_path / "bench.json"
    assert attention.run(_args(*argv, "--json", str(out))) == 0
    return capsys.readouterr().out, json.loads(out.read_text())


def test_table_and_json_report_the_same_statistics(tmp_path, capsys):
    text, data = _run([*TINY, "--repeats", "3", "--methods", "prope", "urope", "--no-memory"], tmp_path, capsys)
    results = data["results"]
    assert list(results) == ["rope", "prope", "urope"]  # the rope baseline is added, first
    assert "S=2 T=7 (grid 2x3 + 1 special) heads=4 head_dim=16" in text
    assert "peak MiB" not in text  # --no-memory: no memory columns
    rows = _table_rows(text)
    assert list(rows) == list(results)
    base = results["rope"]["fwd_bwd_ms"]
    for method, r in results.items():
        runs = r["runs_ms"]
        assert len(runs) == 3
        assert r["fwd_bwd_ms"] == statistics.median(runs)
        assert r["spread"] == pytest.approx((max(runs) - min(runs)) / statistics.median(runs))
        assert rows[method][1:] == [f"{r['fwd_bwd_ms']:.1f}", f"{r['fwd_bwd_ms'] / base:.3f}",
                                    f"{r['spread']:.2f}", f"{r['prepare_ms']:.2f}"]
    assert rows["rope"][2] == "1.000"
    assert data["config"]["methods"] == ["prope", "urope"] and "memory_child" not in data["config"]


def test_unknown_method_and_empty_grid_are_clear_errors():
    with pytest.raises(SystemExit, match=r"unknown method 'nope': .*urope.*valid pairs"):
        attention.run(_args(*TINY, "--methods", "rope", "nope", "--no-memory"))
    with pytest.raises(SystemExit, match=r"unknown method 'qk=KRt,vo=p2d': .*valid pairs"):
        attention.run(_args(*TINY, "--methods", "qk=KRt,vo=p2d", "--no-memory"))
    with pytest.raises(SystemExit, match="--tokens-per-view 5 leaves no patch tokens after 5 special"):
        attention.run(_args("--tokens-per-view", "5", "--special", "5", "--methods", "rope", "--no-memory"))


@pytest.mark.parametrize("argv, message", [
    (["--heads", "6", "--methods", "urope"],
     r"^method 'urope' cannot run this configuration: urope: 6 heads cannot be split into 4 anchor groups"),
    (["--head-dim", "12", "--methods", "prope"], r"^method 'prope' cannot run this configuration: .*head dim"),
    (["--head-dim", "18", "--methods", "urope"], r"^method 'rope' cannot run this configuration: .*divisible by 4"),
    (["--repeats", "0"], r"^--repeats must be >= 1, got 0$"),
    (["--heads", "0"], r"^--heads must be >= 1, got 0$"),
])
def test_a_configuration_a_method_cannot_take_is_one_line_before_any_timing(argv, message, capsys):
    """Every method (rope, the base, included) is prepared and run once on the configuration before
    anything is timed: what it cannot take is one line, no traceback and no half-printed table."""
    with pytest.raises(SystemExit, match=message) as err:
        attention.run(_args(*TINY, "--no-memory", *argv))
    assert "\n" not in str(err.value.code)
    assert capsys.readouterr().out == ""


def test_grid_for_picks_the_most_square_grid():
    assert attention.grid_for(261, 5) == (16, 16)
    assert attention.grid_for(5 + 37 * 28, 5) == (28, 37)
    assert attention.grid_for(1 + 7, 1) == (1, 7)  # a prime count of patches: one row


@pytest.mark.slow
def test_peak_memory_covers_the_gradients_and_grows_with_the_configuration(tmp_path, capsys):
    """The memory columns come from fresh child processes (what the command runs on CPU)."""
    text, data = _run([*LARGER, "--repeats", "1", "--methods", "urope"], tmp_path, capsys)
    results = data["results"]
    rows = _table_rows(text)
    for method, r in results.items():
        # the gradients of q, k and v are allocated by the measured backward and alive at its end
        assert r["peak_mib"] >= LARGER_GRAD_MIB, method
        assert rows[method][5:] == [f"{r['peak_mib']:.1f}",
                                    f"{r['peak_mib'] / results['rope']['peak_mib']:.3f}"]
    small = attention.memory_methods(_args(*TINY), ["urope"])["urope"]
    assert small < results["urope"]["peak_mib"]


def test_pairs_and_options_are_methods(tmp_path, capsys):
    pairs = ["qk=p2d,vo=KRtAdd2d", "qk=KRtAdd2d,vo=KRtAdd2d,softmax=blockwise", "dppe_tadd,softmax=blockwise"]
    text, data = _run([*TINY, "--repeats", "1", "--methods", *pairs], tmp_path, capsys)
    assert list(data["results"]) == ["rope", *pairs]
    rows, results = _table_rows(text), data["results"]
    for m in pairs:  # time and memory columns, from the unrounded results (tiny sizes: the memory may be 0)
        r, rope = results[m], results["rope"]
        assert r["fwd_bwd_ms"] > 0 and r["peak_mib"] >= 0
        memory_ratio = r["peak_mib"] / rope["peak_mib"] if rope["peak_mib"] else float("nan")
        assert rows[m][1:] == [f"{r['fwd_bwd_ms']:.1f}", f"{r['fwd_bwd_ms'] / rope['fwd_bwd_ms']:.3f}",
                               f"{r['spread']:.2f}", f"{r['prepare_ms']:.2f}", f"{r['peak_mib']:.1f}",
                               f"{memory_ratio:.3f}"]
    assert attention.parse_method(pairs[1]) == ({"qk": "KRtAdd2d", "vo": "KRtAdd2d"}, {"softmax": "blockwise"})


def test_json_skips_cli_callbacks(tmp_path):
    """``depthpe bench attention --json`` through the CLI: argparse holds the command's callbacks."""
    args = _args(*TINY, "--repeats", "1", "--methods", "rope", "--no-memory", "--json", str(tmp_path / "b.json"))
    args._run = args._bench_run = lambda a: 0
    assert attention.run(args) == 0
    assert "_run" not in json.loads((tmp_path / "b.json").read_text())["config"]


def test_scaling_curve_over_views_with_cpu_clock(tmp_path, capsys):
    out, data = _run([*TINY[2:], "--views", "2", "3", "--methods", "rope", "urope", "--repeats", "2",
                      "--no-memory", "--clock", "cpu"], tmp_path, capsys)
    assert set(data["by_views"]) == {"2", "3"} and data["results"] == data["by_views"]["2"]
    assert data["config"]["clock"] == "cpu"
    for views, res in data["by_views"].items():
        assert out.count(f"S={views} T=7") == 1
        ratio = res["urope"]["fwd_bwd_ms"] / res["rope"]["fwd_bwd_ms"]
        assert f"| urope | " in out and f"{ratio:.2f}" in out.split("per number of views")[1]


def test_rope_per_view_reference_equals_rope():
    setup = attention.Setup(_args(*TINY))
    rope, per_view = setup.prepare("rope"), setup.prepare("rope-per-view")
    q, k, v = setup.qkv
    assert torch.allclose(per_view.attend(q, k, v), rope.attend(q, k, v), atol=1e-6)


def test_compiled_rows_and_ratio_tables(tmp_path, capsys):
    """--compile adds METHOD+compile rows (ratios against rope+compile), the per-S time and memory
    ratio tables and the compiled / eager table (aot_eager backend: tracing only, seconds)."""
    text, data = _run([*TINY[2:], "--views", "2", "3", "--methods", "rope", "prope", "--repeats", "1",
                       "--compile", "--backend", "aot_eager"], tmp_path, capsys)
    for views, res in data["by_views"].items():
        assert list(res) == ["rope", "prope", "rope+compile", "prope+compile"]
        assert all(r["fwd_bwd_ms"] > 0 and r["peak_mib"] >= 0 for r in res.values())
    rows = _table_rows(text.split("\n\n")[0])
    assert rows["rope+compile"][2] == "1.000" and rows["rope"][2] == "1.000"
    assert "peak memory ratio to rope per number of views:" in text
    compiled = text.split("compiled / eager, per method:")[1]
    assert "| method | S=2 time | S=3 time | S=2 memory | S=3 memory |" in compiled
    assert "| prope |" in compiled and "prope+compile" not in compiled
    with pytest.raises(SystemExit, match="--compile does not apply"):
        attention.run(_args(*TINY, "--methods", "rope-per-view", "--compile", "--no-memory"))


def test_every_compiled_row_runs_compiled_code(tmp_path, capsys):
    """All compiled rows share one code object; with more (method, S) rows than dynamo's recompile
    limit (8 by default; lowered to 2 here, so that 4 rows are enough: 12 rows took 151 s of CI) each
    one still gets its own compiled graph instead of a quiet eager fallback."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    methods = ["rope", "urope"]
    with torch._dynamo.config.patch(recompile_limit=2):
        _run([*TINY[2:], "--views", "2", "3", "--methods", *methods, "--repeats", "1", "--no-memory",
              "--compile", "--backend", "aot_eager"], tmp_path, capsys)
        assert torch._dynamo.config.recompile_limit == 2  # restored after the run
    assert not [reason for reason in counters["unimplemented"] if "recompile limit" in reason]
    assert counters["stats"]["unique_graphs"] >= 2 * len(methods)
