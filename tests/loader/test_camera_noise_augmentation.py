"""``data.camera_noise``: training samples whose input cameras are perturbed; the images, depth,
validity, scale and frames (the supervision and everything else drawn) are those of the run without
it, the same key gives the same perturbation, and a dataset that does not train is never perturbed."""

import pytest
import torch

from depthpe.config.camera_noise import CameraNoise
from depthpe.loader.config import DataConfig, SourceConfig
from depthpe.loader.datasets import MultiViewDataset
from depthpe.loader.sampling import DynamicBatchSampler
from depthpe.geometry import camera_centers


def _config(root, **kw) -> DataConfig:
    return DataConfig(sources=[SourceConfig(name="synth", root=str(root))], views=(3, 3), image_width=42,
                      max_images_per_batch=6, **kw)


def _samples(cfg: DataConfig, train: bool = True) -> list[dict]:
    ds = MultiViewDataset(cfg, train=train)
    keys = [k for b in DynamicBatchSampler(cfg, ds.scene_counts, seed=3, num_steps=3) for k in b]
    return [ds[k] for k in keys]


def test_noise_changes_only_the_cameras_of_a_training_sample(synth_root):
    plain = _samples(_config(synth_root))
    noise = CameraNoise(rotation_deg=3.0, translation=0.1, focal=0.05)
    noisy = _samples(_config(synth_root, camera_noise=noise))
    again = _samples(_config(synth_root, camera_noise=noise))
    assert len(plain) == len(noisy) > 0
    for a, b, c in zip(plain, noisy, again):
        for name in ("images", "depth", "valid", "frames"):
            assert torch.equal(a[name], b[name]), name
        assert a["scale"] == b["scale"]
        assert not torch.equal(a["w2c"], b["w2c"]) and not torch.equal(a["K"], b["K"])
        assert torch.equal(b["w2c"], c["w2c"]) and torch.equal(b["K"], c["K"])  # the same key, the same draw
        moved = (camera_centers(b["w2c"].double()) - camera_centers(a["w2c"].double())).norm(dim=-1)
        assert moved[0] < 1e-6 and torch.allclose(moved[1:], torch.full_like(moved[1:], 0.1), rtol=1e-3)


def test_a_dataset_that_does_not_train_is_never_perturbed(synth_root):
    noise = CameraNoise(rotation_deg=3.0)
    for a, b in zip(_samples(_config(synth_root), train=False), _samples(_config(synth_root, camera_noise=noise), train=False)):
        assert torch.equal(a["w2c"], b["w2c"]) and torch.equal(a["K"], b["K"])


def test_noise_is_off_by_default_and_read_from_the_data_section():
    assert DataConfig().camera_noise.is_zero
    cfg = DataConfig.from_dict({"camera_noise": {"rotation_deg": 2, "translation": 0.05}})
    assert cfg.camera_noise == CameraNoise(rotation_deg=2, translation=0.05)
    assert cfg.to_dict()["camera_noise"] == {"rotation_deg": 2, "translation": 0.05, "focal": 0.0}
    with pytest.raises(Exception, match="camera noise rotation_deg must be a finite number >= 0"):
        DataConfig.from_dict({"camera_noise": {"rotation_deg": -1}})


@pytest.mark.parametrize("level", ["rotation_deg", "focal"])
def test_each_noise_level_reaches_the_training_samples_on_its_own(synth_root, level):
    plain = _samples(_config(synth_root))
    noisy = _samples(_config(synth_root, camera_noise=CameraNoise(**{level: 4.0 if level == "rotation_deg" else 0.1})))
    for a, b in zip(plain, noisy):
        if level == "focal":
            torch.testing.assert_close(b["w2c"], a["w2c"], atol=1e-6, rtol=0)  # (a float64 round trip)
            assert (b["K"][:, 0, 0] / a["K"][:, 0, 0] - 1).abs().sub(0.1).abs().max() < 1e-5  # fx x (1 +- 0.1)
            continue
        torch.testing.assert_close(b["K"], a["K"], atol=1e-5, rtol=0)
        # every view but the reference turned by exactly 4 degrees, its centre kept
        turn = b["w2c"][:, :3, :3].double() @ a["w2c"][:, :3, :3].double().mT
        angle = torch.rad2deg(torch.arccos(((turn.diagonal(dim1=-2, dim2=-1).sum(-1) - 1) / 2).clamp(-1, 1)))
        assert angle[0] < 1e-2 and torch.allclose(angle[1:], torch.full_like(angle[1:], 4.0), atol=1e-2)
        moved = (camera_centers(b["w2c"].double()) - camera_centers(a["w2c"].double())).norm(dim=-1)
        assert moved.max() < 1e-5
