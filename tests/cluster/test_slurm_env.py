"""depthpe.cluster.slurm: what Slurm's variables mean for a depthpe process (no cluster needed; the real one:
tests/slurm/test_cluster.py)."""

from __future__ import annotations

import pytest

from depthpe.cluster.slurm import apply_launch_env, first_host, launch_env, main_port

STEP = {"SLURM_JOB_ID": "17", "SLURM_STEP_ID": "2", "SLURM_PROCID": "3", "SLURM_LOCALID": "1",
        "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
        "SLURM_STEP_NODELIST": "gpu[07-08]", "SLURM_JOB_NODELIST": "gpu[07-08]"}


@pytest.mark.parametrize("nodelist, first", [("vm", "vm"), ("node[07-09,12],gpu1", "node07"), ("a,b", "a"),
                                             ("rack1-n[3,5]", "rack1-n3")])
def test_first_host(nodelist, first):
    assert first_host(nodelist) == first


def test_a_task_of_a_multi_task_step_gets_the_torch_distributed_variables():
    assert launch_env(STEP) == {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
                                "MASTER_ADDR": "gpu07", "MASTER_PORT": str(20000 + 17 * 16 + 2)}
    assert main_port({**STEP, "DEPTHPE_MAIN_PORT": "29555"}) == 29555


@pytest.mark.parametrize("change", [
    {"SLURM_STEP_NUM_TASKS": "1"},  # one task: nothing to join
    {"RANK": "0"},  # a launcher (accelerate launch, torchrun) started this process
    {"WORLD_SIZE": "8"},
])
def test_nothing_changes_for_one_task_or_a_launched_process(change):
    assert launch_env({**STEP, **change}) == {}


def test_the_batch_script_itself_is_not_a_task():
    batch = {k: v for k, v in STEP.items() if not k.startswith("SLURM_STEP")}  # SLURM_PROCID=0, SLURM_NTASKS set
    assert launch_env({**batch, "SLURM_NTASKS": "4"}) == {}


def test_apply_launch_env_adds_to_the_environment():
    env = dict(STEP)
    added = apply_launch_env(env)
    assert added["RANK"] == "3" and env["WORLD_SIZE"] == "4" and env["SLURM_PROCID"] == "3"
