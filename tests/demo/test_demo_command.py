"""`depthpe demo`: the command's own wiring, without serving (the page itself is tested in
test_demo_client.py and test_demo_browser.py): the model and limits reach the page, the address is
printed, analytics are off; a model that cannot load or a bad option is one error line."""

from __future__ import annotations

import os

import pytest

from depthpe.cli import main

pytest.importorskip("gradio", reason="gradio, from the demo extra (the dev extra installs it, so CI runs this); "
                                     "pip install 'depthpe[demo]'")


def test_the_command_builds_the_page_and_serves_it_where_asked(saved_model, monkeypatch, capsys):
    import depthpe.demo.app as app

    served = {}
    built = app.build_app

    def build_app(model, device, revision=None, limits=None):
        served.update(model=model, device=device, revision=revision, limits=limits)
        return built(model, device=device, revision=revision, limits=limits)

    monkeypatch.setattr(app, "build_app", build_app)
    monkeypatch.setattr(app, "launch", lambda blocks, host, port, block, max_mb: served.update(
        host=host, port=port, block=block, max_mb=max_mb, blocks=type(blocks).__name__))
    monkeypatch.delenv("GRADIO_ANALYTICS_ENABLED", raising=False)
    assert main(["demo", "--model", str(saved_model), "--device", "cpu", "--port", "7999", "--max-images", "5",
                 "--max-mb", "3"]) == 0
    assert served["model"] == str(saved_model) and served["device"] == "cpu" and served["blocks"] == "Blocks"
    assert (served["limits"].max_images, served["limits"].max_mb) == (5, 3.0)
    assert (served["host"], served["port"], served["block"], served["max_mb"]) == ("127.0.0.1", 7999, True, 3.0)
    assert os.environ["GRADIO_ANALYTICS_ENABLED"] == "False"
    assert f"serving the depthpe demo of {saved_model}: open http://127.0.0.1:7999 in a browser" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--model", "/nonexistent/model"], "cannot load model /nonexistent/model: "),
    (["--model", "m", "--port", "70000"], "--port must be in 0..65535, got 70000"),
    (["--model", "m", "--max-images", "0"], "--max-images must be >= 1, got 0"),
    (["--model", "m", "--max-mb", "0"], "--max-mb must be > 0, got 0"),
])
def test_bad_arguments_are_one_line(argv, message, capsys):
    assert main(["demo", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
