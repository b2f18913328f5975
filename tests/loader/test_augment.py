"""Crop + resize geometry (exact intrinsics), nearest depth resize and colour jitter."""

import cv2
import numpy as np
import pytest
import torch

from depthpe.loader.augment import (
    CropBox,
    JitterParams,
    apply_jitter,
    crop_and_resize,
    crop_box,
    jitter_views,
    sample_jitter,
)
from depthpe.loader.config import ColorJitterConfig
from depthpe.loader.sampling import target_size
from depthpe.geometry import project_points


def _K(fx, fy, cx, cy):
    return np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1]], dtype=np.float64)


def _map_pixel(uv, box: CropBox, out_hw):
    """Where input pixel coordinate uv lands after cropping to box and resizing to out_hw (OpenCV)."""
    sx, sy = out_hw[1] / box.width, out_hw[0] / box.height
    return np.array([(uv[0] - box.left + 0.5) * sx - 0.5, (uv[1] - box.top + 0.5) * sy - 0.5])


def _blob_image(h, w, center, sigma=2.0):
    v, u = np.mgrid[0:h, 0:w].astype(np.float64)
    g = np.exp(-((u - center[0]) ** 2 + (v - center[1]) ** 2) / (2 * sigma**2))
    return np.repeat((g * 255).round().astype(np.uint8)[..., None], 3, axis=2)


def _centroid(img):
    g = img[..., 0].astype(np.float64)
    g = np.where(g > 10, g, 0)
    v, u = np.mgrid[0 : g.shape[0], 0 : g.shape[1]]
    return np.array([(u * g).sum() / g.sum(), (v * g).sum() / g.sum()])


def test_target_size_is_patch_multiple():
    assert target_size(1.0, 518) == (518, 518)
    assert target_size(0.75, 518) == (392, 518)  # 388.5 -> nearest multiple of 14
    assert target_size(0.33, 518) == (168, 518)
    assert target_size(0.001, 518) == (14, 518)
    for a in np.linspace(0.2, 1.2, 23):
        h, w = target_size(float(a), 518)
        assert h % 14 == 0 and w == 518 and abs(h - 518 * a) <= 7 + 1e-9 or h == 14


def test_crop_box_aspect_inside_and_centred():
    # principal point off-centre, room to centre the window on it
    box = crop_box((480, 640), (300.0, 250.0), (168, 518), scale=0.8)
    assert box.left >= 0 and box.top >= 0 and box.left + box.width <= 640 and box.top + box.height <= 480
    assert abs(box.height / box.width - 168 / 518) < 2 / box.width
    assert abs(box.width - round(640 * 0.8)) <= 1
    assert abs(box.left + box.width / 2 - 0.5 - 300.0) <= 0.5
    assert abs(box.top + box.height / 2 - 0.5 - 250.0) <= 0.5
    # principal point near the border: the window is shifted to stay inside the image
    box = crop_box((480, 640), (40.0, 250.0), (518, 518), scale=1.0)
    assert (box.left, box.width, box.height) == (0, 480, 480)
    with pytest.raises(ValueError, match="crop scale"):
        crop_box((480, 640), (320.0, 240.0), (518, 518), scale=1.5)


@pytest.mark.parametrize(
    "image_hw,K,out_hw,scale",
    [
        ((240, 320), _K(250.0, 260.0, 170.3, 110.7), (98, 140), 0.85),  # shrinking (INTER_AREA)
        ((60, 80), _K(70.0, 72.0, 38.2, 31.9), (112, 154), 0.9),  # enlarging (INTER_CUBIC)
    ],
)
def test_intrinsics_follow_crop_and_resize(image_hw, K, out_hw, scale):
    rng = np.random.default_rng(0)
    box = crop_box(image_hw, (K[0, 2], K[1, 2]), out_hw, scale)
    H, W = image_hw
    depth = np.ones(image_hw, np.float32)
    # 1) reprojection of 3D points: old K, then the pixel map of crop+resize == new K
    pts = np.stack([rng.uniform(-0.3, 0.3, 20), rng.uniform(-0.3, 0.3, 20), rng.uniform(1, 3, 20)], -1)
    uv_old, _ = project_points(torch.from_numpy(pts), torch.from_numpy(K))
    _, _, _, K_new = crop_and_resize(np.zeros((H, W, 3), np.uint8), depth, depth > 0, K, box, out_hw)
    uv_new, _ = project_points(torch.from_numpy(pts), torch.from_numpy(K_new))
    mapped = np.stack([_map_pixel(p, box, out_hw) for p in uv_old.numpy()])
    np.testing.assert_allclose(uv_new.numpy(), mapped, atol=1e-9)
    # 2) image content: a blob at the projection of a point lands where the new K projects it
    point = torch.tensor([[0.05, -0.03, 2.0]], dtype=torch.float64)
    uv0 = project_points(point, torch.from_numpy(K))[0][0].numpy()
    img = _blob_image(H, W, uv0, sigma=2.5 if H > 100 else 1.5)
    out, _, _, K_new = crop_and_resize(img, depth, depth > 0, K, box, out_hw)
    assert out.shape == (*out_hw, 3) and out.dtype == np.uint8
    uv1 = project_points(point, torch.from_numpy(K_new))[0][0].numpy()
    np.testing.assert_allclose(_centroid(out), uv1, atol=0.1)


def test_nearest_depth_resize_keeps_only_original_values():
    rng = np.random.default_rng(1)
    H, W = 90, 120
    depth = rng.uniform(1, 10, (H, W)).astype(np.float32)
    depth[rng.random((H, W)) < 0.3] = 0  # invalid holes
    valid = depth > 0
    K = _K(100, 100, 61.0, 44.0)
    for out_hw in [(42, 70), (182, 238)]:  # down and up
        box = crop_box((H, W), (K[0, 2], K[1, 2]), out_hw, 0.9)
        _, d, v, _ = crop_and_resize(np.zeros((H, W, 3), np.uint8), depth, valid, K, box, out_hw)
        assert d.shape == out_hw and d.dtype == np.float32 and v.dtype == bool
        crop_vals = set(depth[box.top : box.top + box.height, box.left : box.left + box.width].ravel())
        assert set(d.ravel()) <= crop_vals
        np.testing.assert_array_equal(v, d > 0)  # masks resized with the same nearest mapping
        # the exact nearest pixel: output pixel centre maps to input index floor((x + 0.5) / s)
        sx, sy = out_hw[1] / box.width, out_hw[0] / box.height
        for y, x in [(0, 0), (out_hw[0] - 1, out_hw[1] - 1), (out_hw[0] // 2, out_hw[1] // 3)]:
            src = depth[box.top + int((y + 0.5) / sy), box.left + int((x + 0.5) / sx)]
            assert d[y, x] == src


def _views(s=4, h=20, w=24, seed=0):
    one = np.random.default_rng(seed).integers(0, 256, (1, h, w, 3), dtype=np.uint8)
    return np.repeat(one, s, axis=0)


def _differs(a, b):
    return np.abs(a.astype(int) - b.astype(int)).max() > 2


def test_shared_jitter_is_identical_across_views():
    cfg = ColorJitterConfig(shared_prob=1.0, apply_prob=1.0, grayscale_prob=0.0)
    views = _views()
    out, shared = jitter_views(views, np.random.default_rng(3), cfg)
    assert shared and out.dtype == np.uint8 and out.shape == views.shape
    assert _differs(out, views)  # something was applied
    for i in range(1, len(out)):
        np.testing.assert_array_equal(out[i], out[0])


def test_per_view_jitter_differs_across_views():
    cfg = ColorJitterConfig(shared_prob=0.0, apply_prob=1.0, grayscale_prob=0.0)
    views = _views()
    out, shared = jitter_views(views, np.random.default_rng(3), cfg)
    assert not shared
    assert all(_differs(out[i], out[0]) for i in range(1, len(out)))


def test_shared_branch_probability_and_determinism():
    cheap = ColorJitterConfig(apply_prob=0.0, grayscale_prob=0.0)  # default shared_prob 0.7
    views = _views(s=2, h=8, w=8)
    shared = [jitter_views(views, np.random.default_rng(i), cheap)[1] for i in range(400)]
    assert 0.62 < np.mean(shared) < 0.78
    cfg = ColorJitterConfig(apply_prob=1.0)
    a, _ = jitter_views(views, np.random.default_rng(9), cfg)
    b, _ = jitter_views(views, np.random.default_rng(9), cfg)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("op", ["brightness", "contrast", "saturation", "hue"])
def test_jitter_ops_match_torchvision(op):
    from torchvision.transforms.v2 import functional as TF

    img = _views(s=1, h=32, w=40, seed=4)[0]
    value = {"brightness": 1.3, "contrast": 0.6, "saturation": 1.4, "hue": 0.08}[op]
    order = {"brightness": 0, "contrast": 1, "saturation": 2, "hue": 3}[op]
    fields = dict(brightness=1.0, contrast=1.0, saturation=1.0, hue=0.0)
    fields[op] = value
    ours = apply_jitter(img, JitterParams(True, (order,), grayscale=False, **fields))
    t = torch.from_numpy(img).permute(2, 0, 1).float() / 255
    ref = getattr(TF, f"adjust_{op}")(t, value).clamp(0, 1).mul(255).permute(1, 2, 0).numpy()
    err = np.abs(ours.astype(np.float64) - ref)
    # hue goes through 8-bit HSV in OpenCV: a few levels off at most, otherwise rounding only
    assert err.mean() < (2.0 if op == "hue" else 0.6) and err.max() <= (12 if op == "hue" else 1.01)


def test_jitter_params_and_grayscale():
    cfg = ColorJitterConfig(apply_prob=0.0, grayscale_prob=1.0)
    p = sample_jitter(np.random.default_rng(0), cfg)
    assert not p.apply and p.grayscale and sorted(p.order) == [0, 1, 2, 3]
    out = apply_jitter(_views(s=1)[0], p)
    np.testing.assert_array_equal(out[..., 0], out[..., 1])
    np.testing.assert_array_equal(out[..., 1], out[..., 2])
    disabled = ColorJitterConfig(enabled=False)
    views = _views()
    out, shared = jitter_views(views, np.random.default_rng(0), disabled)
    assert out is views and shared is True  # nothing drawn: every view "shares" the no-op


@pytest.mark.parametrize("principal_point", [(300.2, 250.7), (299.8, 249.3), (321.6, 230.4)])
def test_crop_box_centre_is_the_principal_point_to_half_a_pixel(principal_point):
    # fractional points away from .5 ties: a window one pixel off puts its centre 0.5-1 px away
    box = crop_box((480, 640), principal_point, (168, 518), scale=0.8)
    centre = (box.left + box.width / 2 - 0.5, box.top + box.height / 2 - 0.5)  # OpenCV pixel centres
    assert abs(centre[0] - principal_point[0]) <= 0.5
    assert abs(centre[1] - principal_point[1]) <= 0.5


@pytest.mark.parametrize(
    "principal_point,edge",
    [((5.0, 240.0), "left"), ((630.0, 240.0), "right"), ((320.0, 4.0), "top"), ((320.0, 470.0), "bottom")],
)
def test_crop_box_is_shifted_to_touch_the_edge_it_would_cross(principal_point, edge):
    box = crop_box((480, 640), principal_point, (280, 518), scale=0.6)
    flush = {
        "left": box.left == 0,
        "right": box.left + box.width == 640,
        "top": box.top == 0,
        "bottom": box.top + box.height == 480,
    }
    assert flush[edge]
    assert box.left >= 0 and box.top >= 0 and box.left + box.width <= 640 and box.top + box.height <= 480


def test_crop_box_default_scale_is_the_largest_window_and_zero_is_refused():
    assert crop_box((480, 640), (320.0, 240.0), (518, 518)) == CropBox(80, 0, 480, 480)
    with pytest.raises(ValueError, match=r"crop scale must be in \(0, 1\], got 0"):
        crop_box((480, 640), (320.0, 240.0), (518, 518), scale=0.0)


@pytest.mark.parametrize("out_hw,flag", [((27, 36), cv2.INTER_AREA), ((120, 160), cv2.INTER_CUBIC)])
def test_images_shrink_with_area_averaging_and_grow_with_bicubic(out_hw, flag):
    # the documented choice; at these sizes area, bicubic and bilinear (OpenCV's default) all differ
    img = np.random.default_rng(5).integers(0, 256, (60, 80, 3), dtype=np.uint8)
    depth = np.ones((60, 80), np.float32)
    box = CropBox(0, 0, 80, 60)
    out, _, _, _ = crop_and_resize(img, depth, depth > 0, _K(50, 50, 39.5, 29.5), box, out_hw)
    np.testing.assert_array_equal(out, cv2.resize(img, out_hw[::-1], interpolation=flag))


def test_intrinsics_come_back_as_float64_from_float32_input():
    depth = np.ones((60, 80), np.float32)
    K32 = _K(50.3, 51.7, 40.1, 29.9).astype(np.float32)
    *_, K_new = crop_and_resize(np.zeros((60, 80, 3), np.uint8), depth, depth > 0, K32, CropBox(3, 2, 72, 54), (27, 36))
    assert K_new.dtype == np.float64
    np.testing.assert_allclose(K_new[0], [50.3 * 0.5, 0, (40.1 - 3 + 0.5) * 0.5 - 0.5], rtol=1e-6)


def test_jitter_factors_cover_their_documented_ranges():
    cfg = ColorJitterConfig(brightness=0.5, contrast=1.0, saturation=0.2, hue=0.1)
    draws = [sample_jitter(np.random.default_rng(i), cfg) for i in range(400)]
    ranges = {"brightness": (0.5, 1.5), "contrast": (0.0, 2.0), "saturation": (0.8, 1.2), "hue": (-0.1, 0.1)}
    for name, (lo, hi) in ranges.items():
        values = np.array([getattr(p, name) for p in draws])
        assert values.min() >= lo and values.max() <= hi, name
        # both ends are reached to within a tenth of the range (400 uniform draws)
        assert values.min() < lo + 0.1 * (hi - lo) and values.max() > hi - 0.1 * (hi - lo), name


def test_brightness_scales_towards_black_and_zero_hue_leaves_the_image_alone():
    img = np.full((4, 5, 3), 200, np.uint8)
    darker = JitterParams(True, (0,), brightness=0.2, contrast=1.0, saturation=1.0, hue=0.0, grayscale=False)
    assert (apply_jitter(img, darker) == 40).all()  # 0.2 * 200, no offset towards white
    # a zero hue shift must not go through 8-bit HSV (that round trip changes pixels by up to 7 levels)
    noisy = _views(s=1, h=20, w=24, seed=1)[0]
    identity = JitterParams(True, (3,), brightness=1.0, contrast=1.0, saturation=1.0, hue=0.0, grayscale=False)
    np.testing.assert_array_equal(apply_jitter(noisy, identity), noisy)
