"""Batch sampler determinism across processes and resumes, source weights, view selection."""

import itertools

import numpy as np
import pytest

from depthpe.loader.config import DataConfig, SourceConfig
from depthpe.loader.sampling import (
    DynamicBatchSampler,
    SampleKey,
    batch_shape,
    eval_view_indices,
    make_rng,
    normalized_weights,
    select_views,
)


def _cfg(weights=(1.0, 1.0), **kw):
    sources = [SourceConfig(name=f"d{i}", weight=w) for i, w in enumerate(weights)]
    return DataConfig(sources=sources, **kw)


def _take(sampler, n):
    return list(itertools.islice(iter(sampler), n))


def test_batch_shape_follows_config():
    cfg = _cfg()
    seen_s = set()
    for step in range(300):
        shape = batch_shape(7, step, cfg)
        assert 2 <= shape.num_views <= 24 and 0.33 <= shape.aspect <= 1.0
        assert shape.width == 518 and shape.height % 14 == 0 and 14 <= shape.height <= 518
        assert abs(shape.height - 518 * shape.aspect) <= 7 + 1e-9
        assert shape.batch_size == max(1, 48 // shape.num_views)
        seen_s.add(shape.num_views)
    assert seen_s == set(range(2, 25))


def test_two_processes_agree_on_shapes_and_differ_in_scenes():
    cfg = _cfg()
    counts = [1000, 1000]
    r0 = _take(DynamicBatchSampler(cfg, counts, seed=5, rank=0, world_size=2), 50)
    r1 = _take(DynamicBatchSampler(cfg, counts, seed=5, rank=1, world_size=2), 50)
    for b0, b1 in zip(r0, r1):
        assert len(b0) == len(b1)
        assert {k[2:5] for k in b0} == {k[2:5] for k in b1} and len({k[2:5] for k in b0}) == 1
        assert [k.seed for k in b0] != [k.seed for k in b1]
    scenes0 = [(k.source, k.scene) for b in r0 for k in b]
    scenes1 = [(k.source, k.scene) for b in r1 for k in b]
    assert scenes0 != scenes1
    assert len(set(scenes0) & set(scenes1)) < 0.2 * len(scenes0)  # mostly different scenes
    # another seed gives another shape sequence
    other = _take(DynamicBatchSampler(cfg, counts, seed=6, rank=0, world_size=2), 50)
    assert [b[0][2:5] for b in other] != [b[0][2:5] for b in r0]


def test_recreated_sampler_and_resume_reproduce_the_sequence():
    cfg = _cfg()
    counts = [20, 30]
    a = _take(DynamicBatchSampler(cfg, counts, seed=11, rank=1, world_size=4), 40)
    b = _take(DynamicBatchSampler(cfg, counts, seed=11, rank=1, world_size=4), 40)
    assert a == b
    resumed = _take(DynamicBatchSampler(cfg, counts, seed=11, rank=1, world_size=4, start_step=25), 15)
    assert resumed == a[25:]
    s = DynamicBatchSampler(cfg, counts, seed=11, rank=1, world_size=4, start_step=25, num_steps=40)
    assert len(s) == 15 and list(s) == a[25:]
    assert s.batch_at(30) == a[30]
    assert all(isinstance(k, SampleKey) for k in a[0])


def test_global_sample_indices_partition_the_global_batch():
    """The sampler side of the equivalence: 2 ranks x 2 micro-batches draw exactly the keys of 1 rank
    with 4 micro-batches (and of 1 rank whose B is 4x larger), in the same order."""
    cfg = _cfg(weights=(1.0, 2.0), views=(2, 4), max_images_per_batch=12)
    big = _cfg(weights=(1.0, 2.0), views=(2, 4), max_images_per_batch=48)
    counts = [50, 70]
    for step in range(6):
        one = DynamicBatchSampler(cfg, counts, seed=3, grad_accum=4)
        split = [DynamicBatchSampler(cfg, counts, seed=3, rank=r, world_size=2, grad_accum=2) for r in range(2)]
        keys_one = [k for m in range(4) for k in one.batch_at(step, m)]
        keys_split = [k for m in range(2) for r in range(2) for k in split[r].batch_at(step, m)]
        assert keys_one == keys_split
        assert DynamicBatchSampler(big, counts, seed=3).batch_at(step) == keys_one
        assert len({k.seed for k in keys_one}) == len(keys_one)  # distinct samples
    # iteration: grad_accum micro-batches per optimizer step; start_step / num_steps count steps
    s = DynamicBatchSampler(cfg, counts, seed=3, rank=1, world_size=2, grad_accum=2, start_step=4, num_steps=6)
    assert len(s) == 4 and list(s) == [s.batch_at(4, 0), s.batch_at(4, 1), s.batch_at(5, 0), s.batch_at(5, 1)]
    with pytest.raises(ValueError, match="micro"):
        s.batch_at(4, 2)


def test_source_weights_respected():
    cfg = _cfg(weights=(3.0, 1.0, 0.0), views=(2, 2), max_images_per_batch=8)
    sampler = DynamicBatchSampler(cfg, [10, 5, 7], seed=0)
    keys = [k for b in _take(sampler, 1000) for k in b]
    assert len(keys) == 4000
    sources = np.array([k.source for k in keys])
    frac = np.bincount(sources, minlength=3) / len(keys)
    assert abs(frac[0] - 0.75) < 0.03 and abs(frac[1] - 0.25) < 0.03 and frac[2] == 0
    # scenes uniform within a source
    scenes = np.bincount([k.scene for k in keys if k.source == 1], minlength=5)
    assert scenes.min() > 0.7 * scenes.mean() and len(scenes) == 5


def test_weight_errors_are_clear():
    with pytest.raises(ValueError, match="no scenes"):
        normalized_weights([1.0, 1.0], [3, 0])
    with pytest.raises(ValueError, match="all source weights are 0"):
        normalized_weights([0.0, 0.0], [3, 3])
    np.testing.assert_allclose(normalized_weights([2.0, 0.0], [3, 0]), [1.0, 0.0])
    with pytest.raises(ValueError, match="rank"):
        DynamicBatchSampler(_cfg(), [1, 1], rank=2, world_size=2)


def test_select_views_random_and_window():
    rng = make_rng(0)
    for _ in range(50):
        v = select_views(100, 8, rng, "random")
        assert len(v) == 8 and len(set(v)) == 8 and all(0 <= i < 100 for i in v)
        w = select_views(100, 8, rng, "window", window=5)
        assert len(set(w)) == 8 and max(abs(i - w[0]) for i in w) <= 10
        assert all(0 <= i < 100 for i in w)
    # window near the border, and a window too small for S, still give S distinct frames
    w = select_views(100, 12, make_rng(1), "window", window=2)
    assert len(set(w)) == 12
    # short scenes repeat frames but use all of them
    short = select_views(3, 7, make_rng(2), "random")
    assert len(short) == 7 and set(short) == {0, 1, 2}
    with pytest.raises(ValueError, match="mode"):
        select_views(10, 3, make_rng(0), "covis")


def test_eval_view_indices_fixed_per_scene():
    a = eval_view_indices(50, 8, 0, "co3d/apple_1")
    assert a == eval_view_indices(50, 8, 0, "co3d/apple_1")
    assert len(set(a)) == 8 and all(0 <= i < 50 for i in a)
    assert a != eval_view_indices(50, 8, 0, "co3d/apple_2")
    assert a != eval_view_indices(50, 8, 1, "co3d/apple_1")
    assert a != eval_view_indices(50, 8, 0, "co3d/apple_1", attempt=1)
    assert sorted(eval_view_indices(5, 8, 0, "x")) == [0, 1, 2, 3, 4]


def test_config_from_dict():
    cfg = DataConfig.from_dict(
        {
            "sources": [{"name": "synth", "root": "data", "weight": 2}, {"name": "b", "view_selection": "window"}],
            "views": [3, 6],
            "aspect": [0.5, 0.5],
            "color_jitter": {"shared_prob": 0.5},
        }
    )
    assert cfg.views == (3, 6) and cfg.aspect == (0.5, 0.5) and cfg.color_jitter.shared_prob == 0.5
    assert cfg.sources[0].split_dir.as_posix() == "data/synth/train"
    assert cfg.min_valid_fraction_of(1) == 0.05
    assert DataConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match=r"unknown config key 'view' \(did you mean 'views'\?\)"):
        DataConfig.from_dict({"sources": [], "view": 3})
    with pytest.raises(ValueError, match=r"aspect: must be a \[min, max\] list"):
        DataConfig.from_dict({"aspect": 0.5})
    assert DataConfig(aspect=0.5).aspect == (0.5, 0.5)  # Python callers may still pass one number
    with pytest.raises(ValueError, match="multiple of patch_size"):
        DataConfig(image_width=500)
    with pytest.raises(ValueError, match="view_selection"):
        SourceConfig(name="a", view_selection="nearby")
