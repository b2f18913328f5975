"""The scene records of a partial evaluation (OUT/partial/scenes.<rank>.jsonl): each is on disk as
soon as it is appended (a kill right after loses nothing), and a line cut short by a kill is cut
off before the next append, so that a file resumed twice still parses line by line."""

from __future__ import annotations

import json

import numpy as np

from depthpe.evaluation.partial import PartialEvaluation
from depthpe.evaluation.record import SceneRecord
from tests.helpers.eval_resume import SCENES, Predictions, eval_into, interrupt


def test_an_appended_record_is_in_the_file_before_close(tmp_path):
    partial = PartialEvaluation(tmp_path, rank=3)
    partial.start({"seed": 0})
    try:
        record = SceneRecord(key="synth/a", dataset="synth", scene="a", frames=[0, 1],
                             rows=[{"abs_rel": np.float32(0.5), "views": np.int64(3)}])
        partial.append(record)
        written = (tmp_path / "partial" / "scenes.3.jsonl").read_text()  # another reader, this process still open
        assert written.endswith("\n") and json.loads(written) == {**record.to_json(), "settings": partial.settings_hash}
        assert json.loads(written)["rows"] == [{"abs_rel": 0.5, "views": 3}]
        reader = PartialEvaluation(tmp_path)
        reader.use_settings({"seed": 0})
        assert [r.key for r in reader.records()] == ["synth/a"]
        reader.use_settings({"seed": 1})  # a line of other settings is never reused
        assert reader.records() == [] and reader.bad_records == 1
    finally:
        partial.close()


def test_a_cut_short_line_is_cut_off_when_the_evaluation_resumes(resume_data, saved_model, tmp_path, monkeypatch):
    """Interrupted after 2 scenes, a cut-short third line, resumed and interrupted after 1 more:
    3 whole lines; the third run reads them and evaluates only the rest."""
    out = tmp_path / "eval"
    kept = out / "partial" / "scenes.0.jsonl"
    interrupt(resume_data, saved_model, out, monkeypatch, after=2)
    with open(kept, "a") as f:
        f.write('{"key": "synth/val_0000')  # a line cut short by a kill
    with monkeypatch.context() as patch:
        Predictions(patch, fail_at=2)
        assert eval_into(resume_data, saved_model, out) == 130  # Ctrl-C: one line, status 130
    assert kept.read_text().endswith("\n")
    keys = [json.loads(line)["key"] for line in kept.read_text().splitlines()]
    assert len(keys) == 3 and len(set(keys)) == 3
    predictions = Predictions(monkeypatch)
    assert eval_into(resume_data, saved_model, out) == 0
    assert predictions.calls == SCENES - 3
