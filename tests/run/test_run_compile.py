"""train.compile (aggregator blocks compiled in place with torch.compile) and the device-dependent
loader and copy options of the run layer (pinned batches and asynchronous copies only on CUDA).

The training tests compile with inductor on the CPU (tens of seconds per batch shape), so they use one
batch shape (2 views, square images) and are marked ``slow``."""

import pytest
import torch
from safetensors.torch import load_file

from depthpe.loader.loaders import build_train_loader
from depthpe.model import DepthModel
from depthpe.run.building import DYNAMO_RECOMPILE_LIMIT, compile_blocks, loader_options, recompile_limit, view_counts
from depthpe.run.checkpoints import find_checkpoint
from depthpe.run.step import MODEL_INPUTS, batch_to_device
from depthpe.run.trainer import train
from tests.helpers.inputs import moving_camera_inputs
from tests.helpers.training import run_config


def _config(root, out, compile: bool, **train):
    """Micro model, one batch shape (2 square views), 4 steps, a checkpoint at step 2."""
    return run_config(root, out, data={"views": [2, 2], "aspect": [1.0, 1.0]},
                      train={"compile": compile, "steps": 4, "checkpoint_every": 2, "torch_threads": 1, **train})


def test_compile_blocks_compiles_in_place_and_keeps_state_dict_keys(synth_root):
    cfg = _config(synth_root, "unused", True)
    eager, compiled = DepthModel(cfg.model_config()), DepthModel(cfg.model_config())
    assert compile_blocks(compiled) == 2 * cfg.model_config().num_blocks
    blocks = [*compiled.aggregator.frame_blocks, *compiled.aggregator.global_blocks]
    assert all(b._compiled_call_impl is not None for b in blocks)
    assert compiled.aggregator._compiled_call_impl is None  # only the blocks, not the whole model
    assert list(compiled.state_dict()) == list(eager.state_dict())
    assert not any("_orig_mod" in name for name, _ in compiled.named_parameters())
    with pytest.raises(ValueError, match="train.compile: Linear has no AggregatorBlock"):
        compile_blocks(torch.nn.Linear(2, 2))


def test_view_counts_is_the_number_of_view_counts_the_batches_draw(synth_root):
    assert view_counts(run_config(synth_root, "unused", data={"views": [2, 2]})) == 1
    assert view_counts(run_config(synth_root, "unused", data={"views": [2, 24], "max_images_per_batch": 24})) == 23
    assert recompile_limit(23) == DYNAMO_RECOMPILE_LIMIT + 23


def test_compiled_urope_blocks_keep_compiling_over_every_number_of_views():
    """URoPE's fused attention loops over the views, so the compiled blocks need a graph per number
    of views; past dynamo's recompile limit (8 by default, shared by the frame and global blocks) the
    later view counts would silently run eagerly. ``compile_blocks(view_counts=N)`` raises the limit
    for them. The limit starts at 2 here, so that 4 view counts (6 graphs) overflow it; the default
    needs 7 (aot_eager: tracing only, seconds per shape)."""
    from torch._dynamo.utils import counters

    counts, start = 4, 2  # 2..5 views
    with torch._dynamo.config.patch(recompile_limit=start):
        torch._dynamo.reset()
        counters.clear()
        torch.manual_seed(0)
        model = DepthModel.from_preset("tiny", global_pe="urope", num_blocks=2, head_layers=[0, 0, 1, 1]).train()
        compile_blocks(model, view_counts=counts, backend="aot_eager")
        assert torch._dynamo.config.recompile_limit == recompile_limit(counts)
        try:
            for S in range(2, 2 + counts):
                images, K, w2c = moving_camera_inputs(S=S, H=28, W=28)
                model(images, K, w2c)["depth"].sum().backward()
        finally:
            torch._dynamo.reset()  # no compiled graphs left for the next test
        limit_hits = [k for k in counters["unimplemented"] if "recompile limit" in k.lower()]
        assert not limit_hits
        assert counters["stats"]["unique_graphs"] > start  # more than the starting limit allowed


def test_loader_pins_memory_only_for_cuda_and_keeps_workers(synth_root):
    cfg = _config(synth_root, "unused", False, num_workers=2, grad_accum=3)
    assert loader_options(cfg, torch.device("cuda", 1)) == {"num_workers": 2, "grad_accum": 3, "pin_memory": True}
    assert loader_options(cfg, "cpu")["pin_memory"] is False
    gpu_loader = build_train_loader(cfg.data, seed=0, **loader_options(cfg, "cuda"))
    cpu_loader = build_train_loader(cfg.data, seed=0, **loader_options(cfg, "cpu"))
    assert gpu_loader.pin_memory and not cpu_loader.pin_memory
    assert gpu_loader.persistent_workers and gpu_loader.num_workers == 2
    no_workers = _config(synth_root, "unused", False, num_workers=0)
    assert not build_train_loader(no_workers.data, seed=0, **loader_options(no_workers, "cpu")).persistent_workers


class _Recorder:
    """Stands in for a batch tensor: records the arguments of ``.to``."""

    def __init__(self):
        self.calls = []

    def to(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return self


def test_batch_copies_are_asynchronous_on_cuda_and_no_copies_on_cpu():
    batch = {key: _Recorder() for key in MODEL_INPUTS}
    batch_to_device(batch, torch.device("cuda", 0))
    assert all(r.calls == [((torch.device("cuda", 0),), {"non_blocking": True})] for r in batch.values())
    cpu = {key: torch.ones(2) for key in MODEL_INPUTS}
    moved = batch_to_device(cpu, torch.device("cpu"))
    assert [t is cpu[key] for t, key in zip(moved, MODEL_INPUTS)] == [True] * len(MODEL_INPUTS)


@pytest.mark.slow
def test_compiled_run_resumes_exactly_and_checkpoints_load_across_eager_and_compiled(synth_root, tmp_path):
    compiled_out, eager_out = tmp_path / "compiled", tmp_path / "eager"
    compiled = load_file(train(_config(synth_root, compiled_out, True)) / "model.safetensors")
    ckpt = find_checkpoint(compiled_out, "latest")
    state = load_file(ckpt / "state" / "model.safetensors")
    assert not any("_orig_mod" in k for k in state) and state.keys() == compiled.keys()
    resumed = load_file(train(_config(synth_root, compiled_out, True), resume=str(ckpt)) / "model.safetensors")
    assert all(torch.equal(resumed[k], compiled[k]) for k in compiled)  # bit-exact resume, compiled

    eager = load_file(train(_config(synth_root, eager_out, False)) / "model.safetensors")
    # the compiled run trains the same model as the eager one (kernels differ in rounding only)
    assert max((eager[k] - compiled[k]).abs().max().item() for k in eager) < 1e-4
    assert any(not torch.equal(state[k], compiled[k]) for k in state)  # steps 3-4 moved the weights
    # an eager checkpoint resumes compiled and a compiled one eager: the same weights as without a switch
    switched = load_file(train(_config(synth_root, eager_out, True), resume=str(find_checkpoint(eager_out, "latest")))
                         / "model.safetensors")
    assert max((eager[k] - switched[k]).abs().max().item() for k in eager) < 1e-4
    back = load_file(train(_config(synth_root, compiled_out, False), resume=str(ckpt)) / "model.safetensors")
    assert max((compiled[k] - back[k]).abs().max().item() for k in compiled) < 1e-4


@pytest.mark.slow
def test_two_processes_train_compiled_like_one_eager_process(synth_root, tmp_path):
    """``accelerate launch --multi_gpu --num_processes 2`` (gloo, CPU) with train.compile: the blocks are
    compiled before DDP wraps the model, checkpoints keep the eager keys, and the weights equal those of
    one eager process with the same global batch (2 micro-batches) up to kernel rounding."""
    import os
    import socket
    import subprocess
    import sys

    from depthpe.run import dump_run_config

    out = tmp_path / "ddp"
    config = tmp_path / "config.yaml"
    config.write_text(dump_run_config(_config(synth_root, out, True, steps=3)))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1", "HF_HOME": str(tmp_path / "hf")}
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port",
           str(port), "-m", "depthpe.train", "--config", str(config)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    assert "world size 2 (MULTI_CPU" in log and "aggregator blocks compiled with torch.compile" in log
    state = load_file(out / "checkpoints" / "step_0000002" / "state" / "model.safetensors")
    assert not any("_orig_mod" in k or k.startswith("module.") for k in state)
    two = load_file(out / "final" / "model.safetensors")
    one = load_file(train(_config(synth_root, tmp_path / "one", False, steps=3, grad_accum=2)) / "model.safetensors")
    assert max((one[k] - two[k]).abs().max().item() for k in two) < 1e-4
