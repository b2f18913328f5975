"""DeepSpeed ZeRO-2 (configs/accelerate/deepspeed_zero2.yaml): the shipped file launched with 2 CPU
processes, checkpoint and ``--resume latest``, equal to one process with the same global batch; and,
without DeepSpeed installed, what depthpe does for it (its checkpoint layout, its config checks).

The launch test needs ``pip install deepspeed transformers`` (accelerate's DeepSpeed path imports
transformers); CI installs neither, so there it is skipped with that reason (docs/distributed.md)."""

import json
import os
import shutil
import socket
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file, save_file

from depthpe.config import ConfigError
from depthpe.run import dump_run_config
from depthpe.run.building import deepspeed_cpu_backend, fit_deepspeed_config
from depthpe.run.distributed import process_group_kwargs
from depthpe.run.checkpoints import checkpoint_problem
from depthpe.run.trainer import train
from tests.helpers.training import run_config

DS_FILE = Path(__file__).resolve().parents[2] / "configs" / "accelerate" / "deepspeed_zero2.yaml"


def _deepspeed_checkpoint(folder: Path) -> Path:
    """A checkpoint folder laid out as DeepSpeed's save_state writes it (tag folder ``pytorch_model``)."""
    (folder / "model").mkdir(parents=True)
    save_file({"w": torch.zeros(2)}, str(folder / "model" / "model.safetensors"))
    state = folder / "state"
    (state / "pytorch_model").mkdir(parents=True)
    for name in ("pytorch_model/mp_rank_00_model_states.pt", "pytorch_model/zero_pp_rank_0_mp_rank_00_optim_states.pt",
                 "random_states_0.pkl"):
        torch.save({"x": 1}, state / name)
    (state / "latest").write_text("pytorch_model")
    (state / "zero_to_fp32.py").write_text("# DeepSpeed's conversion script\n")
    (folder / "trainer_state.json").write_text(json.dumps({"step": 2, "counters": {}}))
    return folder


def test_deepspeed_checkpoint_layout_is_complete_and_its_broken_files_are_found(tmp_path):
    folder = _deepspeed_checkpoint(tmp_path / "step_0000002")
    assert checkpoint_problem(folder) is None
    shard = folder / "state" / "pytorch_model" / "zero_pp_rank_0_mp_rank_00_optim_states.pt"
    shard.write_bytes(shard.read_bytes()[:100])
    assert not zipfile.is_zipfile(shard)
    assert checkpoint_problem(folder) == "pytorch_model/zero_pp_rank_0_mp_rank_00_optim_states.pt: truncated or not " \
                                        "a torch.save archive"
    (folder / "state" / "latest").write_text("global_step9")
    assert checkpoint_problem(folder) == "state/global_step9: missing"


def _fake_accelerator(**ds_config):
    from accelerate.utils import DistributedType

    plugin = SimpleNamespace(deepspeed_config=dict(ds_config))
    return SimpleNamespace(distributed_type=DistributedType.DEEPSPEED, state=SimpleNamespace(deepspeed_plugin=plugin))


def test_fit_deepspeed_config_sets_the_micro_batch_and_refuses_what_deepspeed_would_do_differently(tmp_path):
    cfg = run_config(tmp_path, tmp_path / "run")  # views [2, 3], max_images_per_batch 6, grad_clip 1.0
    accelerator = _fake_accelerator(gradient_accumulation_steps=1, gradient_clipping=1.0,
                                    train_micro_batch_size_per_gpu="auto")
    fit_deepspeed_config(accelerator, cfg)
    assert accelerator.state.deepspeed_plugin.deepspeed_config["train_micro_batch_size_per_gpu"] == 3
    with pytest.raises(ConfigError, match="train.grad_accum=1"):
        fit_deepspeed_config(_fake_accelerator(gradient_accumulation_steps=2), cfg)
    with pytest.raises(ConfigError, match="train.grad_accum=1"):
        fit_deepspeed_config(_fake_accelerator(), run_config(tmp_path, tmp_path / "r", train={"grad_accum": 2}))
    with pytest.raises(ConfigError, match=r"gradient_clipping \(0.5\) differs from optim.grad_clip"):
        fit_deepspeed_config(_fake_accelerator(gradient_clipping=0.5), cfg)


def test_process_group_is_gloo_for_deepspeed_without_a_gpu(tmp_path, monkeypatch):
    cfg = run_config(tmp_path, tmp_path / "run", train={"cpu": False})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("ACCELERATE_USE_DEEPSPEED", raising=False)
    assert deepspeed_cpu_backend(cfg) is None
    assert "backend" not in process_group_kwargs(5.0, backend=None).to_kwargs()
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    assert deepspeed_cpu_backend(cfg) == "gloo"
    handler = process_group_kwargs(5.0, backend=deepspeed_cpu_backend(cfg))
    assert handler.to_kwargs()["backend"] == "gloo" and handler.timeout.total_seconds() == 300
    assert deepspeed_cpu_backend(run_config(tmp_path, tmp_path / "run", train={"cpu": True})) is None


def _launch_deepspeed(config: Path, tmp: Path, *extra: str) -> str:
    """``accelerate launch --config_file deepspeed_zero2.yaml --num_processes 2 --mixed_precision no``
    of ``depthpe.train`` on this machine; returns the log (asserts exit status 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HOME": str(tmp / "hf")}
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(DS_FILE), "--num_processes", "2",
           "--mixed_precision", "no", "--main_process_port", str(port), "-m", "depthpe.train",
           "--config", str(config), *extra]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    return log


@pytest.mark.slow
def test_deepspeed_zero2_two_cpu_processes_checkpoint_resume_and_match_one_process(synth_root, tmp_path):
    pytest.importorskip("deepspeed", reason="DeepSpeed is not installed (not a depthpe dependency, not in CI): "
                                            "pip install deepspeed transformers")
    pytest.importorskip("transformers", reason="accelerate's DeepSpeed path imports transformers: pip install transformers")
    out = tmp_path / "run"
    config = tmp_path / "config.yaml"
    config.write_text(dump_run_config(run_config(synth_root, out, train={"steps": 4, "checkpoint_every": 2,
                                                                         "torch_threads": 1, "cpu": False})))
    log = _launch_deepspeed(config, tmp_path)
    assert "world size 2 (DEEPSPEED" in log
    state = out / "checkpoints" / "step_0000002" / "state"
    assert (state / "latest").read_text().strip() == "pytorch_model"
    assert sorted(p.name for p in (state / "pytorch_model").glob("zero_pp_rank_*_optim_states.pt")) == [
        "zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"]
    whole = load_file(out / "final" / "model.safetensors")

    shutil.rmtree(out / "final")  # as if killed after step 2's checkpoint: redo steps 3 and 4
    log = _launch_deepspeed(config, tmp_path, "--resume", "latest")
    assert "resumed from" in log and "step_0000002 at step 2" in log
    assert json.loads((out / "final" / "trainer_state.json").read_text())["world_size"] == 2
    resumed = load_file(out / "final" / "model.safetensors")
    at2 = load_file(out / "checkpoints" / "step_0000002" / "model" / "model.safetensors")
    assert any(not torch.equal(at2[k], resumed[k]) for k in resumed)  # the resumed steps moved the weights
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)

    # 2 processes x B == 1 process x 2 micro-batches of B (docs/distributed.md): the same weights
    one = load_file(train(run_config(synth_root, tmp_path / "accum", train={"steps": 4, "grad_accum": 2,
                                                                            "torch_threads": 1})) / "model.safetensors")
    assert one.keys() == resumed.keys()
    assert max((one[k] - resumed[k]).abs().max().item() for k in one) <= 1e-6
