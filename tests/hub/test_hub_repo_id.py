"""An invalid or unwritable ``hub.repo_id`` stops a run in preflight, before the run folder exists;
``depthpe push --repo-id`` is checked the same way (huggingface_hub's own validator). The Hub side
runs against the loopback fake Hub (tests/helpers/hub_server.py)."""

from __future__ import annotations

import pytest

from depthpe.cli import main
from depthpe.config import ConfigError
from depthpe.run import dump_run_config
from depthpe.run.preflight import check_hub_repo
from tests.helpers.hub_server import FakeHub
from tests.helpers.training import run_config
from tests.helpers.hub import TOKEN, hand_made_run, point_in_process


@pytest.mark.parametrize("repo_id", ["a/b/c", "bob/x y"])
def test_an_invalid_repo_id_stops_training_before_the_run_folder_exists(synth_root, tmp_path, capsys, repo_id):
    out = tmp_path / "run"
    config = tmp_path / "run.yaml"
    config.write_text(dump_run_config(run_config(synth_root, out, hub={"repo_id": repo_id})))
    assert main(["train", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: hub.repo_id: {repo_id!r} is not a Hub repository id: "), err
    assert "set hub.repo_id=null" in lines[0] and not out.exists()


def test_a_repo_the_hub_refuses_stops_preflight_and_a_writable_one_passes(synth_root, tmp_path, monkeypatch):
    cfg = run_config(synth_root, tmp_path / "run", hub={"repo_id": "alice/depth-run", "private": True})
    with FakeHub(fail={"create": -1}, fail_status=403) as hub:
        point_in_process(monkeypatch, hub, tmp_path / "cache")
        with pytest.raises(ConfigError, match=r"^hub.repo_id: the Hub refused to create or write to alice/depth-run "
                                              r"\(HTTP 403: .*with write access") as refused:
            check_hub_repo(cfg)
        assert TOKEN not in str(refused.value) and "\n" not in str(refused.value)
    with FakeHub() as hub:
        point_in_process(monkeypatch, hub, tmp_path / "cache")
        check_hub_repo(cfg)
        assert hub.repo("alice/depth-run").private
    with FakeHub(fail={"create": -1}) as hub:  # a Hub in trouble (HTTP 500) is no verdict: pushes retry later
        point_in_process(monkeypatch, hub, tmp_path / "cache")
        check_hub_repo(cfg)
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "no_token_here"))
    with FakeHub(fail={"create": -1}, fail_status=403) as hub:  # no token: nothing asked, nothing refused
        point_in_process(monkeypatch, hub, tmp_path / "cache")
        monkeypatch.delenv("HF_TOKEN")
        check_hub_repo(cfg)
        assert hub.requests == []


def test_push_refuses_an_invalid_repo_id_before_touching_the_folder(tmp_path, monkeypatch, capsys):
    run = hand_made_run(tmp_path)
    card = (run / "final" / "README.md")
    before = card.read_bytes() if card.exists() else None
    with FakeHub() as hub:
        point_in_process(monkeypatch, hub, tmp_path / "cache")
        with pytest.raises(SystemExit) as stop:
            main(["push", str(run / "final"), "--repo-id", "bob/x y", "--retries", "0"])
        assert stop.value.code == 2 and hub.requests == []
    err = capsys.readouterr().err
    assert "error: argument --repo-id: 'bob/x y' is not a Hub repository id" in err
    assert (card.read_bytes() if card.exists() else None) == before
