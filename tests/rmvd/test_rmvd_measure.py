"""Runtime and peak memory of one prediction (depthpe.rmvd.measure): units and the not-measured cases,
with a fake clock and a fake /proc/self/status, and the CPU peak of a real allocation."""

import math
import mmap
import os

import pytest
import torch

from depthpe.rmvd import measure


def test_runtime_is_in_milliseconds(monkeypatch):
    ticks = iter([100.0, 100.25])
    monkeypatch.setattr(measure.time, "perf_counter", lambda: next(ticks))
    result, m = measure.measured(lambda: "done", torch.device("cpu"), measure=True)
    assert result == "done" and m.runtime_ms == pytest.approx(250.0)


def test_cpu_peak_is_the_growth_of_the_resident_set_in_mib(monkeypatch):
    status = {"VmRSS": 10_240.0, "VmHWM": 10_240.0 + 3 * 1024}  # KiB: 3 MiB above the size before
    monkeypatch.setattr(measure, "_status_kib", lambda field: status[field])
    monkeypatch.setattr(measure, "_reset_cpu_peak", lambda: True)
    assert measure.measured(lambda: None, torch.device("cpu"), measure=True)[1].peak_memory_mib == pytest.approx(3.0)
    # where the high-water mark cannot be reset, the peak is not measured (the runtime still is)
    monkeypatch.setattr(measure, "_reset_cpu_peak", lambda: False)
    m = measure.measured(lambda: None, torch.device("cpu"), measure=True)[1]
    assert math.isnan(m.peak_memory_mib) and m.runtime_ms >= 0


def test_a_burn_in_call_runs_and_is_not_measured():
    calls = []
    result, m = measure.measured(lambda: calls.append(1) or "x", torch.device("cpu"), measure=False)
    assert result == "x" and calls == [1] and math.isnan(m.runtime_ms) and math.isnan(m.peak_memory_mib)


def _touch_64_mib():
    # fresh anonymous pages, each written once: resident whatever the allocator already holds (a numpy
    # array of 64 MiB grew the resident set by 0.07 MiB late in a CI run, probably reusing kept memory)
    pages = mmap.mmap(-1, 64 * 2**20)
    for offset in range(0, len(pages), 4096):
        pages[offset] = 1
    return pages


def test_the_cpu_peak_of_a_real_allocation():
    _, m = measure.measured(_touch_64_mib, torch.device("cpu"), measure=True)
    if os.access("/proc/self/clear_refs", os.W_OK):  # Linux, where the high-water mark can be reset
        assert measure.cpu_peak_available()
        assert 60.0 <= m.peak_memory_mib < 200.0, m.peak_memory_mib
    else:
        assert math.isnan(m.peak_memory_mib)
