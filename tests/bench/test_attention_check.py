"""``depthpe bench attention --check-fused``: the fused attention functions pass against their plain
path, a broken fused backward is reported and fails the command, and ``--head-chunks`` changes the
slices the fused functions work on for the run only."""

from __future__ import annotations

import json

import pytest
import torch

from depthpe.bench import attention
from depthpe.pe import camera
from depthpe.pe.kernels import FusedKernel
from tests.helpers.bench_attention import TINY, attention_args as _args

METHODS = ["rope", "prope", "dppe_tadd", "urope"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fused_functions_pass_the_check(tmp_path, capsys, dtype):
    out = tmp_path / "check.json"
    argv = [*TINY, "--check-fused", "--dtype", dtype, "--methods", *METHODS, "--json", str(out)]
    assert attention.run(_args(*argv)) == 0
    results = json.loads(out.read_text())["check_fused"]["2"]
    assert results["rope"]["kernel"] == "none" and results["rope"]["errors"] == {}
    for method in METHODS[1:]:
        assert results[method]["kernel"] == "cpu_flash" and results[method]["ok"]
        assert set(results[method]["errors"]) == {"out", "dq", "dk", "dv"}
    assert "| prope | cpu_flash |" in capsys.readouterr().out


def test_a_broken_fused_backward_fails_the_check(tmp_path, capsys, monkeypatch):
    backward = FusedKernel.backward

    def doubled_dq(self, *args):
        dq, dk, dv = backward(self, *args)
        return 2 * dq, dk, dv

    monkeypatch.setattr(FusedKernel, "backward", doubled_dq)
    out = tmp_path / "check.json"
    assert attention.run(_args(*TINY, "--check-fused", "--methods", "prope", "urope", "--json", str(out))) == 1
    results = json.loads(out.read_text())["check_fused"]["2"]
    for method in ("prope", "urope"):
        assert not results[method]["ok"] and results[method]["errors"]["dq"] > 0.1
        assert results[method]["errors"]["out"] < 1e-6  # the forward is untouched
    captured = capsys.readouterr()
    assert "FAILED" in captured.out and "prope, urope differ from their plain path" in captured.err


def test_head_chunks_apply_to_the_run_only(tmp_path, monkeypatch):
    seen = []
    forward = FusedKernel.forward

    def counting(self, q, k, v):
        seen.append(q.shape[1])
        return forward(self, q, k, v)

    monkeypatch.setattr(FusedKernel, "forward", counting)
    before = dict(camera.HEAD_CHUNKS)
    assert attention.run(_args(*TINY, "--check-fused", "--methods", "prope", "--head-chunks", "1")) == 0
    assert seen == [4]  # one call with all 4 heads
    seen.clear()
    assert attention.run(_args(*TINY, "--check-fused", "--methods", "prope", "--head-chunks", "4")) == 0
    assert seen == [1, 1, 1, 1]
    assert camera.HEAD_CHUNKS == before
    with pytest.raises(SystemExit, match="--head-chunks must be >= 1"):
        attention.run(_args(*TINY, "--check-fused", "--head-chunks", "0"))


def test_relative_error_of_zero_tensors_is_their_difference():
    from depthpe.bench.attention_check import relative_error

    assert relative_error(torch.zeros(3), torch.zeros(3)) == 0.0
    assert relative_error(torch.ones(3), torch.zeros(3)) == 1.0
    assert relative_error(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 4.0])) == 0.5
