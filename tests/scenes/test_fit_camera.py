"""A camera calibrated at another resolution of its image (``data.cameras.fit_camera``): within 1 %
of the image's aspect ratio K is rescaled per axis (fx, cx by the width's scale; fy, cy by the
height's), beyond it the camera is refused with one line (K is never stretched to fit)."""

from __future__ import annotations

import numpy as np
import pytest

from depthpe.config import ConfigError
from depthpe.scenes.cameras import FrameCamera, fit_camera

CAM_W, CAM_H = 1000, 500
K = np.array([[800.0, 0.0, 499.5], [0.0, 700.0, 249.5], [0.0, 0.0, 1.0]])


def _camera() -> FrameCamera:
    return FrameCamera("a.jpg", K, np.eye(4), CAM_W, CAM_H)


def test_each_axis_is_scaled_by_its_own_ratio():
    """500x251: sx = 0.5, sy = 0.502 (0.4 % apart, within the tolerance)."""
    fitted, note = fit_camera(_camera(), "a.jpg", 251, 500)
    sx, sy = 500 / CAM_W, 251 / CAM_H
    assert (fitted.width, fitted.height) == (500, 251)
    assert fitted.K[0, 0] == pytest.approx(800.0 * sx, rel=1e-12)  # 400
    assert fitted.K[1, 1] == pytest.approx(700.0 * sy, rel=1e-12)  # 351.4
    assert fitted.K[0, 2] == pytest.approx(sx * (499.5 + 0.5) - 0.5, rel=1e-12)
    assert fitted.K[1, 2] == pytest.approx(sy * (249.5 + 0.5) - 0.5, rel=1e-12)
    assert note == "a.jpg: K rescaled from 1000x500 to the image's 500x251"


@pytest.mark.parametrize("height", [496, 504])  # aspect 0.8 % off either way: rescaled
def test_an_aspect_within_one_percent_is_rescaled(height):
    fitted, note = fit_camera(_camera(), "a.jpg", height, CAM_W)
    assert fitted.K[1, 1] == pytest.approx(700.0 * height / CAM_H) and fitted.K[0, 0] == 800.0
    assert note is not None


@pytest.mark.parametrize("height", [494, 506, 490, 485, 476, 510, 525])  # aspect 1.2 % to 5 % off
def test_an_aspect_a_few_percent_off_is_refused(height):
    with pytest.raises(ConfigError, match=rf"^image 'a.jpg' is {CAM_W}x{height} \(WxH\) but its camera is for "
                                          rf"{CAM_W}x{CAM_H}, another aspect ratio: give the camera of the image"):
        fit_camera(_camera(), "a.jpg", height, CAM_W)


def test_only_a_swapped_width_and_height_gets_the_swap_hint():
    """500x1000 is the camera's grid turned by 90 degrees; 800x625 has its pixel count, not its sides."""
    with pytest.raises(ConfigError, match=r"is 500x1000 \(WxH\) .* another aspect ratio \(width and height swapped"):
        fit_camera(_camera(), "a.jpg", 1000, 500)
    with pytest.raises(ConfigError, match=r"is 800x625 \(WxH\) .* another aspect ratio: give the camera"):
        fit_camera(_camera(), "a.jpg", 625, 800)
