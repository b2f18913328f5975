"""The viewer's camera placement (``view.scene.camera_pose``): an OpenCV world-to-camera matrix
[R | t] puts the camera at the centre C with R C + t = 0, oriented by the camera-to-world R^T."""

from __future__ import annotations

import numpy as np
import pytest

from depthpe.view.scene import camera_pose
from tests.helpers.scenes import look_at_w2c

CENTRES = [(2.0, -1.0, 1.5), (-0.3, 4.0, -2.0), (0.0, 0.0, 0.0)]


@pytest.mark.parametrize("centre", CENTRES)
def test_the_pose_is_the_centre_and_the_camera_to_world_rotation(centre):
    w2c = look_at_w2c(np.array(centre), np.array([0.2, 0.1, -0.4]))  # (3, 4), a rotation and a translation
    R, C = camera_pose(w2c)
    np.testing.assert_allclose(w2c @ np.append(C, 1.0), 0.0, atol=1e-12)  # the centre maps to the camera origin
    np.testing.assert_allclose(C, centre, atol=1e-12)
    np.testing.assert_allclose(R, w2c[:3, :3].T, atol=0)
    full = np.vstack([w2c, [0.0, 0.0, 0.0, 1.0]])
    R4, C4 = camera_pose(full)  # a (4, 4) w2c gives the same pose
    np.testing.assert_allclose(R4, R)
    np.testing.assert_allclose(C4, C)


def test_a_point_in_front_of_the_camera_is_along_its_viewing_axis():
    w2c = look_at_w2c(np.array([1.0, 2.0, 3.0]), np.zeros(3))
    R, C = camera_pose(w2c)
    np.testing.assert_allclose(C + R @ np.array([0.0, 0.0, np.linalg.norm(C)]), 0.0, atol=1e-12)  # +z looks at target
