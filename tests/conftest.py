import os

import pytest

# Fixtures shared by test modules in several folders (tests/fixtures/); plain helpers are in tests/helpers/.
pytest_plugins = [
    "tests.fixtures.data",
    "tests.fixtures.models",
    "tests.fixtures.prediction",
    "tests.fixtures.evaluation",
    "tests.fixtures.compare",
    "tests.fixtures.rmvd",
]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
# OpenMP threads that wait for work sleep instead of spinning (set before torch loads libgomp, and
# inherited by every `depthpe` process a test starts): beside the other pytest worker, a spinning
# thread takes the core its partner needs (docs/install.md, "Keeping CI under 20 minutes").
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# One intra-op thread: the tests are tiny, and a loaded 2-core machine makes multi-threaded
# OpenMP many times slower (the training loop makes the same choice on small CPUs).
try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass

# Tests that use these fixtures share a real training run started in another process
# (train/train.py pushing to the fake Hub in tests/hub/test_hub.py), so they are ``slow`` without a decorator.
SUBPROCESS_RUN_FIXTURES = {"pushed_run"}


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Every test starts with one intra-op thread: a training run in an earlier test sets the count of
    its config (``train.torch_threads``), and float reductions differ with the thread count, so
    results compared bit for bit with a subprocess (``OMP_NUM_THREADS=1``) must not inherit it."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        yield
        return
    torch.set_num_threads(1)
    yield


@pytest.fixture(autouse=True)
def _signal_handlers_restored():
    """Every test starts with the SIGTERM and SIGINT handlers the session started with: `depthpe
    train` run in-process ignores SIGTERM from the moment final/ is written until the process ends
    (on purpose, commands/train.py), so without this a later test in the same worker inherits
    SIG_IGN (tests/run/test_training.py's pre-emption test then failed, depending on test order)."""
    import signal

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in before.items():
        if handler is not None:
            signal.signal(sig, handler)


def pytest_collection_modifyitems(items):
    for item in items:
        if SUBPROCESS_RUN_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
