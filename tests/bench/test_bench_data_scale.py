"""`depthpe bench data-scale`: roots of N hard-linked scenes, the validation draw, index/check
throughput and the loader workers' memory, at a tiny N (the real measurement is in docs/data.md)."""

from __future__ import annotations

import json
import os

import pytest

from depthpe.bench.data_scale import (build_root, build_seed_scenes, measure_throughput, measure_val_draw,
                                      process_memory)
from depthpe.cli import main
from depthpe.scenes.format.scene_file import read_index

TINY = ["--seed-scenes", "2", "--views", "3", "--size", "28", "28"]


@pytest.fixture(scope="module")
def seed_dir(tmp_path_factory):
    return build_seed_scenes(tmp_path_factory.mktemp("scale"), 2, 3, (28, 28))


def test_a_root_is_n_links_listed_once_and_reused(seed_dir):
    out = seed_dir.parents[2]
    root, _, reused = build_root(out, 5, seed_dir)
    split = root / "scale" / "train"
    entries = read_index(split)
    assert not reused and len(entries) == 5 and len({e["scene_id"] for e in entries}) == 5
    seeds = sorted(os.stat(seed_dir / e["path"]).st_ino for e in read_index(seed_dir))
    assert sorted({os.stat(split / e["path"]).st_ino for e in entries}) == seeds  # hard links, no copies
    assert build_root(out, 5, seed_dir)[2]  # the second time it is reused


def test_the_validation_draw_is_counted_and_deterministic(seed_dir, tmp_path):
    root, _, _ = build_root(seed_dir.parents[2], 7, seed_dir)
    draw = measure_val_draw(root, 7, 3, 0, tmp_path)
    assert draw["drawn"] == 2 * 3 and draw["same_seed_identical"] and draw["other_seed_differs"]


def test_throughput_rows_count_every_file(seed_dir):
    root, _, _ = build_root(seed_dir.parents[2], 6, seed_dir)
    rows = measure_throughput(root, 6, [1], check_scenes=3)
    assert [(r["task"], r["files"], r["failed"], r["same"]) for r in rows] == [("index", 6, None, True),
                                                                              ("check", 3, 0, True)]


def test_process_memory_reads_proc():
    m = process_memory()
    assert m["rss"] > 10 and 0 < m["private"] <= m["rss"] and m["pss"] > 0


@pytest.mark.slow
def test_the_benchmark_tables_are_sane(tmp_path, capsys):
    result_path = tmp_path / "scale.json"
    argv = ["bench", "data-scale", "--scenes", "20", "40", "--out", str(tmp_path), "--check-scenes", "16",
            "--batches", "2", *TINY, "--json", str(result_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "memory per loader worker" in out and "validation draw" in out and "`depthpe index`" in out
    # the unrounded numbers the benchmark computed (--json), not the rounded printout
    result = json.loads(result_path.read_text())
    memory = result["memory"]
    assert [(r["label"], r["scenes"]) for r in memory] == [("seed", 2), (20, 20), (40, 40)]
    assert all(0 < r["private"] <= r["private_after_touch"] <= r["rss"] for r in memory)  # private grows, below RSS
    assert memory[0]["index_mb"] is None and all(abs(r["index_mb"]) < 20 for r in memory[1:])  # 40 scenes: no index worth a MB
    assert all(r["index_mb"] == r["private_after_touch"] - memory[0]["private_after_touch"] for r in memory[1:])
    val = result["validation"]
    assert [(v["scenes"], v["drawn"], v["same_seed_identical"], v["other_seed_differs"]) for v in val] == [
        (20, 40, True, True), (40, 80, True, True)]
    index = [r for r in result["throughput"] if r["task"] == "index"]
    check = [r for r in result["throughput"] if r["task"] == "check"]
    assert [(r["scenes"], r["files"]) for r in index] == [(20, 20), (20, 20), (40, 40), (40, 40)]
    assert [(r["workers"], r["used"]) for r in check] == [(1, 1), (2, 2)] * 2  # 16 scenes: 2 workers' worth
    assert all(r["same"] for r in result["throughput"]) and all(r["files"] == 16 for r in check)
