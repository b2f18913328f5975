"""One sample of S views (depthpe.loader.samples.build_sample): the valid mask, the scene scale and
the baseline check, on hand-made frames."""

import numpy as np
import pytest

from depthpe.loader.samples import SampleRejected, build_sample

SIZE = 16


class _Frames:
    """The part of a ``SceneReader`` that ``build_sample`` uses: ``read_frame(i)`` -> a frame dict."""

    def __init__(self, frames):
        self.frames = frames

    def read_frame(self, index):
        return self.frames[index]


def _frame(x: float, depth: float, valid=None):
    """A 16 x 16 view at camera centre (x, 0, 0) looking down +z, constant ``depth``."""
    w2c = np.eye(4)[:3].copy()
    w2c[0, 3] = -x
    return {
        "image": np.full((SIZE, SIZE, 3), 128, np.uint8),
        "depth": np.full((SIZE, SIZE), depth, np.float32),
        "valid": np.ones((SIZE, SIZE), bool) if valid is None else valid,
        "K": np.array([[20.0, 0, 7.5], [0, 20.0, 7.5], [0, 0, 1]]),
        "w2c": w2c,
    }


def _build(frames, **kw):
    return build_sample(_Frames(frames), range(len(frames)), (SIZE, SIZE), np.random.default_rng(0), **kw)


def test_a_pixel_is_valid_where_the_mask_says_so_and_depth_is_positive():
    masked = np.ones((SIZE, SIZE), bool)
    masked[0, :4] = False  # depth 5 there, but the file's mask says invalid
    first = _frame(0.0, 5.0, masked)
    first["depth"][1, :4] = 0.0  # the mask says valid, but there is no depth
    sample = _build([first, _frame(1.0, 5.0), _frame(3.0, 5.0)])
    valid, depth = sample["valid"][0].numpy(), sample["depth"][0].numpy()
    assert not valid[0, :4].any() and not valid[1, :4].any() and valid[2:].all()
    assert (depth[0, :4] == 0).all() and (depth[2:] == np.float32(5.0 / sample["scale"])).all()


def test_the_scale_reference_reaches_the_normalization():
    frames = [_frame(0.0, 5.0), _frame(1.0, 5.0), _frame(3.0, 5.0)]
    assert _build(frames)["scale"] == pytest.approx(2.0)  # others: mean of 1 and 3
    assert _build(frames, scale_reference="all")["scale"] == pytest.approx(4.0 / 3.0)  # (0 + 1 + 3) / 3


def test_the_baseline_is_checked_against_the_reference_views_depth():
    # scale 2; the reference view sees depth 10 (2 < 0.25 x 10), the others 0.5
    far_reference = [_frame(0.0, 10.0), _frame(1.0, 0.5), _frame(3.0, 0.5)]
    with pytest.raises(SampleRejected, match=r"camera baseline 2 is below 0.25 x median depth 10"):
        _build(far_reference, min_scale_ratio=0.25)
    # the reference near, the others far: kept (the median over all views, 10, would reject it)
    near_reference = [_frame(0.0, 0.5), _frame(1.0, 10.0), _frame(3.0, 10.0)]
    assert _build(near_reference, min_scale_ratio=0.25)["scale"] == pytest.approx(2.0)
    # a reference without valid depth: all views' depth decides
    blind_reference = [_frame(0.0, 0.0), _frame(1.0, 10.0), _frame(3.0, 10.0)]
    with pytest.raises(SampleRejected, match="below 0.25 x median depth 10"):
        _build(blind_reference, min_scale_ratio=0.25)
