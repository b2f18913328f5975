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
    nearest_camera_order,
    normalized_weights,
    select_views,
)
from tests.helpers.scenes import look_at_w2c


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


def test_batch_shape_draws_aspect_over_the_configured_range_and_keeps_one_sample():
    cfg = _cfg(views=(4, 6), aspect=(0.5, 0.8), image_width=512, patch_size=16, max_images_per_batch=6)
    shapes = [batch_shape(2, step, cfg) for step in range(300)]
    aspects = np.array([s.aspect for s in shapes])
    assert aspects.min() >= 0.5 and aspects.max() <= 0.8
    assert aspects.min() < 0.53 and aspects.max() > 0.77  # the whole range, not one end of it
    assert all(s.width == 512 and s.height % 16 == 0 and abs(s.height - 512 * s.aspect) <= 8 for s in shapes)
    assert {s.batch_size for s in shapes} == {1}  # 6 images hold one sample of 4, 5 or 6 views


def _w2c_from(centres, looks):
    """(N, 3, 4) OpenCV w2c of cameras at ``centres`` whose optical axis is +z turned about world y by
    ``looks`` degrees."""
    return np.stack([
        look_at_w2c(np.asarray(c, float), np.asarray(c, float) + [np.sin(np.radians(deg)), 0.0, np.cos(np.radians(deg))],
                    up=(0.0, 1.0, 0.0))
        for c, deg in zip(centres, looks)
    ])


def test_nearest_camera_order_weighs_distance_in_units_of_the_median_against_the_view_angle():
    # anchor 0; 1 is close and looks the same way, 2 is closer but looks sideways, 3 is far, 4 looks back.
    # Median distance 0.075: costs 1.33, 0.27 + 1, 4.0, 0.67 + 2 -> order 2, 1, 4, 3 (in raw distances
    # the angle term would dominate: 1, 3, 2, 4).
    centres = np.array([[0, 0, 0], [0.1, 0, 0], [0.02, 0, 0], [0.3, 0, 0], [0.05, 0, 0]], dtype=np.float64)
    looks = [0, 0, 90, 0, 180]
    assert nearest_camera_order(_w2c_from(centres, looks), 0).tolist() == [2, 1, 4, 3]
    # scale-free and translation-free: the same rig 100 x larger, moved away from the origin
    moved = centres * 100 + np.array([3.0, -7.0, 11.0])
    assert nearest_camera_order(_w2c_from(moved, looks), 0).tolist() == [2, 1, 4, 3]


def test_nearest_views_come_from_the_pool_of_most_similar_cameras():
    rng = np.random.default_rng(4)
    w2c = _w2c_from(rng.uniform(-2, 2, (8, 3)), rng.uniform(-60, 60, 8))
    for num_views, window in [(3, 4), (4, 1)]:  # pool = max(window, num_views - 1) cameras
        pool_size = max(window, num_views - 1)
        used: dict[int, set] = {}
        for seed in range(400):
            views = select_views(8, num_views, make_rng(seed), "nearest", window=window, w2c=w2c)
            assert len(set(views)) == num_views
            used.setdefault(views[0], set()).update(views[1:])
        for anchor, others in used.items():
            assert others == set(nearest_camera_order(w2c, anchor)[:pool_size].tolist())
    with pytest.raises(ValueError, match="needs the 8 cameras"):
        select_views(8, 3, make_rng(0), "nearest", w2c=w2c[:5])


@pytest.mark.parametrize(
    "num_views,window,expected",
    [
        # anchor -> the frames its other views come from (10 frames)
        (3, 2, {0: {1, 2}, 1: {0, 2, 3}, 5: {3, 4, 6, 7}, 9: {7, 8}}),
        # window 1 widened to hold the views: half = ceil((S - 1) / 2), then shifted off the scene's ends
        (5, 1, {0: {1, 2, 3, 4}, 5: {3, 4, 6, 7}, 9: {5, 6, 7, 8}}),
        (4, 1, {5: {3, 4, 6, 7}}),
        (7, 1, {0: {1, 2, 3, 4, 5, 6}, 5: {2, 3, 4, 6, 7, 8}}),
    ],
)
def test_window_views_come_from_the_documented_frames(num_views, window, expected):
    used: dict[int, set] = {}
    for seed in range(600):
        views = select_views(10, num_views, make_rng(seed), "window", window=window)
        assert len(set(views)) == num_views
        used.setdefault(views[0], set()).update(views[1:])
    for anchor, frames in expected.items():
        assert used[anchor] == frames, anchor


def test_one_frame_scenes_and_empty_scenes():
    assert select_views(1, 1, make_rng(0)) == [0]
    assert select_views(1, 3, make_rng(0), "window") == [0, 0, 0]
    with pytest.raises(ValueError, match="without frames"):
        select_views(0, 2, make_rng(0))


def test_sample_keys_depend_on_the_run_seed():
    cfg = _cfg(views=(2, 2), max_images_per_batch=8)
    a = DynamicBatchSampler(cfg, [500, 500], seed=0).batch_at(3)
    b = DynamicBatchSampler(cfg, [500, 500], seed=1).batch_at(3)
    assert [k.seed for k in a] != [k.seed for k in b]
    assert [(k.source, k.scene) for k in a] != [(k.source, k.scene) for k in b]


def test_sampler_argument_errors_say_what_is_wrong():
    with pytest.raises(ValueError, match=r"source weights must be finite and >= 0, got \[-1.0, 2.0\]"):
        normalized_weights([-1.0, 2.0], [3, 3])
    with pytest.raises(ValueError, match="3 weights for 2 sources"):
        normalized_weights([1.0, 1.0, 1.0], [3, 3])
    with pytest.raises(ValueError, match="start_step must be >= 0, got -1"):
        DynamicBatchSampler(_cfg(), [1, 1], start_step=-1)
    with pytest.raises(ValueError, match="grad_accum must be >= 1, got 0"):
        DynamicBatchSampler(_cfg(), [1, 1], grad_accum=0)
    with pytest.raises(ValueError, match="3 scene counts for 2 sources"):
        DynamicBatchSampler(_cfg(), [1, 1, 1])
    with pytest.raises(TypeError, match="infinite"):
        len(DynamicBatchSampler(_cfg(), [1, 1]))
    finished = DynamicBatchSampler(_cfg(), [1, 1], start_step=12, num_steps=10, grad_accum=2)
    assert len(finished) == 0 and list(finished) == []
