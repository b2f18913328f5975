"""`depthpe bench rehearsal` (issue 24 items 1 and 2): the observed training process records digests
of the state it saves and restores (a resume restores them bit-identically), child processes are
killed on cue and report their peak memory, the rehearsal's run config is the recipe at B=1 x S=2
views of 224 px, and the whole rehearsal runs at a small scale (slow) and at true size (opt-in)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import pytest
import torch

from depthpe.bench import rehearsal
from depthpe.bench.rehearsal_run import (Events, optimizer_digest, read_events, reload_observed, rng_digest,
                                         tensor_digest, train_observed)
from depthpe.cli import main
from depthpe.config import ConfigError
from tests.helpers.training import MICRO_MODEL

TRUE_SIZE_ENV = "DEPTHPE_REHEARSAL_TRUE_SIZE"
TRUE_WIDTH_ENV = "DEPTHPE_REHEARSAL_TRUE_WIDTH"


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    rehearsal.add_arguments(parser)
    return parser.parse_args(list(argv))


def micro_spec(root, out, events, **extra) -> dict:
    """A spec of the observed training process: the micro model, 2 steps, a checkpoint after step 1."""
    model = [f"model.{k}={json.dumps(v)}" for k, v in MICRO_MODEL.items()]
    overrides = model + [
        f"data.sources=[{{name: synth, root: {root}, split: train}}]", "data.views=[2,2]", "data.aspect=[1.0,1.0]",
        "data.image_width=42", "data.max_images_per_batch=2", f"output_dir={out}", "train.steps=2",
        "train.checkpoint_every=1", "train.num_workers=0", "train.cpu=true", "train.report_to=[]", "val.sources=[]"]
    return {"config": "quickstart", "overrides": overrides, "events": str(events), **extra}


def test_digests_see_every_bit():
    a = [torch.arange(6, dtype=torch.float32).reshape(2, 3), torch.ones(2)]
    b = [a[0].clone(), a[1].clone()]
    assert tensor_digest(a) == tensor_digest(b)
    b[0][1, 2] = torch.nextafter(b[0][1, 2], torch.tensor(100.0))  # one ulp
    assert tensor_digest(a) != tensor_digest(b)
    assert tensor_digest([a[0].reshape(3, 2)]) != tensor_digest([a[0]])  # shape counts
    assert tensor_digest([a[0].t()]) == tensor_digest([a[0].t().contiguous()])  # layout does not
    torch.manual_seed(1)
    before = rng_digest()
    torch.rand(1)
    assert rng_digest() != before
    p = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.AdamW([p], lr=0.1)
    p.grad = torch.ones(3)
    opt.step()
    first = optimizer_digest(opt)
    opt.state[p]["exp_avg_sq"][0] *= 1.001
    assert optimizer_digest(opt) != first


def test_resume_restores_what_was_saved(synth_root, tmp_path):
    out = tmp_path / "run"
    train_observed(micro_spec(synth_root, out, tmp_path / "a.jsonl"))
    first = read_events(tmp_path / "a.jsonl")
    assert [e["step"] for e in first if e["event"] == "step"] == [1, 2]  # steps done after each
    saved = rehearsal.last_event(first, "saved")
    assert saved["step"] == 1 and rehearsal.last_event(first, "checkpoint")["bytes"] > 0
    step = rehearsal.last_event(first, "step")
    assert step["growth_mib"] >= 0 and step["peak_mib"] >= step["rss_before_mib"] > 0
    # a second process resumes from the checkpoint of step 1 (in this process: the same code path)
    train_observed(micro_spec(synth_root, out, tmp_path / "b.jsonl", resume="latest"))
    second = read_events(tmp_path / "b.jsonl")
    restored = rehearsal.last_event(second, "restored")
    assert restored["step"] == 1 and rehearsal.last_event(second, "load_state")["seconds"] >= 0
    assert rehearsal.compare_restored(saved, restored) == []
    # the resumed run trained step 2 again from the same state: the same final weights
    assert rehearsal.last_event(second, "export")["model"] == rehearsal.last_event(first, "export")["model"]
    reload_observed({"reload": str(out / "final"), "events": str(tmp_path / "c.jsonl")})
    assert read_events(tmp_path / "c.jsonl")[0]["model"] == rehearsal.last_event(second, "export")["model"]


def test_compare_restored_names_what_differs():
    digests = {name: name for name in rehearsal.DIGEST_NAMES}
    saved = {"step": 1, "digests": digests}
    assert rehearsal.compare_restored(saved, {"step": 1, "sampler_start": 1, "digests": dict(digests)}) == []
    changed = {"step": 1, "sampler_start": 0, "digests": {**digests, "optimizer": "x", "rng": "y"}}
    assert rehearsal.compare_restored(saved, changed) == ["optimizer", "rng", "sampler starts at step 0, not 1"]
    assert rehearsal.compare_restored(None, changed) == ["no record of the saved state"]


def test_run_child_kills_on_cue_and_reports_peak_memory(tmp_path):
    flag = tmp_path / "ready"
    code = (f"import pathlib, time; b = bytearray(64 * 2**20); pathlib.Path({str(flag)!r}).touch(); "
            "time.sleep(60)")
    child = rehearsal.run_child([sys.executable, "-c", code], tmp_path / "log", kill_when=flag.exists)
    # killed on the cue (its flag), not at the end of its sleep nor for the timeout: no clock involved
    assert child.killed and not child.timed_out and child.status == -9 and flag.exists()
    assert child.peak_rss_mib > 64
    quick = rehearsal.run_child([sys.executable, "-c", "print('hi')"], tmp_path / "log2")
    assert quick.status == 0 and not quick.killed and Path(quick.log).read_text() == "hi\n"
    late = rehearsal.run_child([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "log3", timeout=1)
    assert late.timed_out and not late.killed and late.status == -9


def test_true_size_run_config(tmp_path):
    args = parse("--config", "vggt1b_prope", "--out", str(tmp_path))
    cfg = rehearsal.check_args(args)
    model = cfg.model_config()
    assert (model.embed_dim, model.num_blocks, model.global_pe) == (1024, 24, "prope")
    assert not model.pretrained and model.gradient_checkpointing and cfg.model.init_from is None
    assert (tuple(cfg.data.views), cfg.data.image_width, cfg.data.max_images_per_batch) == ((2, 2), 224, 2)
    assert (cfg.train.steps, cfg.train.checkpoint_every, cfg.train.mixed_precision) == (3, 1, "no")
    assert cfg.train.cpu and cfg.val.sources == [] and cfg.data.sources[0].name == "synth"
    assert rehearsal.scene_size(cfg) == 280  # 224 / 0.8, the smallest crop is never upsampled
    bf16 = rehearsal.training_overrides(args, tmp_path / "d", tmp_path / "r", "bf16")
    assert "train.mixed_precision=bf16" in bf16


@pytest.mark.parametrize("argv, message", [
    (["--views", "1"], "--views must be >= 2"),
    (["--image-width", "100"], "data.image_width must be a positive multiple of patch_size=14"),
    (["--threads", "0"], "--threads must be >= 1"),
])
def test_bad_options_are_one_line_errors(tmp_path, argv, message):
    with pytest.raises((SystemExit, ConfigError), match=message):
        rehearsal.check_args(parse("--config", "quickstart", "--out", str(tmp_path), *argv))


def test_report_table(tmp_path):
    args = parse("--config", "quickstart", "--out", str(tmp_path))
    r = rehearsal.Rehearsal(args, None)
    r.stages = [rehearsal.Stage("step 1", True, 12.5, 2048.0, ["checkpoint save 1.0 s"]),
                rehearsal.Stage("push", None, notes=["no --hub-endpoint given"])]
    r.memory = {"fp32": {"predicted_mib": 1024.0, "measured_mib": 1126.4, "step": 2}}
    text = rehearsal.format_report(r)
    assert "| step 1 | 12.5 | 2.00 | ok; checkpoint save 1.0 s |" in text
    assert "| push | - | - | skipped; no --hub-endpoint given |" in text
    assert "| fp32 | 2 | 1.00 | 1.10 | 1.100 |" in text


@pytest.mark.slow
def test_rehearsal_small_scale(tmp_path, monkeypatch):
    """Every stage at the quickstart size, pushing to the local Hub-compatible test server."""
    from tests.helpers.hub_server import FakeHub

    with FakeHub(lfs_from=1_000_000, lfs_chunk=4_000_000) as hub:  # the weights take the multipart LFS path
        for key, value in hub.env().items():
            monkeypatch.setenv(key, value)
        out = tmp_path / "rehearsal"
        assert main(["bench", "rehearsal", "--config", "quickstart", "--out", str(out), "--image-width", "42",
                     "--hub-endpoint", hub.url, "--hub-repo-id", "user/rehearsal"]) == 0
        files = hub.files("user/rehearsal")
        assert hub.lfs_puts >= 2
    doc = json.loads((out / "rehearsal.json").read_text())
    assert all(stage["ok"] for stage in doc["stages"]), doc["stages"]
    assert len(doc["stages"]) == 9
    assert files["model.safetensors"] == (out / "run" / "final" / "model.safetensors").read_bytes()
    assert set(doc["memory"]) == {"fp32", "bf16"} and all("measured_mib" in m for m in doc["memory"].values())
    assert not (out / "run" / "checkpoints" / "step_0000003").exists()  # steps 1 and 2 ended by SIGKILL
    assert (out / "eval" / "summary.json").is_file() and (out / "predict" / "prediction.json").is_file()


# The recipe's true width (1024 channels, 16 heads of 64, the ViT-L patch embedding and the DPT head
# at their true feature sizes) with 4 of its 24 aggregator blocks and 2 of its 24 backbone blocks:
# what CI can afford. Not covered by it: the full depth's memory and time, and multi-GB files.
TRUE_WIDTH = ["model.num_blocks=4", "model.head_layers=[0,1,2,3]", "model.backbone_blocks=2"]


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get(TRUE_WIDTH_ENV), reason=f"true width takes 1.5-5 min of 2 cores (88 s alone and "
                    f"283 s inside a loaded 19 min CI run on 2026-12-06, which then took 19 min 47 s of its 20); "
                    f"test_rehearsal_small_scale covers every stage, multipart LFS push included, in CI; set "
                    f"{TRUE_WIDTH_ENV}=1 to run it")
def test_rehearsal_true_width(tmp_path, monkeypatch):
    from tests.helpers.hub_server import FakeHub

    with FakeHub(lfs_from=1_000_000, lfs_chunk=64_000_000) as hub:
        for key, value in hub.env().items():
            monkeypatch.setenv(key, value)
        out = tmp_path / "rehearsal"
        assert main(["bench", "rehearsal", "--config", "vggt1b_prope", "--out", str(out), "--image-width", "112",
                     "--threads", "2", "--hub-endpoint", hub.url, "--hub-repo-id", "user/wide", *TRUE_WIDTH]) == 0
        assert hub.lfs_puts >= 2
    doc = json.loads((out / "rehearsal.json").read_text())
    assert all(stage["ok"] for stage in doc["stages"]), doc["stages"]
    export = rehearsal.last_event(doc["events"]["3"], "export")
    assert export["bytes"] > 300e6  # true-width weights (fp32)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get(TRUE_SIZE_ENV), reason=f"true size needs ~20 GB and ~30 min of 2 cores, more "
                    f"than CI gives next to the other slow tests; set {TRUE_SIZE_ENV}=1 to run it")
def test_rehearsal_true_size(tmp_path, monkeypatch):
    from tests.helpers.hub_server import FakeHub

    with FakeHub(lfs_from=10_000_000, lfs_chunk=100_000_000) as hub:
        for key, value in hub.env().items():
            monkeypatch.setenv(key, value)
        assert main(["bench", "rehearsal", "--config", "vggt1b_prope", "--out", str(tmp_path / "r"),
                     "--hub-endpoint", hub.url, "--hub-repo-id", "user/rehearsal"]) == 0
