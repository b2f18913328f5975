"""The guards of runs of several processes, in process: the collective timeout reaches the process
group, a launch whose processes did not join one group is a config error, and which exceptions mean
that another process is gone (the end-to-end runs are in tests/e2e/test_multinode.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from depthpe.config import ConfigError
from depthpe.run.distributed import check_world_size, lost_peer, process_group_kwargs
from depthpe.run.schema import TrainLoopConfig


def test_world_size_larger_than_the_group_is_an_error_naming_the_flag():
    with pytest.raises(ConfigError, match=r"WORLD_SIZE=2.*group of 1.*train.cpu=true"):
        check_world_size(1, {"WORLD_SIZE": "2"})
    check_world_size(2, {"WORLD_SIZE": "2"})
    check_world_size(1, {})  # plain `depthpe train`


def test_lost_peer_recognises_gone_processes_only():
    gone = RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection reset by peer")
    assert lost_peer(gone, 2)
    assert not lost_peer(gone, 1)  # one process: nothing to lose
    assert lost_peer(RuntimeError("Timed out waiting 600000ms for recv operation"), 4)
    assert not lost_peer(RuntimeError("shape mismatch"), 2)
    assert not lost_peer(ValueError("connection reset by peer"), 2)
    import torch.distributed as dist

    assert lost_peer(dist.DistError("anything"), 2)


def test_dist_timeout_is_a_validated_config_field_passed_to_the_process_group():
    assert TrainLoopConfig().dist_timeout == 10.0
    with pytest.raises(ValueError, match="train.dist_timeout must be > 0"):
        TrainLoopConfig(dist_timeout=0)
    assert process_group_kwargs(2.5).timeout == timedelta(minutes=2.5)


def test_make_accelerator_uses_the_configured_timeout(tmp_path, monkeypatch):
    import accelerate

    from depthpe.run.trainer import make_accelerator
    from tests.helpers.training import run_config

    seen = {}
    real = accelerate.Accelerator.__init__

    def record(self, *args, **kwargs):
        seen["handlers"] = kwargs.get("kwargs_handlers")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(accelerate.Accelerator, "__init__", record)
    make_accelerator(run_config(tmp_path, tmp_path / "out", train={"dist_timeout": 3.0, "report_to": []}))
    assert [h.timeout for h in seen["handlers"]] == [timedelta(minutes=3.0)]
