"""`depthpe bench data-scale`: roots of N hard-linked scenes, the validation draw, index/check
throughput and the loader workers' memory, at a tiny N (the real measurement is in docs/data.md)."""

from __future__ import annotations

import os
import re

import pytest

from depthpe.bench.data_scale import (build_root, build_seed_scenes, measure_throughput, measure_val_draw,
                                      process_memory)
from depthpe.cli import main
from depthpe.data.format.scene_file import read_index

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


def _rows(text: str, title_start: str) -> list[list[str]]:
    """The body rows of the table under the title that starts with ``title_start``."""
    block = text[text.index(title_start):].split("\n\n")[1]
    return [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines()[2:]]


@pytest.mark.slow
def test_the_benchmark_tables_are_sane(tmp_path, capsys):
    argv = ["bench", "data-scale", "--scenes", "20", "40", "--out", str(tmp_path), "--check-scenes", "16",
            "--batches", "2", *TINY]
    assert main(argv) == 0
    out = capsys.readouterr().out
    memory = _rows(out, "memory per loader worker")
    assert [r[0] for r in memory] == ["2 (seed)", "20", "40"]
    assert all(0 < float(r[4]) <= float(r[6]) <= float(r[3]) for r in memory)  # private grows, below RSS
    assert all(abs(float(r[-1].split()[0])) < 20 for r in memory[1:])  # 40 scenes: no index worth a MB
    val = _rows(out, "validation draw")
    assert [(r[0], r[2], r[-2], r[-1]) for r in val] == [("20", "40", "yes", "yes"), ("40", "80", "yes", "yes")]
    rows = _rows(out, "`depthpe index`")
    index = [r for r in rows if r[1] == "index"]
    check = [r for r in rows if r[1] == "check"]
    assert [(r[0], r[2]) for r in index] == [("20", "20"), ("20", "20"), ("40", "40"), ("40", "40")]
    assert [r[3] for r in check] == ["1 (1 used)", "2 (2 used)"] * 2  # 16 scenes: 2 workers' worth
    assert all(r[-1] == "yes" for r in rows) and all(re.match(r"16 \(first 16 of \d+\)", r[2]) for r in check)
