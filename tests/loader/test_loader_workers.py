"""DataLoader workers (``depthpe.loader.workers``): they leave stop signals to the main process but obey
their parent, and a loader started after multi-threaded OpenCV use in the same process (``predict``
in a notebook, then training) does not hang."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from torch.utils.data import DataLoader, Dataset

from depthpe.loader.loaders import loader_kwargs
from depthpe.loader.workers import worker_init_fn

ROOT = Path(__file__).resolve().parents[2]


class _Pids(Dataset):
    """Item i is the pid of the process that produced it."""

    def __len__(self):
        return 1000

    def __getitem__(self, i):
        return os.getpid()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_until_delivered(pids, limit: float = 60.0) -> None:
    """Wait until no signal is pending for any of ``pids`` (Linux: ``SigPnd``/``ShdPnd`` of
    /proc/PID/status), i.e. each sent signal has reached its handler or been ignored, however busy
    the machine (a fixed sleep may end before that)."""
    def pending(pid: int) -> bool:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
        return any(int(fields[key], 16) for key in ("SigPnd", "ShdPnd"))

    deadline = time.monotonic() + limit
    while any(pending(pid) for pid in pids if _alive(pid)):
        assert time.monotonic() < deadline, f"signals still pending after {limit} s"
        time.sleep(0.01)


def _kill_from_another_process(signame: str, pids) -> None:
    """Send a signal as a scheduler or a terminal does: from a process that is not the parent."""
    subprocess.run(["kill", f"-{signame}", *map(str, pids)], check=True)


def test_loader_workers_ignore_stop_signals_sent_by_others():
    loader = DataLoader(_Pids(), batch_size=1, **loader_kwargs(2))
    batches = iter(loader)
    workers = {int(next(batches)) for _ in range(8)}
    assert len(workers) == 2 and os.getpid() not in workers
    for signame in ("TERM", "INT"):
        _kill_from_another_process(signame, workers)
    _wait_until_delivered(workers)
    assert all(_alive(pid) for pid in workers)
    assert {int(next(batches)) for _ in range(8)} == workers  # still serving
    del batches  # the loader stops its workers itself


def _set_up_and_wait(ready) -> None:
    worker_init_fn(0)
    ready.send("ready")
    time.sleep(60)


def test_a_worker_obeys_a_sigterm_of_its_parent():
    """``Process.terminate()`` (SIGTERM from the parent) still ends a worker: torch and multiprocessing
    end a worker that does not leave in time with it, and would wait for ever otherwise."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    ready, child_end = ctx.Pipe()
    worker = ctx.Process(target=_set_up_and_wait, args=(child_end,), daemon=True)
    worker.start()
    assert ready.poll(30) and ready.recv() == "ready"
    _kill_from_another_process("TERM", [worker.pid])
    _wait_until_delivered([worker.pid])
    assert worker.is_alive()
    worker.terminate()
    worker.join(timeout=10)
    assert worker.exitcode == 143


CHILD = """
import sys, time
import cv2, numpy as np
cv2.setNumThreads(4)  # a pool with threads, whatever the number of cores
frame = np.random.default_rng(0).integers(0, 256, (1080, 1920, 3), dtype=np.uint8)
for _ in range(3):  # predict-like: resizing photos uses OpenCV's thread pool
    cv2.resize(frame, (960, 540), interpolation=cv2.INTER_AREA)
time.sleep(0.5)  # the pool's threads go to sleep (a worker forked now used to hang for ever)
from depthpe.loader.config import DataConfig, SourceConfig
from depthpe.loader.loaders import build_train_loader
cfg = DataConfig(sources=[SourceConfig(name="synth", root=sys.argv[1])], views=(2, 3), image_width=42,
                 max_images_per_batch=6)
print("batches", sum(1 for _ in build_train_loader(cfg, seed=0, num_workers=2, num_steps=3)), flush=True)
"""


def test_a_worker_loader_after_multithreaded_opencv_use_does_not_hang(tmp_path):
    from depthpe.scenes.synth import write_synth_dataset

    write_synth_dataset(tmp_path, train_scenes=2, val_scenes=1, views=4, height=56, width=56, seed=0,
                        progress=False)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], cwd=ROOT, start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        printed, _ = child.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)  # the child and its hung workers
        pytest.fail(f"the loader hung after OpenCV used its thread pool: {child.communicate()[0][-2000:]}")
    assert child.returncode == 0 and "batches 3" in printed, printed[-2000:]


def test_the_fork_hook_restores_opencv_threads_in_parent_and_child():
    import cv2

    import depthpe.loader.workers  # noqa: F401 (registers the hook)

    before = cv2.getNumThreads()
    cv2.setNumThreads(3)
    try:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(write, str(cv2.getNumThreads()).encode())
            os._exit(0)
        os.close(write)
        assert int(os.read(read, 16)) == 3 and cv2.getNumThreads() == 3
        os.waitpid(pid, 0)
        os.close(read)
    finally:
        cv2.setNumThreads(before)
