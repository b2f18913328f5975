"""Hub pushes against a loopback fake Hub (tests/helpers/hub_server.py): nothing leaves the machine.

Subprocesses (training, eval/evaluate.py) get HF_ENDPOINT in their environment; in-process code is
pointed at the server by patching ``huggingface_hub.constants`` (read at import time).
"""

import concurrent.futures
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from tests.helpers.hub_server import FakeHub

from depthpe.hub.folders import resolve_model_folder
from depthpe.hub.pusher import HubPusher
from depthpe.hub.repo import step_tag
from depthpe.model.training_inputs import TrainingInputs, write_training_inputs
from depthpe.hub.card import CARD_MODES, CardInfo, card_data, render_model_card
from depthpe.run.loading import dump_run_config
from depthpe.run.pushes import TrainingPushes, card_training
from depthpe.run.validation import VAL_SUMMARY_NAME, read_val_summary, write_val_summary
from depthpe.run.checkpoints import rotate_checkpoints as _rotate_checkpoints
from tests.helpers.training import run_config
from tests.helpers.hub import INPUTS, SUMMARY, TOKEN, hand_made_run, model_folder, point_in_process, typed_run_config

REPO_ROOT = Path(__file__).resolve().parents[2]
REPO = "alice/depth-run"
MODEL_FILES = ("config.json", "model.safetensors", "README.md")


def _front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])








# ------------------------------------------------------------------------------- pusher, in-process
@pytest.fixture
def online(monkeypatch):
    """conftest sets HF_HUB_OFFLINE=1; the pusher tests talk to the loopback server."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


def test_pusher_retries_with_backoff_protects_folder_and_lands_byte_identical(tmp_path, online):
    folder = model_folder(tmp_path / "ckpt" / "model")
    logs = []
    with FakeHub(fail={"commit": 2}) as hub:
        pusher = HubPusher(REPO, private=True, endpoint=hub.url, token=TOKEN, retries=3, retry_delay=0.2,
                           log=logs.append)
        handle = pusher.push(folder, paths_in_repo=("checkpoints/step_0000002", ""), tag="step-0000002",
                             protect=tmp_path / "ckpt")
        # two failures and 0.2 + 0.4 s of back-off: the upload is surely still running now
        assert pusher.is_pending(tmp_path / "ckpt") and not handle.done()
        assert pusher.wait(30) and handle.done()
        assert not pusher.is_pending(tmp_path / "ckpt")
        result = handle.result
        assert result.ok and result.attempts == 3 and len(hub.failed) == 2, (result, logs)
        assert sum("retrying in" in line for line in logs) == 2
        assert [line.split("retrying in ")[1] for line in logs if "retrying in" in line] == ["0.2 s", "0.4 s"]
        main = hub.files(REPO)
        for name in MODEL_FILES:
            local = (folder / name).read_bytes()
            assert main[f"checkpoints/step_0000002/{name}"] == local and main[name] == local
        assert hub.repo(REPO).private
        assert hub.repo(REPO).tags["step-0000002"] == result.commit == hub.repo(REPO).branches["main"]
        # re-pushing the same step (e.g. after a resume) moves the tag instead of failing
        (folder / "config.json").write_text('{"global_pe": "prope", "embed_dim": 64}')
        again = pusher.push(folder, paths_in_repo=("",), tag="step-0000002")
        assert again.wait(30) and again.result.ok, again.result
        assert hub.files(REPO, "step-0000002")["config.json"] == (folder / "config.json").read_bytes()
    assert not any(TOKEN in line for line in logs)
    assert f"Bearer {TOKEN}" in hub.authorizations


def test_pusher_gives_up_without_raising_and_keeps_serving(tmp_path, monkeypatch):
    from huggingface_hub import constants

    folder = model_folder(tmp_path / "m")
    logs = []
    offline = HubPusher(REPO, endpoint="http://127.0.0.1:9", token=TOKEN, retries=5, retry_delay=10, log=logs.append)
    handle = offline.push(folder)  # HF_HUB_OFFLINE=1 (conftest): fails at once, no retries, says why
    assert handle.wait(10) and not handle.result.ok and handle.result.attempts == 1
    assert "HF_HUB_OFFLINE" in handle.result.error
    assert any("giving up" in line for line in logs) and not any("Training" in line for line in logs)  # neutral
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with FakeHub(fail={"create": -1}) as hub:
        pusher = HubPusher(REPO, endpoint=hub.url, token=TOKEN, retries=2, retry_delay=0.01, log=logs.append,
                           give_up_hint="Try again tomorrow.")
        first = pusher.push(folder)
        assert first.wait(30)
        assert not first.result.ok and first.result.attempts == 3 and "500" in first.result.error
        assert any("giving up" in line and line.endswith("Try again tomorrow.") for line in logs)
        assert not pusher.pending()
        hub.fail.clear()  # the Hub recovers: the worker thread is still alive and the next push lands
        second = pusher.push(folder, tag="v1")
        assert second.wait(30) and second.result.ok
        assert hub.files(REPO, "v1")["model.safetensors"] == (folder / "model.safetensors").read_bytes()
    assert not any(TOKEN in line for line in logs)
    with pytest.raises(FileNotFoundError, match="save_pretrained"):
        pusher.push(tmp_path)  # not a model folder: refused at once, in the caller
    with pytest.raises(ValueError, match="user/name"):
        HubPusher("a/b/c", endpoint="http://127.0.0.1:9", token=TOKEN)


def test_rotation_spares_checkpoints_whose_upload_is_pending(tmp_path):
    for step in (1, 2, 3, 4):
        d = tmp_path / "checkpoints" / f"step_{step:07d}"
        d.mkdir(parents=True)
        (d / "trainer_state.json").write_text("{}")
    _rotate_checkpoints(tmp_path, 2, protected=lambda p: p.name == "step_0000001")
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_0000001", "step_0000003", "step_0000004"]
    _rotate_checkpoints(tmp_path, 2)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_0000003", "step_0000004"]
    assert step_tag(400) == "step-0000400" and step_tag(400, "runs/a") == "runs-a-step-0000400"


def test_push_uploads_training_inputs_json_when_the_folder_has_one(tmp_path, online):
    with_inputs = model_folder(tmp_path / "a", inputs=INPUTS)
    without = model_folder(tmp_path / "b", seed=1)
    with FakeHub() as hub:
        pusher = HubPusher(REPO, endpoint=hub.url, token=TOKEN, retries=0, log=lambda line: None)
        first = pusher.push(with_inputs, paths_in_repo=("checkpoints/step_0000001", ""), tag="t1")
        second = pusher.push(without, paths_in_repo=("other",))
        assert pusher.wait(30) and first.result.ok and second.result.ok, (first.result, second.result)
        local = (with_inputs / "training_inputs.json").read_bytes()
        at_tag = hub.files(REPO, "t1")
        assert at_tag["training_inputs.json"] == local and at_tag["checkpoints/step_0000001/training_inputs.json"] == local
        main = hub.files(REPO)
        assert "other/model.safetensors" in main and "other/training_inputs.json" not in main
        assert not hub.unknown


def test_a_failed_tag_is_retried_without_a_second_commit(tmp_path, online):
    folder = model_folder(tmp_path / "m")
    with FakeHub(fail={"tag": 1}) as hub:
        pusher = HubPusher(REPO, endpoint=hub.url, token=TOKEN, retries=2, retry_delay=0.01, log=lambda line: None)
        handle = pusher.push(folder, tag="v1")
        assert handle.wait(30) and handle.result.ok and handle.result.attempts == 2, handle.result
        assert sum(path.endswith("/commit/main") for _, path in hub.requests) == 1
        assert hub.repo(REPO).tags["v1"] == handle.result.commit == hub.repo(REPO).branches["main"]


def test_abandon_cancels_queued_uploads_and_stops_retrying(tmp_path, online):
    first_dir, second_dir = model_folder(tmp_path / "a"), model_folder(tmp_path / "b", seed=1)
    with FakeHub(hold_commits=True) as hub:
        pusher = HubPusher(REPO, endpoint=hub.url, token=TOKEN, retries=5, retry_delay=60, log=lambda line: None)
        first, second = pusher.push(first_dir), pusher.push(second_dir)
        deadline = time.monotonic() + 30
        while not any(path.endswith("/commit/main") for _, path in hub.requests) and time.monotonic() < deadline:
            time.sleep(0.02)
        hub.fail["commit"] = 1  # the held commit fails: a retry would wait 60 s
        assert pusher.abandon() == sorted([first_dir.resolve(), second_dir.resolve()])
        assert second.done() and not second.result.ok and "abandoned" in second.result.error
        assert not pusher.is_pending(second_dir) and pusher.is_pending(first_dir)
        hub.hold.set()
        started = time.monotonic()
        assert first.wait(30) and time.monotonic() - started < 20  # no 60 s back-off after abandon()
        assert not first.result.ok and first.result.attempts == 1 and "abandoned" in first.result.error
        assert not pusher.pending() and len(pusher.results) == 2
        with pytest.raises(RuntimeError, match="abandoned"):
            pusher.push(first_dir)


# ------------------------------------------------------------------------------ a Hub that hangs
def _bounded(fn, limit: float):
    """(fn(), seconds it took), run in a helper thread so that a hang fails the test after ``limit`` s
    instead of hanging the test run."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as err:  # argparse's SystemExit included
            box["error"] = err

    started = time.monotonic()
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        pytest.fail(f"still running after {limit} s")
    if "error" in box:
        raise box["error"]
    return box["value"], time.monotonic() - started


def _wait_until(condition, limit: float) -> bool:
    """Poll ``condition()`` every 20 ms for at most ``limit`` s."""
    end = time.monotonic() + limit
    while not condition() and time.monotonic() < end:
        time.sleep(0.02)
    return condition()


def test_push_command_returns_when_the_hub_never_answers(tmp_path, monkeypatch, capsys):
    from depthpe.cli import main

    run = hand_made_run(tmp_path)
    with FakeHub(stall=True) as hub:
        point_in_process(monkeypatch, hub, tmp_path / "cache")
        rc, seconds = _bounded(lambda: main(["push", str(run), "--repo-id", "bob/x", "--timeout", "1"]), 30)
        assert hub.stalled == 1 and not hub.repos  # the first request hung; nothing was retried
    out = capsys.readouterr().out
    assert rc == 1 and seconds < 10, (seconds, out)
    assert (f"depthpe push: {hub.url} did not answer within 1 s (--timeout), so the upload of {run / 'final'} "
            "to bob/x stopped after 1 attempt(s). Check the network and HF_ENDPOINT") in out, out
    assert "run the command again" in out and "Training goes on" not in out and TOKEN not in out


def test_an_upload_stuck_past_its_deadline_stops_protecting_its_checkpoint(tmp_path, online):
    cfg = typed_run_config(f"hub.repo_id={REPO}", "hub.retries=0", "train.checkpoint_every=1")
    out = tmp_path / "run"
    ckpts = [out / "checkpoints" / f"step_{s:07d}" for s in (1, 2, 3)]
    for seed, ckpt in enumerate(ckpts):
        model_folder(ckpt / "model", seed=seed)
        (ckpt / "trainer_state.json").write_text("{}")  # a complete checkpoint: rotation may delete it
    logs = []
    with FakeHub(stall=True) as hub:
        # request_timeout 60 s: the request stays stuck, only the 1 s deadline can end the jobs
        pushes = TrainingPushes(cfg, out, log=logs.append, endpoint=hub.url, token=TOKEN, request_timeout=60,
                                job_deadline=1)
        first, second = pushes.after_checkpoint(ckpts[0], 1), pushes.after_checkpoint(ckpts[1], 2)
        _rotate_checkpoints(out, 1, protected=pushes.is_pending)
        assert all(c.is_dir() for c in ckpts)  # both uploads pending: kept
        started = time.monotonic()
        assert _wait_until(lambda: not pushes.pusher.pending(), 10), logs
        assert 0.9 < time.monotonic() - started < 6  # the second job's clock starts when the first gives up
        _rotate_checkpoints(out, 1, protected=pushes.is_pending)
        assert [c.is_dir() for c in ckpts] == [False, False, True]
        assert first.done() and second.done() and not first.result.ok and not second.result.ok
        assert first.result.reason == second.result.reason == "deadline"
        assert first.result.error == "not done within its deadline of 1 s"
        assert second.result.error == "not started within its deadline of 1 s (the upload before it is stuck)"
        assert sum("giving up" in line and "Training goes on" in line for line in logs) == 2, logs
        hub.unstall.set()  # the stuck request comes back: it must change nothing
        assert concurrent.futures.wait([first.future], 10).done
        assert not first.result.ok and first.result.reason == "deadline" and len(pushes.pusher.results) == 2
        assert not any("/commit/" in path for _, path in hub.requests)  # no further request for a given-up job
        third = pushes.after_checkpoint(ckpts[2], 3)  # the pusher still works
        assert third.wait(30) and third.result.ok, third.result
    assert not any(TOKEN in line for line in logs)


def test_finish_abandons_uploads_still_running_at_its_timeout_and_says_how_to_push_later(tmp_path, online):
    cfg = typed_run_config(f"hub.repo_id={REPO}", "hub.retries=0", "train.checkpoint_every=1")
    out = tmp_path / "run"
    model_folder(out / "final")
    logs = []
    with FakeHub(stall=True) as hub:
        pushes = TrainingPushes(cfg, out, log=logs.append, endpoint=hub.url, token=TOKEN, request_timeout=60)
        handle = pushes.after_final(out / "final", 3)
        assert handle is not None and not pushes.finish(timeout=0.5)
        hub.unstall.set()  # the stuck request returns: the job ends as abandoned, nothing retried
        assert handle.wait(10) and not handle.result.ok and "abandoned" in handle.result.error
    assert logs[-3:] == [
        f"hub: waiting up to 0 s for 1 upload(s) to {REPO}",
        "hub: uploads still running after 0 s are abandoned",
        f"hub: abandoned 1 upload(s) to {REPO}: {[str((out / 'final').resolve())]}; push them later with "
        "`depthpe push`"], logs


def test_a_push_that_cannot_be_queued_is_logged_and_training_goes_on(tmp_path, online):
    """A missing folder (e.g. removed by hand) cannot get its card: one log line, None, no exception;
    checkpoints between pushes (hub.push_every) are not pushed at all."""
    cfg = typed_run_config(f"hub.repo_id={REPO}", "train.checkpoint_every=2", "hub.push_every=2")
    logs = []
    pushes = TrainingPushes(cfg, tmp_path / "run", log=logs.append, endpoint="http://127.0.0.1:9", token=TOKEN)
    assert pushes.after_checkpoint(tmp_path / "run" / "checkpoints" / "step_0000002", 2) is None  # 1st: skipped
    assert logs == [] and pushes.pusher.pending() == []
    missing = tmp_path / "run" / "checkpoints" / "step_0000004"
    assert pushes.after_checkpoint(missing, 4) is None
    assert len(logs) == 1 and logs[0].startswith(f"hub: could not queue the push of {missing / 'model'}: "), logs


def test_offline_mode_is_said_once_at_the_start(tmp_path):
    """conftest sets HF_HUB_OFFLINE=1, as a user's offline cluster node would."""
    logs = []
    TrainingPushes(typed_run_config(f"hub.repo_id={REPO}"), tmp_path, log=logs.append, token=TOKEN)
    assert logs == [f"hub: HF_HUB_OFFLINE is set, so nothing can be pushed to {REPO}; unset it (training goes on; "
                    "push later with `depthpe push`)"]


def test_a_request_that_comes_back_after_the_deadline_cannot_revive_its_job(tmp_path, online):
    folder = model_folder(tmp_path / "m")
    logs = []
    with FakeHub(hold_commits=True) as hub:
        pusher = HubPusher(REPO, endpoint=hub.url, token=TOKEN, retries=3, retry_delay=0.01, request_timeout=60,
                           job_deadline=1, log=logs.append)
        handle = pusher.push(folder, tag="v1")
        assert handle.wait(10) and not pusher.is_pending(folder) and handle.result.reason == "deadline"
        hub.hold.set()  # the held commit lands now, after the deadline
        assert concurrent.futures.wait([handle.future], 10).done
        assert hub.repo(REPO).branches["main"] in hub.repo(REPO).commits and not hub.repo(REPO).tags
        assert not handle.result.ok and handle.result.commit is None and handle.result.attempts == 1
        assert pusher.results == [handle.result]
        late = [line for line in logs if "came back after its deadline" in line]
        assert len(late) == 1 and "reached the Hub without its tag v1; the job stays given up" in late[0], logs
        assert not any(line.startswith("hub: pushed") for line in logs)


def test_a_normal_push_runs_under_a_short_request_timeout_and_deadline(tmp_path, online):
    folder = model_folder(tmp_path / "m", inputs=INPUTS)
    with FakeHub() as hub:
        pusher = HubPusher(REPO, endpoint=hub.url, token=TOKEN, retries=0, request_timeout=2, job_deadline=20,
                           log=lambda line: None)
        handle = pusher.push(folder, tag="v1")
        assert handle.wait(20) and handle.result.ok and handle.result.reason is None, handle.result
        assert hub.files(REPO, "v1")["model.safetensors"] == (folder / "model.safetensors").read_bytes()
        assert not hub.stalled and not pusher.pending() and pusher.wait(1)
    with pytest.raises(ValueError, match="job_deadline must be > 0"):
        HubPusher(REPO, endpoint=hub.url, token=TOKEN, job_deadline=0)


# ------------------------------------------------------------------------------------ model card


def test_model_card_metadata_eval_table_config_and_vggt_licence():
    info = CardInfo(model_config={"global_pe": "prope", "embed_dim": 1024}, repo_id="alice/x",
                    revision="step-0000400", training=card_training(typed_run_config()), step=400, total_steps=240000,
                    eval_summary=SUMMARY, eval_note="Validation at optimizer step 400", training_inputs=INPUTS)
    card = render_model_card(info)
    meta = _front_matter(card)
    assert meta["library_name"] == "depthpe" and meta["pipeline_tag"] == "depth-estimation"
    assert meta["license"] == "apache-2.0" and "base_model" not in meta
    assert {"global-pe-prope", "co3d", "megasynth"} <= set(meta["tags"])
    assert "| co3d | native | 3 | 12 | 0.1234 |" in card and "| co3d | scene_aligned |" in card
    assert "| co3d | image_aligned |" in card and "global_constant" not in card
    assert 'from_pretrained("alice/x", revision="step-0000400")' in card
    assert "optimizer step 400 of 240000" in card and "lr: 0.0001" in card and "| optimizer steps | 240000 |" in card
    assert "Trained at image width 84, aspect [0.5, 1] (height / width), views [4, 8]" in card
    assert "/home/alice" not in card and "repo_id" not in card  # no local paths, no hub section

    cfg = typed_run_config("model.init_from=facebook/VGGT-1B", "model.global_pe=rope")
    vggt = render_model_card(CardInfo(model_config={"global_pe": "rope"}, training=card_training(cfg)))
    meta = _front_matter(vggt)  # init_weights comes from the config's model.init_from
    assert meta["license"] == "cc-by-nc-4.0" and meta["base_model"] == "facebook/VGGT-1B"
    assert "non-commercial" in vggt and "No evaluation results yet" in vggt
    assert "model-index" not in meta and "Trained at" not in vggt
    local = typed_run_config("model.init_from=/home/alice/weights/vggt.pt",
                              "model.backbone_weights=/home/alice/weights/dinov2_vits14.safetensors")
    card = render_model_card(CardInfo(model_config={"global_pe": "prope"}, training=card_training(local)))
    assert "/home/alice" not in card and "vggt.pt" in card and "base_model" not in _front_matter(card)
    assert "dinov2_vits14.safetensors" in card  # the file name stays, its folder does not
    with pytest.raises(ValueError, match="init_weights"):
        CardInfo(model_config={}, init_weights="someone/else")
    with pytest.raises(TypeError, match="TrainingSection.*card_training"):
        CardInfo(model_config={}, training=typed_run_config())


def test_model_card_model_index_and_datasets_metadata():
    summary = {**SUMMARY, "synth": {
        "native": {"abs_rel": 0.31234, "delta1": 0.61, "n_scenes": 1, "n_images": 4},
        "scene_aligned": {"abs_rel": 0.2, "delta1": float("nan"), "n_scenes": 1, "n_images": 4},
        "image_aligned": {"abs_rel": 0.19, "delta1": 0.7, "n_scenes": 1, "n_images": 4}}}
    sources = [{"name": n, "root": "/d"} for n in ("co3d", "wildrgbd", "arkitscenes", "synth", "mydata")]
    sources.append({"name": "mega", "dataset": "megasynth", "root": "/d"})
    info = CardInfo(model_config={"global_pe": "prope"}, repo_id="alice/depth-x", eval_summary=summary,
                    training=card_training(typed_run_config(sources=sources)))
    card = render_model_card(info)
    meta = _front_matter(card)
    assert meta["datasets"] == ["co3d", "hongchi/wildrgbd", "arkitscenes", "mydata", "hwjiang/MegaSynth"]
    assert "built-in procedural scenes" in card and "synth" in meta["tags"]
    [model] = meta["model-index"]
    assert model["name"] == "depth-x"
    got = {(r["dataset"]["type"], m["config"], m["type"]): m["value"] for r in model["results"] for m in r["metrics"]}
    expected = {(ds, mode, metric): round(values[metric], 4) for ds, modes in summary.items()
                for mode, values in modes.items() if mode in CARD_MODES
                for metric in ("abs_rel", "delta1") if values[metric] == values[metric]}  # NaN left out
    assert got == expected and len(got) == 11
    assert all(r["task"]["type"] == "depth-estimation" for r in model["results"])
    assert {r["dataset"]["name"] for r in model["results"]} == {"CO3Dv2", "depthpe synth (procedural scenes)"}
    assert all(m["name"].endswith(f"({m['config']})") for r in model["results"] for m in r["metrics"])
    # huggingface_hub reads the metadata back into the same EvalResults
    from huggingface_hub import ModelCard

    parsed = ModelCard(card).data
    assert parsed.model_name == "depth-x" and len(parsed.eval_results) == 11
    assert card_data(info).to_dict()["model-index"] == meta["model-index"]
    assert "model-index" not in card_data(CardInfo(model_config={}, eval_summary={"co3d": {"native": {}}})).to_dict()


# ------------------------------------------------------------- run pushes and val summary, no training
def test_val_summary_round_trip(tmp_path):
    import numpy as np

    assert read_val_summary(tmp_path) is None
    summary = {"synth": {"native": {"abs_rel": np.float32(0.25), "delta1": 0.5, "n_scenes": 1, "n_images": 2}}}
    path = write_val_summary(tmp_path, 7, summary, scenes=1, views=2)
    assert path == tmp_path / VAL_SUMMARY_NAME and [p.name for p in tmp_path.iterdir()] == [VAL_SUMMARY_NAME]
    assert read_val_summary(tmp_path) == {
        "step": 7, "summary": {"synth": {"native": {"abs_rel": 0.25, "delta1": 0.5, "n_scenes": 1, "n_images": 2}}},
        "max_scenes": 1, "views": 2}
    write_val_summary(tmp_path, 9, summary)  # replaces the previous one
    doc = read_val_summary(tmp_path)
    assert doc["step"] == 9 and doc["views"] is None and doc["max_scenes"] is None
    for broken in ("{oops", '{"step": 3}', "[1, 2]"):
        path.write_text(broken)
        with pytest.raises(ValueError, match=VAL_SUMMARY_NAME):
            read_val_summary(tmp_path)


def test_run_pushes_take_the_typed_config_and_move_a_repeated_step_tag(tmp_path, online):
    cfg = typed_run_config("model.init_from=facebook/VGGT-1B", "train.steps=4", "train.checkpoint_every=2",
                            f"hub.repo_id={REPO}", "hub.retries=0")
    out = tmp_path / "run"
    ckpts = [out / "checkpoints" / f"step_{s:07d}" for s in (2, 4)]
    for seed, ckpt in enumerate(ckpts):
        model_folder(ckpt / "model", seed=seed, inputs=INPUTS)
    final = model_folder(out / "final", seed=9, inputs=INPUTS)
    logs = []
    with FakeHub() as hub:
        pushes = TrainingPushes(cfg, out, log=logs.append, endpoint=hub.url, token=TOKEN)
        assert (pushes.init_weights, pushes.total_steps, pushes.checkpoint_every) == ("facebook/VGGT-1B", 4, 2)
        pushes.after_checkpoint(ckpts[0], 2)
        pushes.record_validation(4, SUMMARY, scenes=3, views=4)
        pushes.after_checkpoint(ckpts[1], 4)
        pushes.after_final(final, 4)  # the same step as the last checkpoint: its tag moves to this push
        assert pushes.finish(30), logs
        assert not hub.unknown
    assert not (out / VAL_SUMMARY_NAME).exists()  # the trainer writes it (write_val_summary), not the pusher
    step2 = hub.files(REPO, "step-0000002")["README.md"].decode()
    meta = _front_matter(step2)
    assert meta["base_model"] == "facebook/VGGT-1B" and meta["license"] == "cc-by-nc-4.0"
    assert "step 2 of 4" in step2 and "No evaluation results yet" in step2 and "model-index" not in meta
    assert "Trained at image width 84" in step2
    main = hub.files(REPO)
    assert hub.files(REPO, "step-0000004") == main and main["model.safetensors"] == (final / "model.safetensors").read_bytes()
    card = main["README.md"].decode()
    assert "Final model of the run, after 4 optimizer steps" in card and _front_matter(card)["model-index"]
    assert "Validation at optimizer step 4 (at most 3 scenes per dataset, 4 views per scene)" in card
    assert "Intermediate checkpoint at optimizer step 4 of 4" in main["checkpoints/step_0000004/README.md"].decode()
    assert main["checkpoints/step_0000004/training_inputs.json"] == (ckpts[1] / "model" / "training_inputs.json").read_bytes()




def test_push_command_pushes_a_run_with_its_typed_config_and_val_summary(tmp_path, monkeypatch, capsys):
    from depthpe.cli import main

    run = hand_made_run(tmp_path)
    with FakeHub() as hub:
        point_in_process(monkeypatch, hub, tmp_path / "cache")
        rc = main(["push", str(run), "--repo-id", "bob/by-hand", "--retry-delay", "0.01"])
        printed = capsys.readouterr().out
        assert rc == 0, printed
        files = hub.files("bob/by-hand")
    for name in (*MODEL_FILES, "training_inputs.json"):
        assert files[name] == (run / "final" / name).read_bytes(), name
    card = files["README.md"].decode()
    assert "Validation at optimizer step 5 (at most 3 scenes per dataset, 4 views per scene)" in card
    assert "| co3d | native | 3 | 12 | 0.1234 |" in card and "Final model of the run, after 5 optimizer steps" in card
    assert "Trained at image width 84, aspect [0.5, 1]" in card and "| optimizer steps | 5 |" in card
    meta = _front_matter(card)
    assert meta["datasets"] == ["co3d", "hwjiang/MegaSynth"] and meta["model-index"][0]["name"] == "by-hand"
    assert TOKEN not in printed


def test_push_command_writes_and_pushes_the_demo_space_app(tmp_path, monkeypatch, capsys):
    from depthpe.cli import main

    run = hand_made_run(tmp_path)
    with FakeHub() as hub:
        point_in_process(monkeypatch, hub, tmp_path / "cache")
        rc = main(["push", str(run), "--repo-id", "bob/demo", "--retry-delay", "0.01", "--demo-app", "--tag", "v1"])
        assert rc == 0, capsys.readouterr().out
        files = hub.files("bob/demo")
    app = files["app.py"].decode()
    assert app == (run / "final" / "app.py").read_text()
    assert "os.environ.get(\"DEPTHPE_MODEL\", 'bob/demo')" in app and "'v1'" in app
    compile(app, "app.py", "exec")


def test_push_command_refuses_a_run_whose_config_does_not_load(tmp_path, capsys):
    from depthpe.cli import main

    run = hand_made_run(tmp_path)
    card = (run / "final" / "README.md").read_bytes()
    for text, why in (("train:\n  stepz: 3\n", "train.stepz"), ("data: [\n  x: 1", "not valid YAML"),
                      ("train:\n  steps: -1\n", "train.steps must be >= 1")):
        (run / "config.yaml").write_text(text)
        assert main(["push", str(run), "--repo-id", "bob/x"]) == 2
        out = capsys.readouterr().out
        assert out.startswith("depthpe push: ") and out.count("\n") == 1, out
        assert why in out and str(run / "config.yaml") in out and out.count(str(run / "config.yaml")) == 1, out
        assert (run / "final" / "README.md").read_bytes() == card  # nothing written, nothing pushed


def test_push_command_refuses_a_model_that_cannot_be_loaded_before_any_request(tmp_path, monkeypatch, capsys):
    """A cut-short model.safetensors, or weights that are not those of config.json's model, is not
    uploaded: nobody could load it from the Hub. Only the file headers are read."""
    from depthpe.cli import main

    run = hand_made_run(tmp_path)
    final = run / "final"
    weights, config = (final / "model.safetensors").read_bytes(), json.loads((final / "config.json").read_text())
    card = (final / "README.md").read_bytes()
    wider = dict(config, head_features=2 * config["head_features"])
    cases = [(lambda: (final / "model.safetensors").write_bytes(weights[:100]), "not a readable safetensors file"),
             (lambda: (final / "config.json").write_text(json.dumps(wider)), "does not describe the weights in")]
    with FakeHub() as hub:
        point_in_process(monkeypatch, hub, tmp_path / "cache")
        for damage, why in cases:
            damage()
            assert main(["push", str(run), "--repo-id", "bob/x"]) == 2
            out = capsys.readouterr().out
            assert out.startswith("depthpe push: ") and why in out and out.count("\n") == 1, out
            (final / "model.safetensors").write_bytes(weights)
            (final / "config.json").write_text(json.dumps(config))
        assert hub.requests == [] and (final / "README.md").read_bytes() == card


def test_push_command_says_in_its_own_words_that_the_upload_failed(tmp_path, monkeypatch, capsys):
    from depthpe.cli import main

    run = hand_made_run(tmp_path)
    with FakeHub(fail={"create": -1}) as hub:
        point_in_process(monkeypatch, hub, tmp_path / "cache")
        rc = main(["push", str(run / "final"), "--repo-id", "bob/x", "--retries", "1", "--retry-delay", "0.01"])
    out = capsys.readouterr().out
    assert rc == 1 and "giving up" in out and "Training goes on" not in out, out
    assert f"depthpe push: upload of {run / 'final'} to bob/x failed after 2 attempt(s)" in out
    assert "run the command again" in out and TOKEN not in out


# ----------------------------------------------------------------------- training run -> fake Hub


SMALL_BATCH = {"views": [2, 2], "max_images_per_batch": 2}  # one 2-view sample per step: fast on CPU


def _subprocess_env(hub: FakeHub, home: Path) -> dict:
    env = hub.env(os.environ, token=TOKEN, home=str(home))
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"  # a shared 2-core machine: one thread is faster than fighting for two
    return env



@pytest.fixture(scope="module")
def pushed_run(synth_root, tmp_path_factory):
    """A real training run (subprocess, as a user launches it) pushing to a flaky fake Hub whose
    commits are held until the loop is over; yields (hub, run folder, output text, spared)."""
    tmp = tmp_path_factory.mktemp("pushed")
    out = tmp / "run"
    cfg = run_config(synth_root, out, data=SMALL_BATCH, train={"steps": 3, "checkpoint_every": 1, "keep_checkpoints": 1, "torch_threads": 1},
                     val={"sources": [{"name": "synth", "root": str(synth_root), "split": "val"}], "every": 0,
                          "views": 2, "max_scenes": 1, "panels": 0})
    d = cfg.to_dict()
    d["hub"] = {"repo_id": REPO, "private": True, "retries": 4, "retry_delay": 0.2, "wait_timeout": 60}
    (tmp / "run.yaml").write_text(yaml.safe_dump(d))
    with FakeHub(fail={"commit": 2}, hold_commits=True) as hub:
        proc = subprocess.Popen([sys.executable, "train/train.py", "--config", str(tmp / "run.yaml")],
                                cwd=REPO_ROOT, env=_subprocess_env(hub, tmp / "hf_home"),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 90
        while not (out / "final" / "README.md").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        # the loop is over and the first upload (step 1) is still held: keep_checkpoints=1 would have
        # deleted step_0000001 at step 2, but rotation spares it while its upload is pending
        spared = (out / "checkpoints" / "step_0000001" / "model" / "model.safetensors").is_file()
        hub.hold.set()
        text, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0, text
        yield hub, out, text, spared


def test_training_pushes_checkpoints_and_final_model(pushed_run):
    hub, out, text, spared = pushed_run
    assert spared, text
    # after the uploads finished, the spared checkpoint was rotated away
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_0000002"]
    assert len(hub.failed) == 2 and text.count("retrying in") == 2, text
    assert "all 3 push(es)" in text, text
    repo = hub.repo(REPO)
    assert repo.private and set(repo.tags) == {"step-0000001", "step-0000002", "step-0000003"}
    main = hub.files(REPO)
    for name in MODEL_FILES:  # byte-identical to the local exports (card included)
        assert main[name] == (out / "final" / name).read_bytes(), name
        assert hub.files(REPO, "step-0000003")[name] == (out / "final" / name).read_bytes(), name
        local = (out / "checkpoints" / "step_0000002" / "model" / name).read_bytes()
        assert main[f"checkpoints/step_0000002/{name}"] == local, name
        assert hub.files(REPO, "step-0000002")[name] == local, name
    assert "checkpoints/step_0000001/model.safetensors" in main
    assert "trainer_state.json" not in main
    card = main["README.md"].decode()
    meta = _front_matter(card)
    assert meta["pipeline_tag"] == "depth-estimation" and "synth" in meta["tags"] and "global-pe-rope" in meta["tags"]
    assert "Final model of the run, after 3 optimizer steps" in card
    assert "Validation at optimizer step 3" in card and "| synth | native | 1 |" in card
    step2 = hub.files(REPO, "step-0000002")["README.md"].decode()
    assert "step 2 of 3" in step2 and 'revision="step-0000002"' in step2 and "No evaluation results yet" in step2
    assert TOKEN not in text and f"Bearer {TOKEN}" in hub.authorizations


def test_from_pretrained_loads_pushed_model_by_repo_id_and_tag(pushed_run, monkeypatch, tmp_path):
    from depthpe.model import DepthModel

    hub, out, _, _ = pushed_run
    point_in_process(monkeypatch, hub, tmp_path / "cache")
    for revision, local in ((None, out / "final"), ("step-0000002", out / "checkpoints" / "step_0000002" / "model")):
        model = DepthModel.from_pretrained(REPO, revision=revision)
        expected = load_file(local / "model.safetensors")
        state = model.state_dict()
        assert state.keys() == expected.keys()
        assert all(torch.equal(state[k], expected[k]) for k in expected), revision
    final, step2 = load_file(out / "final" / "model.safetensors"), load_file(local / "model.safetensors")
    assert any(not torch.equal(final[k], step2[k]) for k in final)  # the two revisions really differ


def test_evaluate_loads_pushed_model_by_repo_id(pushed_run, synth_root, tmp_path, monkeypatch):
    from depthpe.eval import main  # what `depthpe eval` runs (in-process: a subprocess costs ~15 s here)

    hub, _, _, _ = pushed_run
    point_in_process(monkeypatch, hub, tmp_path / "cache")
    rc = main(["--model", REPO, "--revision", "step-0000002", "--data", str(synth_root), "--out", str(tmp_path / "eval"),
               "--cpu", "--scenes", "1", "--views", "2", "--num-workers", "0", "--panels", "0"])
    assert rc == 0
    doc = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert doc["meta"]["revision"] == "step-0000002" and doc["summary"]["synth"]["native"]["n_scenes"] == 1
    assert doc["meta"]["image_width"] == 42  # from the pushed training_inputs.json, not the 518 default
    assert ("GET", f"/{REPO}/resolve/step-0000002/model.safetensors") in hub.requests


def test_push_command_pushes_run_final_with_card(pushed_run, monkeypatch, tmp_path, capsys):
    from depthpe.cli import main

    hub, out, _, _ = pushed_run
    point_in_process(monkeypatch, hub, tmp_path / "cache")
    assert resolve_model_folder(out) == (out / "final", out)
    assert resolve_model_folder(out / "checkpoints" / "step_0000002") == (out / "checkpoints" / "step_0000002" / "model", out)
    rc = main(["push", str(out), "--repo-id", "bob/by-hand", "--private", "--revision", "exp", "--tag", "v1",
               "--retry-delay", "0.01"])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    files = hub.files("bob/by-hand", "exp")
    for name in MODEL_FILES:
        assert files[name] == (out / "final" / name).read_bytes()
    assert hub.repo("bob/by-hand").private and hub.repo("bob/by-hand").tags["v1"] == hub.repo("bob/by-hand").branches["exp"]
    assert "config.json" not in hub.files("bob/by-hand", "main")  # only the branch got the model
    assert "Validation at optimizer step 3" in files["README.md"].decode()
    assert TOKEN not in printed
    assert main(["push", str(tmp_path), "--repo-id", "bob/by-hand"]) == 2
    assert "neither an exported model" in capsys.readouterr().out


def test_training_survives_a_hub_that_always_fails(synth_root, tmp_path, monkeypatch, capsys):
    from depthpe.run.trainer import train

    with FakeHub(fail={"create": -1}) as hub:
        point_in_process(monkeypatch, hub, tmp_path / "cache")
        cfg = run_config(synth_root, tmp_path / "run", data=SMALL_BATCH,
                         train={"steps": 2, "checkpoint_every": 1, "keep_checkpoints": 1, "torch_threads": 1},
                         hub={"repo_id": REPO, "retries": 1, "retry_delay": 0.01, "wait_timeout": 30})
        final = train(cfg)
    printed = capsys.readouterr()
    text = printed.out + printed.err
    assert (final / "model.safetensors").is_file() and (final / "README.md").is_file()
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir()) == ["step_0000001"]
    assert text.count("giving up") == 2 and "2 of 2 push(es) failed" in text, text
    assert REPO not in hub.repos and TOKEN not in text


def test_a_refused_token_is_not_retried_and_says_why(tmp_path, online):
    folder = model_folder(tmp_path / "model")
    logs = []
    with FakeHub(fail={"create": -1}, fail_status=401) as hub:
        pusher = HubPusher(REPO, endpoint=hub.url, token=TOKEN, retries=3, retry_delay=0.1, log=logs.append)
        handle = pusher.push(folder)
        assert handle.wait(30)
    result = handle.result
    assert not result.ok and result.attempts == 1 and len(hub.failed) == 1  # no retry: another try cannot help
    assert "refused the token (HTTP 401)" in result.error and "write access" in result.error
    assert not any(TOKEN in line for line in logs)
