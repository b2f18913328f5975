"""Several machines, rehearsed on one: two `accelerate launch` "nodes" (--num_machines 2, one
process each, gloo over 127.0.0.1) train as one run, checkpoint and resume to the weights of the
single-node 2-process run; a launch that does not form one process group is an error; a node that
dies ends the survivor with one line naming the checkpoint to resume from."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
from safetensors.torch import load_file

from depthpe.run import dump_run_config
from tests.helpers.training import run_config

pytestmark = pytest.mark.slow  # accelerate launch, several processes

STEPS = 3


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    return {**env, "OMP_NUM_THREADS": "1", "HF_HOME": str(tmp / "hf"), **extra}


def _node(rank: int, port: int, config: Path, env: dict, *args: str) -> subprocess.Popen:
    """One "machine" of a 2-machine run: its own launcher with one process."""
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_machines", "2",
           "--machine_rank", str(rank), "--num_processes", "2", "--main_process_ip", "127.0.0.1",
           "--main_process_port", str(port), "--mixed_precision", "no", "--dynamo_backend", "no",
           "-m", "depthpe.train", "--config", str(config), *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _kill_tree(node: subprocess.Popen) -> None:
    """SIGKILL a launcher and every process under it (torchrun starts workers in sessions of their own)."""
    try:
        launcher = psutil.Process(node.pid)
        processes = [*launcher.children(recursive=True), launcher]
    except psutil.NoSuchProcess:
        return
    for process in processes:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass


def _two_nodes(config: Path, env: dict, *args: str, timeout: float = 300) -> list[tuple[int, str]]:
    port = _port()
    nodes = [_node(rank, port, config, env, *args) for rank in (0, 1)]
    try:
        outputs = [p.communicate(timeout=timeout)[0] for p in nodes]
    finally:
        for p in nodes:
            _kill_tree(p)
    return [(p.returncode, out) for p, out in zip(nodes, outputs)]


def _config_file(tmp: Path, root: Path, out: Path, **train) -> Path:
    path = tmp / f"{out.name}.yaml"
    cfg = run_config(root, out, train={"steps": STEPS, "checkpoint_every": 2, "torch_threads": 1, **train})
    path.write_text(dump_run_config(cfg))
    return path


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(folder / "model.safetensors")


def _assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys() and len(a) > 50
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])][:5]


@pytest.fixture(scope="module")
def single_node(synth_root, tmp_path_factory):
    """The reference: one machine, 2 processes (ACCELERATE_USE_CPU=1, as docs/distributed.md says)."""
    tmp = tmp_path_factory.mktemp("single")
    config = _config_file(tmp, synth_root, tmp / "run")
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port",
           str(_port()), "-m", "depthpe.train", "--config", str(config)]
    done = subprocess.run(cmd, env=_env(tmp, ACCELERATE_USE_CPU="1"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return _weights(tmp / "run" / "final")


def test_two_machines_train_checkpoint_and_resume_like_one(single_node, synth_root, tmp_path):
    config = _config_file(tmp_path, synth_root, tmp_path / "nodes")
    results = _two_nodes(config, _env(tmp_path))
    assert [code for code, _ in results] == [0, 0], results[0][1][-3000:] + results[1][1][-3000:]
    assert "world size 2 (MULTI_CPU" in results[0][1] + results[1][1]
    run = tmp_path / "nodes"
    _assert_same(_weights(run / "final"), single_node)

    # resume on the two machines from the step-2 checkpoint: the same weights again
    resumed = tmp_path / "resumed"
    shutil.copytree(run / "checkpoints" / "step_0000002", resumed / "checkpoints" / "step_0000002")
    config2 = _config_file(tmp_path, synth_root, resumed)
    results = _two_nodes(config2, _env(tmp_path), "--resume", "latest")
    assert [code for code, _ in results] == [0, 0], results[0][1][-3000:]
    _assert_same(_weights(resumed / "final"), single_node)


def test_machines_that_do_not_form_one_group_are_an_error(synth_root, tmp_path):
    """Without train.cpu=true on CPU machines every "node" would train alone (world size 1)."""
    config = _config_file(tmp_path, synth_root, tmp_path / "alone", cpu=False)
    results = _two_nodes(config, _env(tmp_path), timeout=240)
    for code, out in results:
        assert code != 0, out[-2000:]
        assert "WORLD_SIZE=2" in out and "train.cpu=true" in out, out[-2000:]
    assert not (tmp_path / "alone" / "checkpoints").exists()


def test_a_dead_machine_ends_the_survivor_with_one_line(synth_root, tmp_path):
    config = _config_file(tmp_path, synth_root, tmp_path / "killed", steps=2000, checkpoint_every=1,
                          keep_checkpoints=2)
    port = _port()
    env = _env(tmp_path)
    nodes = [_node(rank, port, config, env) for rank in (0, 1)]
    checkpoints = tmp_path / "killed" / "checkpoints"
    try:
        deadline = time.time() + 240
        while not any(checkpoints.glob("step_*/trainer_state.json")) and time.time() < deadline:
            assert nodes[0].poll() is None, nodes[0].communicate()[0][-3000:]
            time.sleep(0.5)
        assert any(checkpoints.glob("step_*/trainer_state.json")), "no checkpoint within 240 s"
        _kill_tree(nodes[1])  # the second machine dies: its launcher and its worker
        killed_at = time.time()
        out = nodes[0].communicate(timeout=180)[0]
        nodes[1].communicate()
    finally:
        for node in nodes:
            _kill_tree(node)
    assert nodes[0].returncode != 0
    assert time.time() - killed_at < 120
    lines = [line for line in out.splitlines() if "lost contact with the others" in line]
    assert len(lines) == 1, out[-3000:]
    assert "start every process again with --resume latest" in lines[0] and "step_" in lines[0]
    named = Path(lines[0].split("the last complete checkpoint is ")[1].split(":")[0])
    assert (named / "trainer_state.json").is_file()  # a complete checkpoint, nothing half-written named
