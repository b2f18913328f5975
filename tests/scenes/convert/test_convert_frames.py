"""One raw frame made ready for a scene file (depthpe/scenes/convert/frames.py): which frames are
dropped and for what reason, and the pose check."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from depthpe.scenes.convert.common import ConvertOptions
from depthpe.scenes.convert.contract import FrameDropped, RawFrame
from depthpe.scenes.convert.frames import BLANK_IMAGE_MAX, _prepare_frame, resize_frame, rotation_ok

OPTIONS = ConvertOptions(progress=False, max_side=64)
K = np.array([[40.0, 0, 15.5], [0, 40.0, 11.5], [0, 0, 1]])
W2C = np.hstack([np.eye(3), [[0.1], [0.0], [2.0]]])


def _frame(image=None, depth=None, **kw) -> RawFrame:
    image = np.full((24, 32, 3), 128, np.uint8) if image is None else image
    depth = np.full((24, 32), 3.0, np.float32) if depth is None else depth
    return RawFrame(image=image, depth=depth, K=kw.pop("K", K), w2c=kw.pop("w2c", W2C), name="f0", **kw)


def test_a_good_frame_is_kept_as_it_is():
    image, depth, k, w2c = _prepare_frame(_frame(), None, OPTIONS)
    assert image.shape == (24, 32, 3) and depth.shape == (24, 32) and np.array_equal(k, K) and np.array_equal(w2c, W2C)


@pytest.mark.parametrize("image, reason", [
    (np.full((24, 32), 128, np.uint8), "bad image format"),  # grayscale
    (np.full((24, 32, 4), 128, np.uint8), "bad image format"),  # RGBA
    (np.full((24, 32, 3), 0.5, np.float32), "bad image format"),
    (np.full((24, 32, 3), BLANK_IMAGE_MAX, np.uint8), "blank image"),
])
def test_frames_that_cannot_be_used_are_dropped_with_their_reason(image, reason):
    with pytest.raises(FrameDropped, match=f"^{reason}$"):
        _prepare_frame(_frame(image), None, OPTIONS)


def test_an_image_just_above_the_blank_level_is_kept():
    image = np.zeros((24, 32, 3), np.uint8)
    image[3, 4, 1] = BLANK_IMAGE_MAX + 1
    assert _prepare_frame(_frame(image), None, OPTIONS)[0].max() == BLANK_IMAGE_MAX + 1


@pytest.mark.parametrize("w2c", [
    np.hstack([np.eye(3), [[np.inf], [0.0], [2.0]]]),  # a good rotation, an infinite translation
    np.hstack([np.eye(3), [[np.nan], [0.0], [2.0]]]),
    np.hstack([np.diag([1.0, 1.0, -1.0]), [[0.0], [0.0], [2.0]]]),  # a reflection
    np.hstack([1.01 * np.eye(3), [[0.0], [0.0], [2.0]]]),  # scaled
    W2C[:2],  # two rows
])
def test_poses_that_are_no_rigid_motion_are_refused(w2c):
    assert not rotation_ok(w2c)
    with pytest.raises(FrameDropped, match="^invalid pose$"):
        _prepare_frame(_frame(w2c=w2c), None, OPTIONS)


def test_a_rotation_within_the_tolerance_is_a_pose():
    assert rotation_ok(np.hstack([(1 + 3e-4) * np.eye(3), [[0.0], [0.0], [2.0]]]))


def test_exactly_the_minimum_valid_depth_is_enough():
    depth = np.full((24, 32), 3.0, np.float32)
    depth[:12] = 0  # half the pixels valid
    options = ConvertOptions(progress=False, max_side=64, min_valid_fraction=0.5)
    assert _prepare_frame(_frame(depth=depth), None, options)[1].shape == (24, 32)
    depth[12, 0] = 0
    with pytest.raises(FrameDropped, match="^too little valid depth$"):
        _prepare_frame(_frame(depth=depth), None, options)


@pytest.mark.parametrize("size, interpolation", [((12, 16), cv2.INTER_AREA), ((48, 64), cv2.INTER_CUBIC)])
def test_images_shrink_by_area_and_grow_by_cubic_interpolation(size, interpolation):
    """Depth is resampled nearest (no value made up across an edge) and K follows exactly."""
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
    depth = rng.choice(np.array([1.0, 5.0], np.float32), (24, 32))
    resized, new_depth, k = resize_frame(image, depth, K, *size)
    assert np.array_equal(resized, cv2.resize(image, size[::-1], interpolation=interpolation))
    assert new_depth.shape == size and set(np.unique(new_depth)) <= {1.0, 5.0}
    sx, sy = size[1] / 32, size[0] / 24
    assert np.allclose(k, [[sx * K[0, 0], 0, sx * (K[0, 2] + 0.5) - 0.5], [0, sy * K[1, 1], sy * (K[1, 2] + 0.5) - 0.5],
                           [0, 0, 1]], rtol=0, atol=1e-12)


def test_depth_that_is_not_a_positive_finite_number_becomes_invalid():
    depth = np.full((24, 32), 0.5, np.float64)
    depth[0, :4] = [np.nan, np.inf, -2.0, -np.inf]
    out = _prepare_frame(_frame(depth=depth), None, OPTIONS)[1]
    assert out.dtype == np.float32 and out[0, :5].tolist() == [0, 0, 0, 0, 0.5]


@pytest.mark.parametrize("k", [np.diag([0.0, 40.0, 1.0]), np.diag([40.0, -1.0, 1.0]), np.full((3, 3), np.nan)])
def test_intrinsics_without_positive_finite_focal_lengths_drop_the_frame(k):
    with pytest.raises(FrameDropped, match="^invalid intrinsics$"):
        _prepare_frame(_frame(K=k), None, OPTIONS)


def test_a_frame_is_resized_to_the_scenes_size_unless_its_aspect_differs():
    assert _prepare_frame(_frame(), (12, 16), OPTIONS)[0].shape == (12, 16, 3)
    with pytest.raises(FrameDropped, match="^image aspect differs from the scene's first frame$"):
        _prepare_frame(_frame(), (12, 12), OPTIONS)
    with pytest.raises(FrameDropped, match="^image aspect differs"):
        _prepare_frame(_frame(), (12, 17), OPTIONS)  # scale factors 0.5 and 0.53: 6 % apart, over 2 %
