import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

# One intra-op thread: the tests are tiny, and a loaded 2-core machine makes multi-threaded
# OpenMP many times slower (the training loop makes the same choice on small CPUs).
try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass
