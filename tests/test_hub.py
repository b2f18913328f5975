"""Hub pushes against a loopback fake Hub (tests/hub_server.py): nothing leaves the machine.

Subprocesses (training, eval/evaluate.py) get HF_ENDPOINT in their environment; in-process code is
pointed at the server by patching ``huggingface_hub.constants`` (read at import time).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from tests.hub_server import FakeHub
from tests.test_training import run_config

from depthpe.hub import HubPusher, resolve_model_folder, step_tag
from depthpe.model_card import CardInfo, render_model_card
from depthpe.training import _rotate_checkpoints

REPO_ROOT = Path(__file__).resolve().parents[1]
TOKEN = "hf_secret_TOKEN_1234567890"
REPO = "alice/depth-run"
MODEL_FILES = ("config.json", "model.safetensors", "README.md")


def _front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


def _point_in_process(monkeypatch, hub: FakeHub, cache: Path) -> None:
    """Point this process's huggingface_hub at ``hub`` (online, fake token, private cache)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_TOKEN", TOKEN)


def _model_folder(path: Path, seed: int = 0) -> Path:
    path.mkdir(parents=True)
    g = torch.Generator().manual_seed(seed)
    (path / "config.json").write_text(json.dumps({"global_pe": "prope", "embed_dim": 32}))
    (path / "model.safetensors").write_bytes(torch.randint(0, 256, (3000,), generator=g, dtype=torch.uint8).numpy().tobytes())
    (path / "README.md").write_text("---\nlicense: apache-2.0\n---\ncard\n")
    return path


# ------------------------------------------------------------------------------- pusher, in-process
@pytest.fixture
def online(monkeypatch):
    """conftest sets HF_HUB_OFFLINE=1; the pusher tests talk to the loopback server."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


def test_pusher_retries_with_backoff_protects_folder_and_lands_byte_identical(tmp_path, online):
    folder = _model_folder(tmp_path / "ckpt" / "model")
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

    folder = _model_folder(tmp_path / "m")
    logs = []
    offline = HubPusher(REPO, endpoint="http://127.0.0.1:9", token=TOKEN, retries=5, retry_delay=10, log=logs.append)
    handle = offline.push(folder)  # HF_HUB_OFFLINE=1 (conftest): fails at once, no retries, says why
    assert handle.wait(10) and not handle.result.ok and handle.result.attempts == 1
    assert "HF_HUB_OFFLINE" in handle.result.error
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with FakeHub(fail={"create": -1}) as hub:
        pusher = HubPusher(REPO, endpoint=hub.url, token=TOKEN, retries=2, retry_delay=0.01, log=logs.append)
        first = pusher.push(folder)
        assert first.wait(30)
        assert not first.result.ok and first.result.attempts == 3 and "500" in first.result.error
        assert any("giving up" in line for line in logs) and not pusher.pending()
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


# ------------------------------------------------------------------------------------ model card
SUMMARY = {
    "co3d": {"native": {"abs_rel": 0.1234, "delta1": 0.9, "n_scenes": 3, "n_images": 12},
             "scene_aligned": {"abs_rel": 0.1, "delta1": 0.92, "n_scenes": 3, "n_images": 12},
             "image_aligned": {"abs_rel": 0.09, "delta1": 0.93, "n_scenes": 3, "n_images": 12},
             "global_constant": {"abs_rel": 0.5, "delta1": 0.3, "n_scenes": 3, "n_images": 12, "value": 2.0}},
}


def test_model_card_metadata_eval_table_config_and_vggt_licence():
    run = {"output_dir": "/home/alice/runs/x", "seed": 3,
           "data": {"sources": [{"name": "co3d", "root": "/home/alice/data", "split": "train", "weight": 1.0},
                                {"name": "mega", "dataset": "megasynth", "root": "/d", "split": "train"}],
                    "views": [2, 8], "image_width": 518},
           "optim": {"lr": 1e-4, "schedule": "constant"}, "train": {"steps": 240000},
           "hub": {"repo_id": "alice/x"}}
    info = CardInfo(model_config={"global_pe": "prope", "embed_dim": 1024}, repo_id="alice/x",
                    revision="step-0000400", run_config=run, step=400, total_steps=240000,
                    eval_summary=SUMMARY, eval_note="Validation at optimizer step 400")
    card = render_model_card(info)
    meta = _front_matter(card)
    assert meta["library_name"] == "depthpe" and meta["pipeline_tag"] == "depth-estimation"
    assert meta["license"] == "apache-2.0" and "base_model" not in meta
    assert {"global-pe-prope", "co3d", "megasynth"} <= set(meta["tags"])
    assert "| co3d | native | 3 | 12 | 0.1234 |" in card and "| co3d | scene_aligned |" in card
    assert "| co3d | image_aligned |" in card and "global_constant" not in card
    assert 'from_pretrained("alice/x", revision="step-0000400")' in card
    assert "optimizer step 400 of 240000" in card and "lr: 0.0001" in card
    assert "/home/alice" not in card and "repo_id" not in card  # no local paths, no hub section

    vggt = render_model_card(CardInfo(model_config={"global_pe": "rope"}, init_weights="facebook/VGGT-1B"))
    meta = _front_matter(vggt)
    assert meta["license"] == "cc-by-nc-4.0" and meta["base_model"] == "facebook/VGGT-1B"
    assert "non-commercial" in vggt and "No evaluation results yet" in vggt
    with pytest.raises(ValueError, match="init_weights"):
        CardInfo(model_config={}, init_weights="someone/else")


# ----------------------------------------------------------------------- training run -> fake Hub
@pytest.fixture(scope="module")
def synth_root(tmp_path_factory):
    from depthpe.data.synth import write_synth_dataset

    root = tmp_path_factory.mktemp("data")
    write_synth_dataset(root, train_scenes=3, val_scenes=2, views=4, height=56, width=56, seed=0, progress=False)
    return root


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
    _point_in_process(monkeypatch, hub, tmp_path / "cache")
    for revision, local in ((None, out / "final"), ("step-0000002", out / "checkpoints" / "step_0000002" / "model")):
        model = DepthModel.from_pretrained(REPO, revision=revision)
        expected = load_file(local / "model.safetensors")
        state = model.state_dict()
        assert state.keys() == expected.keys()
        assert all(torch.equal(state[k], expected[k]) for k in expected), revision
    final, step2 = load_file(out / "final" / "model.safetensors"), load_file(local / "model.safetensors")
    assert any(not torch.equal(final[k], step2[k]) for k in final)  # the two revisions really differ


def test_evaluate_loads_pushed_model_by_repo_id(pushed_run, synth_root, tmp_path, monkeypatch):
    from depthpe.evaluation import main  # what eval/evaluate.py runs (in-process: a subprocess costs ~15 s here)

    hub, _, _, _ = pushed_run
    _point_in_process(monkeypatch, hub, tmp_path / "cache")
    rc = main(["--model", REPO, "--revision", "step-0000002", "--data", str(synth_root), "--out", str(tmp_path / "eval"),
               "--cpu", "--scenes", "1", "--views", "2", "--image-width", "42", "--num-workers", "0", "--panels", "0"])
    assert rc == 0
    doc = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert doc["meta"]["revision"] == "step-0000002" and doc["summary"]["synth"]["native"]["n_scenes"] == 1
    assert ("GET", f"/{REPO}/resolve/step-0000002/model.safetensors") in hub.requests


def test_push_command_pushes_run_final_with_card(pushed_run, monkeypatch, tmp_path, capsys):
    from depthpe.cli import main

    hub, out, _, _ = pushed_run
    _point_in_process(monkeypatch, hub, tmp_path / "cache")
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
    from depthpe.training import train

    with FakeHub(fail={"create": -1}) as hub:
        _point_in_process(monkeypatch, hub, tmp_path / "cache")
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
