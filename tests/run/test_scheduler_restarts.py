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
    # TensorBoard reads a folder's event files in name order, named by second, pid and a per-process
    # counter: a resumed run is a later process, but here both writers share one, and a counter
    # going from 9 to 10 would sort the resumed file first. Name the killed run's file as written earlier.
    (killed,) = tmp_path.glob("events.out.tfevents.*")
    killed.rename(tmp_path / "events.out.tfevents.0000000001.killed-run")
    again = SummaryWriter(str(tmp_path), **tracker_init_kwargs(tmp_path, 4)["tensorboard"])
    for step in range(5, 9):
        again.add_scalar("loss/total", 10.0 * step, step)
    again.close()
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    logged = [(e.step, e.value) for e in acc.Scalars("loss/total")]
    assert logged == [(1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0), (5, 50.0), (6, 60.0), (7, 70.0), (8, 80.0)]


def test_a_complete_run_ignores_sigterm_from_final_until_the_process_ends(monkeypatch, synth_root, tmp_path):
    """A real micro run through `depthpe train`: SIGTERM is ignored from the moment final/ is written,
    and still when the stop request puts its handlers back (a CI run on the real cluster once got the
    time limit's SIGTERM in that gap: exit 143, a requeue, the last 50 steps trained again). Before
    final/ the stop request's handler is in place (pre-emption still writes a checkpoint)."""
    import signal

    from depthpe.run.preemption import StopRequest
    from depthpe.run.loading import save_run_config
    from depthpe.train import main
    from tests.helpers.training import run_config

    seen = {}
    restore = StopRequest.restore

    def recording_restore(self):
        seen["before restore"] = signal.getsignal(signal.SIGTERM)
        restore(self)
        seen["after restore"] = signal.getsignal(signal.SIGTERM)

    monkeypatch.setattr(StopRequest, "restore", recording_restore)
    config = save_run_config(run_config(synth_root, tmp_path / "run", train={"steps": 2}), tmp_path / "run.yaml")
    before = signal.getsignal(signal.SIGTERM)
    try:
        assert main(["--config", str(config)]) == 0
        assert (tmp_path / "run" / "final" / "model.safetensors").is_file()
        assert seen == {"before restore": signal.SIG_IGN, "after restore": signal.SIG_IGN}
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, before)


def test_the_stop_request_puts_back_only_its_own_handlers():
    import signal

    from depthpe.run.preemption import StopRequest

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        stop = StopRequest()
        assert signal.getsignal(signal.SIGTERM) == stop._handle
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # installed by someone else meanwhile
        stop.restore()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN  # kept
        assert signal.getsignal(signal.SIGINT) == before[signal.SIGINT]  # its own one put back
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
