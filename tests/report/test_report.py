"""report.html of `depthpe eval` and `depthpe compare`: what the page holds, checked against the
evaluation's own files (the worst images are the top native AbsRel rows of metrics_per_image.csv)."""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest

from depthpe.cli import main
from depthpe.evaluation.worst import WorstImages
from tests.fixtures.evaluation import WORST
from tests.helpers.compare import SEEDS





def native_rows(folder) -> list[dict]:
    with open(folder / "metrics_per_image.csv", newline="") as f:
        return [r for r in csv.DictReader(f) if r["mode"] == "native"]


def test_worst_images_are_the_largest_native_abs_rel(eval_dir):
    listed = json.loads((eval_dir / "worst.json").read_text())
    expected = sorted(native_rows(eval_dir), key=lambda r: -float(r["abs_rel"]))[:WORST]
    assert [(w["scene"], w["image"]) for w in listed] == [(r["scene"], int(r["image"])) for r in expected]
    assert [w["abs_rel"] for w in listed] == pytest.approx([float(r["abs_rel"]) for r in expected])
    assert [w["file"] for w in listed] == [f"worst/{rank:02d}_{w['dataset']}_{w['scene']}_v{w['image']}.png"
                                           for rank, w in enumerate(listed)]  # as docs/evaluation.md names them
    assert sorted(p.name for p in (eval_dir / "worst").iterdir()) == sorted(w["file"][6:] for w in listed)
    assert not any("panel" in w for w in listed)  # the panel is the PNG, not an array in the JSON


def test_eval_report_holds_tables_images_and_facts(eval_dir):
    page = (eval_dir / "report.html").read_text()
    metrics = page.split('id="metrics-table"')[1].split("</table>")[0]
    assert metrics.count("<tr") == 1 + 5  # header + native, scene_aligned, image_aligned and the two baselines
    assert metrics.count('class="baseline"') == 2
    scenes = page.split('id="scene-table"')[1].split("</table>")[0]
    assert scenes.count("<tr") == 1 + 2 and scenes.index("val_00000") > 0
    shown = [float(v) for v in re.findall(r"<td class=\"text\">val_\d+</td><td>\d+</td>\s*<td>([\d.]+)</td>", scenes)]
    assert shown == sorted(shown, reverse=True)  # worst scene first
    assert page.count('<figure class="worst">') == WORST
    sources = re.findall(r'src="([^"]*)"', page)
    assert len(sources) == WORST + 1 and all(s.startswith("data:image/png;base64,") for s in sources)  # + 1 panel
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing fetched from a network
    assert "config.global_pe" in page and "rope" in page


def test_worst_images_merge_keeps_the_global_top():
    rows = lambda vals: [{"dataset": "d", "scene": "s", "image": i, "mode": "native", "abs_rel": v}  # noqa: E731
                         for i, v in enumerate(vals)]
    img, depth = np.zeros((3, 3, 2, 2)), np.ones((3, 2, 2))
    a, b = WorstImages(2), WorstImages(2)
    a.offer(rows([0.1, 0.5, 0.3]), img, depth, depth, depth > 0, [7, 8, 9])
    b.offer(rows([0.4, float("nan"), 0.2]), img, depth, depth, depth > 0, [0, 1, 2])
    merged = WorstImages(2).merge([a, b]).items
    assert [m["abs_rel"] for m in merged] == [0.5, 0.4] and merged[0]["frame"] == 8
    assert merged[0]["panel"].shape == (2, 8, 3)


def test_worst_images_with_equal_abs_rel_do_not_depend_on_the_order():
    """Ties (two copies of a scene with the same views) go to the first scene name, whichever comes
    first: the worst list of a resumed or several-process evaluation is that of a plain run."""
    img, depth = np.zeros((1, 3, 2, 2)), np.ones((1, 2, 2))
    kept = []
    for scenes in (["s1", "s2"], ["s2", "s1"]):
        collector = WorstImages(1)
        for scene in scenes:
            collector.offer([{"dataset": "d", "scene": scene, "image": 0, "mode": "native", "abs_rel": 0.5}],
                            img, depth, depth, depth > 0, [0])
        kept.append([m["scene"] for m in collector.items])
        parts = []
        for scene in scenes:
            parts.append(WorstImages(1))
            parts[-1].offer([{"dataset": "d", "scene": scene, "image": 0, "mode": "native", "abs_rel": 0.5}],
                            img, depth, depth, depth > 0, [0])
        kept.append([m["scene"] for m in WorstImages(1).merge(parts).items])
    assert kept == [["s1"]] * 4


def test_compare_report_has_the_tables_of_compare_md(study, tmp_path):
    _, numbers = study
    out = tmp_path / "cmp"
    inputs = [str(numbers[(pe, s)]["eval"]) for pe in ("rope", "prope") for s in SEEDS]
    assert main(["compare", *inputs, "--bootstrap", "200", "--out", str(out)]) == 0
    page = (out / "report.html").read_text()
    md_rows = [line for line in (out / "compare.md").read_text().splitlines() if line.startswith("| rope")
               or line.startswith("| prope")]
    assert len(md_rows) == 2 and page.count('class="sortable compare-table"') == 1
    for line in md_rows:
        label, seeds, native = [c.strip() for c in line.strip("|").split("|")][:3]
        assert f'<td class="text">{label}</td><td>{seeds}</td><td>{native}</td>' in page
    assert not re.search(r'(src|href)="(https?:)?//', page)
