"""report.html's line "Native AbsRel over the baselines'": for each dataset and baseline, native
AbsRel divided by the baseline's (below 1: the model beats the constant), from summary.json alone."""

from __future__ import annotations

import json

import pytest

from depthpe.report.eval_report import TABLE_METRICS, eval_report_context, write_eval_report


@pytest.fixture
def eval_out(tmp_path):
    """An evaluation folder with only summary.json: native AbsRel 0.1, baselines 0.4 and 0.2."""
    row = {"n_scenes": 1, "n_images": 3, **{m: 0.75 for m in TABLE_METRICS}}
    summary = {"synth": {"native": {**row, "abs_rel": 0.1}, "global_constant": {**row, "abs_rel": 0.4},
                         "scene_constant": {**row, "abs_rel": 0.2}}}
    (tmp_path / "summary.json").write_text(json.dumps({"meta": {}, "summary": summary}))
    return tmp_path


def test_the_ratios_are_native_over_each_baseline(eval_out):
    ratios = eval_report_context(eval_out)["ratios"]
    pairs = [(r["dataset"], r["baseline"]) for r in ratios]
    assert pairs == [("synth", "global_constant"), ("synth", "scene_constant")]
    assert [r["ratio"] for r in ratios] == pytest.approx([0.25, 0.5])


def test_report_html_shows_the_ratios(eval_out):
    html = write_eval_report(eval_out).read_text()
    assert "synth / global_constant = <b>0.250</b>" in html and "synth / scene_constant = <b>0.500</b>" in html
