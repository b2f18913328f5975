"""View selection mode "nearest" (recommended for MegaSynth-like scattered views): overlap by cameras."""

from __future__ import annotations

import numpy as np
import pytest

from depthpe.loader.sampling import eval_view_indices, make_rng, nearest_camera_order, select_views
from depthpe.scenes.synth import look_at_w2c


def _ring(n=12, radius=3.0):
    return np.stack([
        look_at_w2c(np.array([radius * np.cos(a), radius * np.sin(a), 1.0]), np.zeros(3))
        for a in 2 * np.pi * np.arange(n) / n
    ])


def test_nearest_picks_ring_neighbours():
    w2c = _ring()
    for seed in range(20):
        views = select_views(12, 3, make_rng(seed), "nearest", window=2, w2c=w2c)
        anchor = views[0]
        assert len(set(views)) == 3
        assert set(views[1:]) == {(anchor - 1) % 12, (anchor + 1) % 12}
    views = eval_view_indices(12, 3, 0, "scene", mode="nearest", window=2, w2c=w2c)
    assert set(views[1:]) == {(views[0] - 1) % 12, (views[0] + 1) % 12}


def test_nearest_prefers_the_same_viewing_direction():
    rng = np.random.default_rng(0)
    w2c = []
    for i in range(6):  # all cameras at about the same place; 0, 2, 4 look along +x, 1, 3, 5 along -x
        c = rng.normal(scale=0.01, size=3)
        w2c.append(look_at_w2c(c, c + np.array([1.0 if i % 2 == 0 else -1.0, 0.0, 0.0])))
    order = nearest_camera_order(np.stack(w2c), anchor=0)
    assert set(order[:2].tolist()) == {2, 4}


def test_nearest_needs_cameras_and_keeps_other_modes():
    with pytest.raises(ValueError, match="needs the 12 cameras"):
        select_views(12, 3, make_rng(0), "nearest")
    with pytest.raises(ValueError, match="'random', 'window' or 'nearest'"):
        select_views(12, 3, make_rng(0), "covis")
    assert len(select_views(12, 4, make_rng(0), "random")) == 4
