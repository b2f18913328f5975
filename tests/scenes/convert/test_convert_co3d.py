"""CO3Dv2 converter: float16 depth bits, scale_adjustment, depth masks, PyTorch3D cameras, NDC formats."""

from __future__ import annotations

import numpy as np
import pytest

from depthpe.scenes.format.check import check_root
from depthpe.scenes.convert import convert
from depthpe.scenes.convert.co3d import depth_from_png, ndc_to_pixel_intrinsics, pytorch3d_to_opencv_w2c
from depthpe.scenes.convert.common import ConvertOptions
from depthpe.scenes.format.scene_file import SceneReader, read_index
from depthpe.testing import fake_datasets as fake


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("co3d")
    scenes = fake.make_scenes(3, views=5, height=48, width=64, seed=10)
    truth = fake.write_fake_co3d(
        tmp / "raw", scenes,
        formats=("ndc_isotropic", "ndc_norm_image_bounds", "ndc_isotropic"),
        scale_adjustments=(1.0, 1.7, 0.6),
        blackout={0: [2]},
    )
    summary = convert("co3d", tmp / "raw", tmp / "out", ConvertOptions(val_scenes=1, progress=False))
    return tmp, truth, summary


def _scene_path(root, scene_id):
    for split in ("train", "val"):
        p = root / "co3d" / split / f"{scene_id}.h5"
        if p.exists():
            return p
    raise AssertionError(f"{scene_id} was not written")


def test_roundtrip_matches_ground_truth(converted):
    tmp, truth, summary = converted
    assert summary["scenes_written"] == 3 and summary["scenes_skipped"] == 0
    for scene_id, fs in truth.items():
        m = fake.compare_to_ground_truth(_scene_path(tmp / "out", scene_id), fs)
        assert m["frames"] == m["expected_frames"], scene_id
        # NDC -> pixels with the right format and the 0.5 px centre shift (ndc_isotropic vs
        # ndc_norm_image_bounds differ on these 48x64 images)
        assert m["K_err"] < 1e-3, (scene_id, fs.notes, m["K_err"])
        # PyTorch3D row-vector R, +X left / +Y up -> OpenCV w2c
        assert m["w2c_err"] < 1e-9, (scene_id, m["w2c_err"])
        # float16 bits times scale_adjustment (0.6, 1.0, 1.7 across scenes); float16 precision
        assert m["depth_rel_err"] < 2e-3, (scene_id, fs.notes, m["depth_rel_err"])
        # depth_masks remove columns (false_valid counts them); 98th-percentile cut keeps >= 90%
        assert m["false_valid"] == 0
        assert m["valid_recall"] > 0.9
        assert m["image_mae"] < 6, "colours must stay registered to depth (RGB, not BGR)"
        assert m["surface_rel"] < 1e-3, "unprojected depth must land on the true surfaces"


def test_blacked_out_frame_dropped_and_reported(converted):
    tmp, truth, summary = converted
    assert summary["frames_dropped"] == {"blank image": 1}
    assert summary["frames_written"] == 14
    names = SceneReader(_scene_path(tmp / "out", "apple__100_1000_2000")).frame_names()
    # frame_number 2 is the file frame000003.jpg: annotations order by frame_number, not file name
    assert "frame000003.jpg" not in names and len(names) == 4


def test_attrs_split_and_check(converted):
    tmp, truth, summary = converted
    assert summary["splits"]["val"]["scenes"] == 1 and summary["splits"]["train"]["scenes"] == 2
    entries = read_index(tmp / "out" / "co3d" / "train")
    assert all(e["metric"] is False and e["depth_units"] == "colmap" for e in entries)
    reports, problems = check_root(tmp / "out", progress=False, max_pairs=6)
    assert not problems and len(reports) == 3
    assert all(r.ok for r in reports), [r.problems for r in reports]


def test_depth_png_is_float16_bits_times_scale_adjustment():
    depth = np.array([[0.5, 1.25], [3.0, 0.0]], np.float32)
    png = depth.astype(np.float16).view(np.uint16)
    out = depth_from_png(png, 2.0)
    np.testing.assert_allclose(out, 2 * depth)
    assert not np.allclose(png.astype(np.float32), depth)  # the raw uint16 values are not depth
    bad = np.array([[np.inf, np.nan]], np.float16).view(np.uint16)
    assert (depth_from_png(bad, 1.0) == 0).all()


def test_pytorch3d_camera_convention():
    """X_cam = X_world @ R + T with +X left, +Y up must equal OpenCV (-x, -y, z)."""
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    R = q * np.sign(np.linalg.det(q))
    T = rng.normal(size=3)
    X = rng.normal(size=(10, 3))
    cam_p3d = X @ R + T
    w2c = pytorch3d_to_opencv_w2c(R, T)
    cam_cv = X @ w2c[:, :3].T + w2c[:, 3]
    np.testing.assert_allclose(cam_cv, cam_p3d * [-1, -1, 1], atol=1e-12)


def test_ndc_formats_differ_on_non_square_images():
    iso = ndc_to_pixel_intrinsics([2.0, 2.0], [0.1, -0.2], 48, 64, "ndc_isotropic")
    norm = ndc_to_pixel_intrinsics([2.0, 2.0], [0.1, -0.2], 48, 64, "ndc_norm_image_bounds")
    assert iso[0, 0] == pytest.approx(48.0) and iso[1, 1] == pytest.approx(48.0)
    assert norm[0, 0] == pytest.approx(64.0) and norm[1, 1] == pytest.approx(48.0)
    assert iso[0, 2] == pytest.approx(32 - 0.1 * 24 - 0.5) and norm[0, 2] == pytest.approx(32 - 0.1 * 32 - 0.5)
    with pytest.raises(ValueError, match="intrinsics_format"):
        ndc_to_pixel_intrinsics([2.0, 2.0], [0, 0], 48, 64, "screen")
