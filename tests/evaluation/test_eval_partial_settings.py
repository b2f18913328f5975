"""A rerun of `depthpe eval` over a partial evaluation made with other output options (--worst,
--panels, --min-valid-fraction) is the one-line "other settings" error, not a resume that would mix
results of two settings: these options are in the settings fingerprint (evaluation/partial.py)."""

from __future__ import annotations

import re


from tests.helpers.eval_resume import Predictions, eval_into

# ARGS holds --panels 2 --worst 3 and the default --min-valid-fraction (0.01)
OTHER = [("--worst", "3", "2"), ("--panels", "2", "1"), ("--min-valid-fraction", "0.01", "0.5")]


def test_other_output_options_on_a_rerun_are_the_other_settings_error(resume_data, saved_model, tmp_path,
                                                                     monkeypatch, capsys):
    out = tmp_path / "eval"
    with monkeypatch.context() as patch:
        Predictions(patch, fail_at=1)  # stopped while predicting the first scene: settings.json is kept
        assert eval_into(resume_data, saved_model, out) == 130  # Ctrl-C: one line, status 130
    assert (out / "partial" / "settings.json").is_file()
    predictions = Predictions(monkeypatch)
    for flag, old, new in OTHER:
        capsys.readouterr()
        assert eval_into(resume_data, saved_model, out, flag, new) == 2, (
            f"{flag} {new} resumed a partial evaluation of {old}")
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        assert re.fullmatch(rf"error: --out {re.escape(str(out))} holds a partial evaluation made with other "
                            rf"settings: {flag} was {old}, now {new}; rerun with the same settings to resume it, "
                            r"choose another --out, or pass --restart to discard the partial results", err[0]), err[0]
    assert predictions.calls == 0 and (out / "partial" / "settings.json").is_file()
