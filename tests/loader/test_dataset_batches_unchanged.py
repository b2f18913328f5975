"""The loader's faster sample and batch code produces the batches of the earlier torch code, bit for bit.

``_reference_sample`` is ``build_sample`` as it was before the numpy / batch-buffer paths (torch.where
masking, ``valid.float().mean()``, ``normalize_scene`` on float64 depth, a permuted float copy of the
images): every sample and batch of the dataset must equal it exactly, on scenes with a stored valid
mask, holes and negative-zero depth, with crops, colour jitter and redraws."""

from pathlib import Path

import numpy as np
import pytest
import torch

from depthpe.loader import batching
from depthpe.loader import samples as sample_mod
from depthpe.loader.augment import crop_and_resize, crop_box, jitter_views
from depthpe.loader.config import DataConfig, SourceConfig
from depthpe.loader.batching import collate
from depthpe.loader.datasets import MultiViewDataset
from depthpe.loader.loaders import build_train_loader
from depthpe.loader.sampling import DynamicBatchSampler, select_views
from depthpe.scenes.format.scene_file import SceneReader, write_index, write_scene
from depthpe.geometry import normalize_scene
from tests.helpers.scenes import plane_scene


def _reference_sample(reader, frames, out_hw, rng, crop_scale, jitter, min_valid_fraction):
    """The tensor part of a sample computed as build_sample did before (reference; raises ValueError
    where build_sample rejects the sample for too little valid depth)."""
    views, raw = [], {}
    for f in frames:
        raw.setdefault(f, reader.read_frame(int(f)))
        fr = raw[f]
        box = crop_box(fr["depth"].shape, (fr["K"][0, 2], fr["K"][1, 2]), out_hw, float(rng.uniform(*crop_scale)))
        views.append(crop_and_resize(fr["image"], fr["depth"], fr["valid"], fr["K"], box, out_hw))
    images = np.stack([v[0] for v in views])
    depth = torch.from_numpy(np.stack([v[1] for v in views])).float()
    valid = torch.from_numpy(np.stack([v[2] for v in views])) & (depth > 0)
    depth = torch.where(valid, depth, torch.zeros_like(depth))
    if valid.float().mean().item() < min_valid_fraction:
        raise ValueError("rejected")
    w2c = torch.from_numpy(np.stack([raw[f]["w2c"] for f in frames]))
    w2c_n, depth_n, scale = normalize_scene(w2c, depth.double())
    if jitter is not None:
        images, _ = jitter_views(images, rng, jitter)
    return {
        "images": torch.from_numpy(images).permute(0, 3, 1, 2).float().div(255).contiguous(),
        "depth": depth_n.float(), "valid": valid, "K": torch.from_numpy(np.stack([v[3] for v in views])).float(),
        "w2c": w2c_n.float(), "scale": float(scale),
    }


def _assert_bitwise_equal(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape, what
    if a.is_floating_point():  # bitwise: -0.0 and +0.0 differ here
        a, b = a.view(torch.int32 if a.dtype == torch.float32 else torch.int64), b.view(
            torch.int32 if b.dtype == torch.float32 else torch.int64)
    assert torch.equal(a, b), what


@pytest.fixture(scope="module")
def mixed_root(tmp_path_factory):
    """Two scenes at 60 x 80: one with a stored valid mask, both with holes and -0.0 depth values."""
    root = tmp_path_factory.mktemp("mixed")
    split, rng, entries = root / "mix" / "train", np.random.default_rng(3), []
    for i in range(2):
        sc = plane_scene(6, 60, 80, seed=i)
        depth = sc["depth"].astype(np.float32)
        depth[rng.random(depth.shape) < 0.1] = 0
        depth[rng.random(depth.shape) < 0.05] = -0.0
        valid = rng.random(depth.shape) > 0.2 if i == 0 else None
        entries.append(write_scene(split / f"s{i}.h5", images=sc["images"], depth=depth, K=sc["K"], w2c=sc["w2c"],
                                   dataset="mix", scene_id=f"s{i}", split="train", metric=False,
                                   depth_units="scene", valid=valid))
    write_index(split, entries, dataset="mix", split="train")
    return root


def _cfg(root: Path, **kw) -> DataConfig:
    kw.setdefault("views", (2, 4))
    kw.setdefault("image_width", 56)
    kw.setdefault("max_images_per_batch", 8)
    kw.setdefault("crop_scale", (0.6, 1.0))
    return DataConfig(sources=[SourceConfig(name="mix", root=str(root))], **kw)


def test_samples_equal_the_reference_computation_bit_for_bit(mixed_root):
    cfg = _cfg(mixed_root, min_valid_fraction=0.7)  # rejects the samples of s0 (about 0.68 valid)
    ds = MultiViewDataset(cfg)
    keys = [k for b in DynamicBatchSampler(cfg, ds.scene_counts, seed=5, num_steps=12) for k in b]
    seen_negative_zero = False
    for key in keys:
        sample = ds[key]
        attempt = sample["redraws"]
        source, scene, rng = ds._attempt(key, attempt)
        reader, src = SceneReader(ds.entries[source][scene].path, strict=True), cfg.sources[source]
        w2c = reader.read_cameras()[1] if src.view_selection == "nearest" else None
        frames = select_views(reader.num_frames, key.num_views, rng, src.view_selection, src.window, w2c=w2c)
        ref = _reference_sample(reader, frames, (key.height, key.width), rng, cfg.crop_scale, cfg.color_jitter,
                                cfg.min_valid_fraction_of(source))
        assert sample["frames"].tolist() == [int(f) for f in frames]
        for name in ("images", "depth", "valid", "K", "w2c"):
            _assert_bitwise_equal(sample[name], ref[name], name)
        assert sample["scale"] == ref["scale"]
        stored = reader.read_depth(int(frames[0]))
        seen_negative_zero |= bool((np.signbit(stored) & (stored == 0)).any())
    assert seen_negative_zero and sum(ds[k]["redraws"] for k in keys) > 0  # the edge cases did occur


@pytest.mark.parametrize("workers", [0, 1])
def test_loader_batches_equal_collated_single_samples(mixed_root, workers):
    cfg = _cfg(mixed_root)
    ds = MultiViewDataset(cfg)
    keys = list(DynamicBatchSampler(cfg, ds.scene_counts, seed=2, num_steps=4))
    loader = build_train_loader(cfg, seed=2, num_workers=workers, num_steps=4)
    for batch_keys, batch in zip(keys, loader):
        expected = collate([ds[k] for k in batch_keys])
        for name in ("images", "depth", "valid", "K", "w2c", "frames", "scale"):
            _assert_bitwise_equal(batch[name], expected[name], name)
        assert batch["scene"] == expected["scene"] and batch["redraws"] == expected["redraws"]


def test_batch_tensors_are_allocated_in_shared_memory_inside_workers_only(monkeypatch):
    assert not batching.batch_tensor((2, 3), torch.float32).is_shared()
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: object())  # as inside a worker
    for dtype in (torch.float32, torch.bool, torch.int64):
        t = batching.batch_tensor((2, 3, 4), dtype)
        assert t.is_shared() and t.dtype == dtype and t.shape == (2, 3, 4) and t.is_contiguous()
    stacked = batching._stack([torch.ones(3, 4), torch.zeros(3, 4)])  # collate's stacking, in a worker
    assert stacked.is_shared() and stacked[0].eq(1).all() and stacked[1].eq(0).all()


def test_getitems_fills_one_batch_tensor_that_collate_hands_on(mixed_root):
    cfg = _cfg(mixed_root)
    ds = MultiViewDataset(cfg)
    keys = next(iter(DynamicBatchSampler(cfg, ds.scene_counts, seed=1, num_steps=1)))
    assert len(keys) > 1
    samples = ds.__getitems__(keys)
    batch = collate(samples)
    assert batch["images"].data_ptr() == samples[0]["images"].data_ptr()  # no copy
    assert batch["valid"].data_ptr() != samples[0]["valid"].data_ptr()  # stacked as before
    single = collate([ds[keys[0]], ds[keys[0]]])  # separate samples are stacked into new memory
    assert single["images"].data_ptr() not in (samples[0]["images"].data_ptr(),)
    _assert_bitwise_equal(single["images"][1], batch["images"][0], "images")


def test_valid_fraction_and_image_conversion_match_torch():
    rng = np.random.default_rng(0)
    for shape in [(2, 7, 9), (3, 168, 518), (24, 518, 518)]:
        for p in (0.0, 0.37, 0.999, 1.0):
            valid = rng.random(shape) < p
            assert sample_mod._valid_fraction(valid) == torch.from_numpy(valid).float().mean().item()
    every_value = np.arange(256, dtype=np.uint8).reshape(1, 16, 16, 1).repeat(3, -1)
    every_value[..., 1] = every_value[..., 1][:, ::-1]
    images = np.concatenate([every_value, rng.integers(0, 256, (2, 16, 16, 3), dtype=np.uint8)])
    expected = torch.from_numpy(images).permute(0, 3, 1, 2).float().div(255).contiguous()
    _assert_bitwise_equal(sample_mod._images_to_float(images), expected, "images")
    depth = rng.random((2, 5, 6)).astype(np.float32) * 30
    _assert_bitwise_equal(sample_mod._scaled_depth(depth, 1.7), (torch.from_numpy(depth).double() / 1.7).float(), "depth")
