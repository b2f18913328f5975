"""The model input of one RMVD view set (depthpe.rmvd.views.SampleImages): the poses handed to the
model are the list's view_to_key poses (depthpe w2c) as they are, never inverted."""

import cv2
import numpy as np

from depthpe.rmvd.samples import load_sample_list
from depthpe.rmvd.views import SampleImages
from depthpe.testing.rmvd_samples import fixture_pose, write_sample_list


def test_inputs_pass_each_views_pose_as_listed_keyview_first(tmp_path):
    sample = load_sample_list(write_sample_list(tmp_path, num_samples=1, num_views=3, images=True)).samples[0]
    images, K, w2c = SampleImages(sample).inputs((0, 1, 2), (8, 12))
    assert images.shape == (3, 8, 12, 3) and K.shape == (3, 3, 3)
    # view i's camera centre is at x = 0.5 * i in the keyview frame: w2c translation is -0.5 * i
    for i in range(3):
        np.testing.assert_array_equal(w2c[i], np.array(fixture_pose(i)))
    assert w2c[2][0, 3] == -1.0


def test_each_view_is_resized_whole_and_its_intrinsics_follow_exactly(tmp_path):
    sample = load_sample_list(write_sample_list(tmp_path, num_samples=1, num_views=2, images=True)).samples[0]
    loaded = SampleImages(sample)
    images, K, _ = loaded.inputs((0, 1), (8, 12))
    for i in range(2):
        h, w = loaded.image(i).shape[:2]
        sx, sy = 12 / w, 8 / h  # the whole image, no crop: pixel centres map as (u + 0.5) * s - 0.5
        (fx, _, cx), (_, fy, cy), _ = np.asarray(sample.views[i].K, dtype=np.float64)
        expected = [[fx * sx, 0, (cx + 0.5) * sx - 0.5], [0, fy * sy, (cy + 0.5) * sy - 0.5], [0, 0, 1]]
        np.testing.assert_allclose(K[i], expected, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(images[i], cv2.resize(loaded.image(i), (12, 8), interpolation=cv2.INTER_AREA))
