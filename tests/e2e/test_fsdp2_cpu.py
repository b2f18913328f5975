"""FSDP2 on 2 CPU processes (gloo): the sharding plan of configs/accelerate/fsdp2.yaml under depthpe's
own optimizer step, compared with one unsharded process that trains on the whole batch.

Accelerate (1.15) never runs FSDP on CPU (the exact reason is in the header of fsdp2.yaml), so this
module applies torch's ``fully_shard`` itself, as Accelerate's FSDP2 preparation would with that file:
the plugin is built from the environment ``accelerate launch --config_file fsdp2.yaml`` sets, its own
wrap policy (``fsdp2_prepare_auto_wrap_policy``: TRANSFORMER_BASED_WRAP on timm's ``Block`` and
``AggregatorBlock``) picks the units, each gets the file's ``reshard_after_forward`` (true), then the
root is sharded (with torch's root default, as Accelerate does). The optimizer is depthpe's
``build_optimizer`` (AdamW), and every step is depthpe's ``run_step`` (``lr_at``, ``depth_loss``, the
non-finite handling of step.py, clipping through ``Accelerator.clip_grad_norm_``) with an
``Accelerator(cpu=True)`` over the same gloo group (MULTI_CPU; the model is not passed to ``prepare``).
Clipping takes the same path as under Accelerate's FSDP: depthpe passes only the trainable parameters,
which are not ``model.parameters()``, so Accelerate's FSDP branch falls through to its DTensor-aware
clipping, which is what it calls for MULTI_CPU too.

One 2-process job (``torch.multiprocessing`` spawn, 1 torch thread each) runs two trainings of
``STEPS`` steps: a clean one, and one whose loss is NaN on rank 1 only at step ``NAN_STEP``. A
1-process job trains the same unsharded model three times: on the whole global batch of each step
(both ranks' halves concatenated), on the two halves as 2 micro-batches (``grad_accum`` 2, the
arithmetic of the DDP run that tests/e2e/test_distributed.py checks), and so with the NaN at the same
place. Results come back as files written with ``torch.save``.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import time
from datetime import timedelta
from pathlib import Path

import pytest
import torch
from tests.helpers.accelerate import launch_args
from tests.helpers.training import MICRO_MODEL, run_config


pytestmark = pytest.mark.slow  # spawns fresh Python processes

STEPS = 3
NAN_STEP = 2  # 1-based optimizer step whose loss is NaN on rank 1 only ("nan" training)
GRAD_CLIP = 0.05  # below every gradient norm of these steps, so clipping really scales the gradients
JOB_TIMEOUT_S = 150


def _config(root: str, grad_accum: int = 1):
    """The run of this module: micro model, ``STEPS`` steps, warm-up lr, active clipping, 1 thread."""
    return run_config(root, Path(root) / "unused_output", optim={"grad_clip": GRAD_CLIP},
                      train={"steps": STEPS, "torch_threads": 1, "grad_accum": grad_accum})


def _free_port() -> int:
    """A localhost TCP port that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fsdp_launch_env() -> dict[str, str]:
    """The FSDP_* variables ``accelerate launch --config_file configs/accelerate/fsdp2.yaml`` gives
    each process (``FullyShardedDataParallelPlugin()`` reads its settings from them)."""
    from accelerate.utils.launch import prepare_multi_gpu_env

    env = prepare_multi_gpu_env(launch_args("fsdp2.yaml"))
    return {k: v for k, v in env.items() if k.startswith("FSDP_")}


# ------------------------------------------------------------------ in the spawned processes
def _shard_like_accelerate(model, world: int, fsdp_env: dict[str, str]) -> list[str]:
    """Apply ``fully_shard`` as Accelerate's FSDP2 preparation does with fsdp2.yaml: every module its
    plugin's wrap policy selects becomes a unit (``reshard_after_forward`` from the file), then the root
    (torch's default for a root). Returns the names of the FSDP units ("" = the root)."""
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.fsdp_utils import fsdp2_prepare_auto_wrap_policy
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

    os.environ.update(fsdp_env)
    plugin = FullyShardedDataParallelPlugin()
    assert plugin.fsdp_version == 2 and plugin.reshard_after_forward is True
    plugin.set_auto_wrap_policy(model)
    policy = fsdp2_prepare_auto_wrap_policy(plugin, model)
    common = dict(mesh=init_device_mesh("cpu", (world,)), offload_policy=plugin.cpu_offload,
                  mp_policy=plugin.mixed_precision_policy or MixedPrecisionPolicy())
    for _, module in reversed(list(model.named_modules())[1:]):  # children before their parents
        if policy(module):
            fully_shard(module, reshard_after_forward=plugin.reshard_after_forward, **common)
    fully_shard(model, **common)
    return [name for name, module in model.named_modules() if isinstance(module, FSDPModule)]


def _concat(parts: list[dict]) -> dict:
    """One batch from per-rank batches of the same step: tensors and lists concatenated along the
    samples, counts added."""
    out = {}
    for key, first in parts[0].items():
        values = [p[key] for p in parts]
        if isinstance(first, torch.Tensor):
            out[key] = torch.cat(values)
        elif isinstance(first, list):
            out[key] = [item for v in values for item in v]
        else:
            out[key] = sum(values)
    return out


def _batches(cfg, rank: int, world: int, whole: bool):
    """This process's micro-batches as depthpe's loader draws them, or (``whole``) the global batch
    of a 2-process run: both ranks' batches of each step concatenated."""
    from depthpe.loader.loaders import build_train_loader

    def loader(r, w):
        return build_train_loader(cfg.data, seed=cfg.seed, rank=r, world_size=w, num_workers=0,
                                  num_steps=cfg.train.steps, grad_accum=cfg.train.grad_accum)

    if whole:
        return (_concat(list(pair)) for pair in zip(loader(0, 2), loader(1, 2)))
    return iter(loader(rank, world))


@contextlib.contextmanager
def _nan_loss_at_call(call: int):
    """Make the ``total`` of the ``call``-th (1-based) ``depthpe.run.losses.depth_loss`` call NaN."""
    import depthpe.run.losses as losses

    real, calls = losses.depth_loss, [0]

    def patched(*args, **kwargs):
        terms = real(*args, **kwargs)
        calls[0] += 1
        if calls[0] == call:
            terms["total"] = terms["total"] * math.nan
        return terms

    losses.depth_loss = patched
    try:
        yield
    finally:
        losses.depth_loss = real


def _local_trainable(model) -> dict[str, torch.Tensor]:
    """Copies of this process's part of every trainable parameter (its shard under FSDP2)."""
    from torch.distributed.tensor import DTensor

    return {n: (p.to_local() if isinstance(p, DTensor) else p).detach().clone()
            for n, p in model.named_parameters() if p.requires_grad}


def _train(scenario: dict, rank: int, world: int, accelerator, job: dict) -> dict:
    """Build, (shard,) train ``STEPS`` depthpe steps of ``scenario`` (``grad_accum``, ``whole``
    batches, ``nan_call``: rank -> depth_loss call made NaN); returns what the tests check: per-step
    results and local parameters, the FSDP units, shard shapes, AdamW's step count and (rank 0) the
    gathered full state dict."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from torch.distributed.tensor import DTensor

    from depthpe.run.building import build_model, build_optimizer
    from depthpe.run.state import TrainState
    from depthpe.run.step import run_step

    cfg = _config(job["root"], scenario["grad_accum"])
    torch.manual_seed(0)  # the same initial weights in every process
    model = build_model(cfg)
    model.train()
    units = _shard_like_accelerate(model, world, job["fsdp_env"]) if world > 1 else []
    shards = {n: (tuple(p.to_local().shape), tuple(p.shape), str(p.placements))
              for n, p in model.named_parameters() if isinstance(p, DTensor)}
    optimizer = build_optimizer(model, cfg)
    batches, state, steps = _batches(cfg, rank, world, scenario["whole"]), TrainState(world_size=world), []
    nan_call = scenario["nan_call"].get(rank)
    with _nan_loss_at_call(nan_call) if nan_call else contextlib.nullcontext():
        for _ in range(STEPS):
            result = run_step(model, optimizer, batches, cfg, state, accelerator)
            steps.append({"skipped": result.skipped, "grad_norm": result.grad_norm, "lr": result.lr,
                          "loss": result.terms["total"], "local": _local_trainable(model)})
    first = next(p for p in model.parameters() if p.requires_grad)
    full = get_model_state_dict(model, options=StateDictOptions(
        full_state_dict=True, broadcast_from_rank0=True, cpu_offload=True))  # as accelerator.get_state_dict
    return {"steps": steps, "units": units, "shards": shards, "counters": dict(state.counters),
            "adamw_steps": float(optimizer.state[first]["step"]), "full": full if rank == 0 else None}


def _worker(rank: int, world: int, job: dict) -> None:
    """One spawned process: join the gloo group (``world`` > 1), run ``job["scenarios"]`` (name ->
    scenario) and write each result to ``<out>/<tag>_<name>_<rank>.pt``."""
    import torch.distributed as dist
    from accelerate import Accelerator

    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"
    if world > 1:  # what accelerate's MULTI_CPU state reads; without it, the process runs alone
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(job["port"]), RANK=str(rank),
                          WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))
    try:
        accelerator = Accelerator(cpu=True)
        assert accelerator.num_processes == world
        for name, scenario in job["scenarios"].items():
            result = _train(scenario, rank, world, accelerator, job)
            torch.save(result, Path(job["out"]) / f"{job['tag']}_{name}_{rank}.pt")
    finally:
        if world > 1:
            dist.destroy_process_group()


# ------------------------------------------------------------------ in the test process
def _spawn(world: int, job: dict) -> None:
    """Run ``_worker`` in ``world`` spawned processes; a child's exception fails the test with its
    traceback, a job over ``JOB_TIMEOUT_S`` is killed."""
    import torch.multiprocessing as mp

    ctx = mp.start_processes(_worker, args=(world, job), nprocs=world, join=False, start_method="spawn")
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail(f"{job['tag']} job ({world} processes) did not finish in {JOB_TIMEOUT_S} s")


@pytest.fixture(scope="module")
def runs(synth_root, tmp_path_factory):
    """{"fsdp_clean": [rank 0, rank 1], "fsdp_nan": [...], "one_whole": [the 1-process run], ...}."""
    out = tmp_path_factory.mktemp("fsdp2")
    job = {"root": str(synth_root), "out": str(out), "fsdp_env": _fsdp_launch_env()}
    plain = {"grad_accum": 1, "whole": False, "nan_call": {}}
    _spawn(2, {**job, "tag": "fsdp", "port": _free_port(), "scenarios": {
        "clean": plain, "nan": {**plain, "nan_call": {1: NAN_STEP}}}})
    halves = {**plain, "grad_accum": 2}  # rank 1's micro-batch of step g is depth_loss call 2 * g
    _spawn(1, {**job, "tag": "one", "scenarios": {
        "whole": {**plain, "whole": True}, "accum": halves, "accum_nan": {**halves, "nan_call": {0: 2 * NAN_STEP}}}})
    names = {"fsdp_clean": 2, "fsdp_nan": 2, "one_whole": 1, "one_accum": 1, "one_accum_nan": 1}
    return {name: [torch.load(out / f"{name}_{r}.pt") for r in range(n)] for name, n in names.items()}


def _max_diff(a: dict, b: dict) -> float:
    """Largest absolute difference between two state dicts with the same keys (empty shards: none)."""
    assert a.keys() == b.keys()
    return max(((a[k].double() - b[k].double()).abs().max().item() for k in a if a[k].numel()), default=0.0)


def test_plan_shards_every_block_and_the_root(runs):
    """The units are the backbone's and aggregator's blocks plus the root; parameters are sharded
    along dim 0 over the 2 ranks (frozen backbone included)."""
    r0, r1 = runs["fsdp_clean"]
    n = MICRO_MODEL["num_blocks"]
    expected = ([""] + ["aggregator.patch_embed.blocks.0"]
                + [f"aggregator.{kind}_blocks.{i}" for kind in ("frame", "global") for i in range(n)])
    assert sorted(r0["units"]) == sorted(expected) and r1["units"] == r0["units"]
    assert r0["steps"][0]["local"].keys() < r0["shards"].keys() <= r0["full"].keys()  # trainable and frozen
    for name, (local, full, placements) in r0["shards"].items():
        assert placements == "(Shard(dim=0),)", name
        assert local[0] == math.ceil(full[0] / 2) and local[1:] == full[1:], name
    assert any(n.startswith("aggregator.patch_embed.") for n in r0["shards"])


def test_three_steps_match_one_process_with_the_same_two_halves(runs):
    """(a) 3 FSDP2 steps on 2 ranks (half the global batch each) give the full weights of 3 steps of one
    unsharded process on the same halves as 2 micro-batches, within 1e-6 (bit-identical on this CPU):
    the arithmetic of the DDP run, which tests/e2e/test_distributed.py matches to the same reference."""
    fsdp, one = runs["fsdp_clean"][0], runs["one_accum"][0]
    assert _max_diff(fsdp["full"], one["full"]) <= 1e-6
    assert [s["grad_norm"] for s in fsdp["steps"]] == pytest.approx([s["grad_norm"] for s in one["steps"]], rel=1e-6)
    assert _max_diff(fsdp["steps"][-1]["local"], fsdp["steps"][0]["local"]) > 1e-4  # the weights do move


def test_three_steps_match_one_process_with_the_whole_batch(runs):
    """(a) Against one unsharded process on the whole global batch (mean of per-sample losses, as
    depthpe reduces): equal learning rates, losses and gradient norms before clipping (within 1e-5
    relative; clipping was active), and full weights within 1e-4. Not 1e-5: a forward over 2B samples
    rounds differently (float32) from two over B, and AdamW's normalisation magnifies that for elements
    whose gradient is nearly 0; the two unsharded runs (whole batch, 2 halves) already differ by
    1.7e-5 here, and FSDP2 adds nothing to that (previous test)."""
    fsdp, one = runs["fsdp_clean"][0], runs["one_whole"][0]
    for a, b in zip(fsdp["steps"], one["steps"], strict=True):
        assert not a["skipped"] and not b["skipped"] and a["lr"] == b["lr"]
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-5) and a["grad_norm"] > GRAD_CLIP
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
    assert fsdp["adamw_steps"] == one["adamw_steps"] == STEPS
    assert _max_diff(fsdp["full"], one["full"]) <= 1e-4
    assert _max_diff(runs["one_accum"][0]["full"], one["full"]) <= 1e-4


def test_nonfinite_step_on_one_rank_is_skipped_on_every_rank(runs):
    """(b) The loss is NaN on rank 1 only at step NAN_STEP: every rank skips that step (counted, no
    gradient norm, its shard unchanged bit for bit, AdamW not stepped), the next step trains with
    finite values, and the weights are those of one process skipping the same step."""
    skipped = NAN_STEP - 1
    for rank, r in enumerate(runs["fsdp_nan"]):
        assert [s["skipped"] for s in r["steps"]] == [i == skipped for i in range(STEPS)], rank
        assert r["counters"]["nonfinite_steps"] == 1 and r["adamw_steps"] == STEPS - 1
        assert math.isnan(r["steps"][skipped]["grad_norm"])
        before, during, after = (r["steps"][i]["local"] for i in (skipped - 1, skipped, skipped + 1))
        assert all(torch.equal(before[k], during[k]) for k in before), rank
        assert _max_diff(after, during) > 0 and all(v.isfinite().all() for v in after.values())
        assert math.isfinite(r["steps"][skipped + 1]["loss"]) and math.isfinite(r["steps"][skipped + 1]["grad_norm"])
    assert all(math.isfinite(v.abs().max().item()) for v in runs["fsdp_nan"][0]["full"].values())
    # and the run is the unsharded one with the same micro-batch made NaN
    assert _max_diff(runs["fsdp_nan"][0]["full"], runs["one_accum_nan"][0]["full"]) <= 1e-6


def test_gathered_state_dict_loads_strictly_and_backbone_is_untouched(runs, synth_root):
    """(c) The gathered full state dict loads into a fresh DepthModel with ``load_weights(strict=True)``
    (what export does), and the frozen backbone equals the initial one."""
    from depthpe.run.building import build_model

    full = runs["fsdp_clean"][0]["full"]
    cfg = _config(str(synth_root))
    torch.manual_seed(0)
    initial = build_model(cfg).state_dict()
    fresh = build_model(cfg)
    fresh.load_weights(full, strict=True)
    loaded = fresh.state_dict()
    assert all(torch.equal(loaded[k], full[k]) for k in full)
    backbone = [k for k in initial if k.startswith("aggregator.patch_embed.")]
    assert backbone and all(torch.equal(full[k], initial[k]) for k in backbone)
    trained = [k for k in initial if k not in backbone]
    assert any(not torch.equal(full[k], initial[k]) for k in trained)
