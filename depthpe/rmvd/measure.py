"""Runtime and peak memory of one prediction (batch size 1), as ``depthpe rmvd --model`` records them.

* **runtime** (``runtime_ms``): wall-clock milliseconds (``time.perf_counter``) of the prediction
  call: host-to-device copies, the model and the copy of depth and confidence back; on CUDA the
  device is synchronized before and after.
* **peak memory** (``peak_memory_mib``), MiB (2**20 bytes):
  - CUDA: ``torch.cuda.max_memory_allocated`` after ``torch.cuda.reset_peak_memory_stats`` just
    before the call: the peak of all tensors allocated on the device during it, the model's weights
    included (as RMVD's ``gpu_mem_alloc_in_mib``);
  - CPU: the peak resident-set growth of the process during the call: ``VmHWM`` after minus
    ``VmRSS`` before, from ``/proc/self/status``, with the high-water mark reset by writing ``5``
    to ``/proc/self/clear_refs`` just before (Linux). Where that file cannot be written (another
    system, a restricted container) the peak is not measured: NaN.

The first ``--burn-in`` predicted samples of each setting and dataset are not measured (NaN), as in
RMVD (warm-up of kernels, allocator and caches).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

__all__ = ["Measurement", "measured", "cpu_peak_available"]

_MIB = 2.0 ** 20
_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"


@dataclass
class Measurement:
    """One call's runtime (ms) and peak memory (MiB); NaN = not measured."""

    runtime_ms: float = float("nan")
    peak_memory_mib: float = float("nan")


def _status_kib(field: str) -> float:
    """A ``kB`` field of /proc/self/status (VmRSS, VmHWM), in KiB; NaN where unreadable."""
    try:
        with open(_STATUS) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except OSError:
        pass
    return float("nan")


def _reset_cpu_peak() -> bool:
    """Reset the process's resident-set high-water mark (VmHWM); False where that is not possible."""
    try:
        with open(_CLEAR_REFS, "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def cpu_peak_available() -> bool:
    """Whether the CPU peak memory can be measured here (/proc/self/clear_refs writable)."""
    return _reset_cpu_peak()


def measured(fn, device: torch.device, measure: bool):
    """(``fn()``'s result, its ``Measurement``) on ``device``; with ``measure`` False it only runs
    ``fn`` (a burn-in sample) and the measurement stays NaN."""
    if not measure:
        return fn(), Measurement()
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = 0.0
    else:
        before = _status_kib("VmRSS") if _reset_cpu_peak() else float("nan")
    start = time.perf_counter()
    result = fn()
    if cuda:
        torch.cuda.synchronize(device)
    elapsed = (time.perf_counter() - start) * 1000.0
    if cuda:
        peak = torch.cuda.max_memory_allocated(device) / _MIB
    else:
        peak = (_status_kib("VmHWM") - before) * 1024 / _MIB
    return result, Measurement(elapsed, peak)
