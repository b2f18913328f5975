"""What a scheduler that stops and restarts runs needs: a resumed run's TensorBoard logs show every
step once (the steps an interrupted run logged after its last checkpoint are dropped:
``tracker_init_kwargs``, ``purge_step``), and a SIGTERM after the run is complete does not end the
process with 143, which the Slurm scripts read as "requeue". The real pre-empted runs:
tests/slurm/test_cluster.py."""

from __future__ import annotations

from torch.utils.tensorboard import SummaryWriter
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from depthpe.run.tracking import tracker_init_kwargs


def test_a_resumed_run_purges_the_steps_after_its_checkpoint(tmp_path):
    assert "tensorboard" not in tracker_init_kwargs(tmp_path, 0)  # a new run purges nothing
    first = SummaryWriter(str(tmp_path))
    for step in range(1, 7):  # killed after step 6; its last checkpoint is step 4
        first.add_scalar("loss/total", float(step), step)
    first.close()
    again = SummaryWriter(str(tmp_path), **tracker_init_kwargs(tmp_path, 4)["tensorboard"])
    for step in range(5, 9):
        again.add_scalar("loss/total", 10.0 * step, step)
    again.close()
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    logged = [(e.step, e.value) for e in acc.Scalars("loss/total")]
    assert logged == [(1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0), (5, 50.0), (6, 60.0), (7, 70.0), (8, 80.0)]


def test_a_complete_run_ignores_sigterm_until_the_process_ends(monkeypatch):
    import signal

    import depthpe.run.trainer as trainer_mod
    from depthpe.train import main

    monkeypatch.setattr(trainer_mod, "train", lambda cfg, **options: None)  # the run completed
    before = signal.getsignal(signal.SIGTERM)
    try:
        assert main(["--config", "quickstart"]) == 0
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, before)
