"""`depthpe bench gpu-check` in its CPU-sized --tiny form: every part runs as its own subprocess,
the report holds each part's numbers, a failing part is reported without stopping the others."""

import json

import pytest

from depthpe.bench import gpu_check
from depthpe.cli import main


def test_loss_trend_compares_the_first_and_last_quarter(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "logs" / "train"))
    for step, value in enumerate([4.0, 4.0, 3.0, 3.0, 2.0, 2.0, 1.0, 1.0], start=1):
        writer.add_scalar("loss/total", value, step)
    writer.close()
    assert gpu_check.loss_trend(tmp_path) == (4.0, 1.0)
    assert gpu_check.loss_trend(tmp_path / "nothing") is None


@pytest.mark.slow
def test_tiny_gpu_check_writes_a_report_and_reports_a_failing_part(tmp_path, monkeypatch, capsys):
    plan = gpu_check._plan

    def broken_attention(out, device, tiny):
        parts = plan(out, device, tiny)
        parts["attention"] = ["bench", "attention", "--methods", "no_such_encoding"]
        return parts

    monkeypatch.setattr(gpu_check, "_plan", broken_attention)
    assert main(["bench", "gpu-check", "--out", str(tmp_path), "--device", "cpu", "--tiny"]) == 1
    report = json.loads((tmp_path / "report.json").read_text())
    parts = report["parts"]
    assert not parts["attention"]["ok"] and parts["attention"]["error"].startswith("exit status")
    assert parts["train"]["ok"] and parts["train"]["images_per_s"] > 0 and parts["train"]["peak_mib"] > 0
    first, last = parts["recipe"]["loss_first_last"]
    assert parts["recipe"]["ok"] and first > 0 and last > 0 and "loss_falls" in parts["recipe"]
    md = (tmp_path / "report.md").read_text()
    assert "- attention: FAILED (exit status" in md and "- train: ok" in md and "mean loss first quarter" in md
    assert md in capsys.readouterr().out
