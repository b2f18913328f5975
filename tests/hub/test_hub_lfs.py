"""`depthpe push` over the large-file (LFS) path that multi-GB weights take (issue 24 item 1): the
weights go by multipart upload and arrive intact, and a push interrupted after the upload of the
weights (its commit failed) does not send them again when it is run again."""

from __future__ import annotations

import subprocess
import sys

import pytest

from depthpe.model import DepthModel, DepthModelConfig
from tests.helpers.hub_server import FakeHub
from tests.helpers.training import MICRO_MODEL

CHUNK = 256 * 1024


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model")
    cfg = DepthModelConfig.from_preset("tiny", **{k: v for k, v in MICRO_MODEL.items() if k != "preset"})
    DepthModel(cfg, load_backbone_weights=False).save_pretrained(folder)
    assert (folder / "model.safetensors").stat().st_size > 2 * CHUNK  # several parts
    return folder


def push(hub: FakeHub, folder, tmp_path) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "depthpe.cli", "push", str(folder), "--repo-id", "user/big", "--retries", "0"]
    return subprocess.run(argv, env=hub.env(home=str(tmp_path / "hf")), capture_output=True, text=True, timeout=120)


def test_weights_take_the_multipart_lfs_path(model_dir, tmp_path):
    with FakeHub(lfs_from=100_000, lfs_chunk=CHUNK) as hub:
        done = push(hub, model_dir, tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        files = hub.files("user/big")
        parts = -(-(model_dir / "model.safetensors").stat().st_size // CHUNK)
        assert hub.lfs_puts == parts
        assert any(path.endswith("/complete") for _, path in hub.requests)
    assert files["model.safetensors"] == (model_dir / "model.safetensors").read_bytes()
    assert files["config.json"] == (model_dir / "config.json").read_bytes()


def test_interrupted_push_does_not_upload_the_weights_again(model_dir, tmp_path):
    with FakeHub(lfs_from=100_000, fail={"commit": -1}) as hub:
        failed = push(hub, model_dir, tmp_path)
        assert failed.returncode == 1 and hub.lfs_puts == 1  # the weights went up, the commit failed
        hub.fail = {}
        done = push(hub, model_dir, tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert hub.lfs_puts == 1  # already stored: the second push sent only the commit
        assert hub.files("user/big")["model.safetensors"] == (model_dir / "model.safetensors").read_bytes()
