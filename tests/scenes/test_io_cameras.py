"""Camera readers/writers of depthpe.scenes.cameras: COLMAP (pycolmap and the built-in text parser),
the cameras JSON, scene files (depthpe.scenes.cameras); half-pixel shift; distortion warning;
one-line errors."""

import json

import numpy as np
import pytest

from depthpe.config import ConfigError
from depthpe.scenes.format.scene_file import write_scene
from depthpe.scenes.synth import generate_scene
from depthpe.scenes.cameras import (
    FrameCamera,
    find_camera,
    quaternion_to_rotation,
    read_cameras,
    read_colmap,
    rotation_to_quaternion,
    write_colmap_text,
    write_json_cameras,
)
from tests.helpers.optional import import_pycolmap

H, W = 24, 32


@pytest.fixture(scope="module")
def scene():
    return generate_scene(3, views=4, height=H, width=W)


@pytest.fixture(scope="module")
def cams(scene):
    return {f"v{i}.png": FrameCamera(f"v{i}.png", scene["K"][i], scene["w2c"][i], W, H) for i in range(4)}


def assert_same(got, want):
    assert list(got) == list(want)
    for name, cam in want.items():
        np.testing.assert_allclose(got[name].K, cam.K, rtol=0, atol=1e-12)
        np.testing.assert_allclose(got[name].w2c, cam.w2c, rtol=0, atol=1e-12)
        assert (got[name].width, got[name].height) == (cam.width, cam.height)


def test_quaternion_round_trip():
    rng = np.random.default_rng(0)
    for _ in range(50):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        q = -q if q[0] < 0 else q
        R = quaternion_to_rotation(q)
        np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
        np.testing.assert_allclose(rotation_to_quaternion(R), q, atol=1e-12)
    for R in (np.diag([1.0, -1, -1]), np.diag([-1.0, 1, -1]), np.diag([-1.0, -1, 1])):
        np.testing.assert_allclose(quaternion_to_rotation(rotation_to_quaternion(R)), R, atol=1e-12)


@pytest.mark.parametrize("use_pycolmap", [False, True])
@pytest.mark.parametrize("layout", ["", "sparse/0"])
def test_colmap_text_round_trip(tmp_path, cams, use_pycolmap, layout):
    write_colmap_text(tmp_path / layout if layout else tmp_path, cams)
    text = (tmp_path / layout / "cameras.txt").read_text()
    assert f"{float(cams['v0.png'].K[0, 2]) + 0.5!r}" in text  # COLMAP's pixel centres are at +0.5
    assert_same(read_colmap(tmp_path, use_pycolmap=use_pycolmap), cams)
    if use_pycolmap:
        assert_same(read_cameras(tmp_path), cams)


def test_colmap_binary_via_pycolmap(tmp_path, cams):
    import pycolmap  # in the dev extra: a missing install must fail here, not skip
    write_colmap_text(tmp_path / "txt", cams)
    rec = pycolmap.Reconstruction(str(tmp_path / "txt"))
    (tmp_path / "sparse" / "0").mkdir(parents=True)
    rec.write_binary(str(tmp_path / "sparse" / "0"))
    assert_same(read_cameras(tmp_path), cams)
    with pytest.raises(ConfigError, match="needs pycolmap"):
        read_colmap(tmp_path, use_pycolmap=False)


def test_colmap_models_and_distortion(tmp_path):
    (tmp_path / "cameras.txt").write_text(
        "1 SIMPLE_RADIAL 32 24 30 16 12 0\n2 OPENCV 32 24 30 31 16 12 0 0 0 0\n"
        "3 OPENCV_FISHEYE 32 24 1 1 1 1 0 0 0 0\n4 OPENCV 32 24 30 31 16 12 0.1 0 0 0\n"
        "5 SIMPLE_RADIAL 32 24 30 16 12 -0.2\n")
    images = "1 1 0 0 0 0 0 0 1 a.png\n\n2 1 0 0 0 0 0 1 2 b.png\n\n"
    (tmp_path / "images.txt").write_text(images)
    cams = read_colmap(tmp_path, use_pycolmap=False)  # distortion models with zero coefficients are pinholes
    np.testing.assert_allclose(cams["a.png"].K, [[30, 0, 15.5], [0, 30, 11.5], [0, 0, 1]])
    np.testing.assert_allclose(cams["b.png"].K, [[30, 0, 15.5], [0, 31, 11.5], [0, 0, 1]])
    np.testing.assert_allclose(cams["b.png"].w2c, np.c_[np.eye(3), [0, 0, 1]])
    (tmp_path / "images.txt").write_text(images + "3 1 0 0 0 0 0 0 3 c.png\n\n")
    with pytest.raises(ConfigError, match="OPENCV_FISHEYE is not supported"):
        read_colmap(tmp_path, use_pycolmap=False)
    (tmp_path / "images.txt").write_text(images + "4 1 0 0 0 0 0 0 4 d.png\n\n")
    with pytest.raises(ConfigError, match=r"COLMAP OPENCV camera: the camera has lens distortion \(k1=0.1\); "
                                          r"depthpe reads undistorted pinhole images only"):
        read_colmap(tmp_path, use_pycolmap=False)
    (tmp_path / "images.txt").write_text(images + "5 1 0 0 0 0 0 0 5 e.png\n\n")  # f, cx, cy, then k1
    with pytest.raises(ConfigError, match=r"cameras.txt line 5: COLMAP SIMPLE_RADIAL camera: the camera has lens "
                                          r"distortion \(k1=-0.2\)"):
        read_colmap(tmp_path, use_pycolmap=False)


def test_json_round_trip_and_4x4(tmp_path, cams):
    assert_same(read_cameras(write_json_cameras(tmp_path / "c.json", cams)), cams)
    w2c4 = np.r_[cams["v1.png"].w2c, [[0, 0, 0, 1]]]
    frames = [{"file": "x.jpg", "K": cams["v1.png"].K.tolist(), "w2c": w2c4.tolist()}]
    (tmp_path / "d.json").write_text(json.dumps({"frames": frames}))
    got = read_cameras(tmp_path / "d.json")["x.jpg"]
    assert (got.width, got.height) == (0, 0)
    np.testing.assert_array_equal(got.w2c, cams["v1.png"].w2c)


def test_scene_file_cameras(tmp_path, scene):
    kw = dict(images=scene["images"], depth=scene["depth"], K=scene["K"], w2c=scene["w2c"], dataset="t",
              split="val", metric=False, depth_units="scene", source="test")
    write_scene(tmp_path / "a.h5", scene_id="a", frame_names=["f0", "f1", "f2", "f3"], **kw)
    write_scene(tmp_path / "b.h5", scene_id="b", **kw)
    a, b = read_cameras(tmp_path / "a.h5"), read_cameras(tmp_path / "b.h5")
    assert list(a) == ["f0", "f1", "f2", "f3"] and list(b)[0] == "frame_00000"
    np.testing.assert_allclose(a["f2"].K, scene["K"][2], rtol=1e-6)
    np.testing.assert_array_equal(a["f2"].w2c, scene["w2c"][2])
    assert (a["f2"].width, a["f2"].height) == (W, H)


@pytest.mark.parametrize("content, match", [
    ("not json", "cannot read the cameras JSON"),
    ('{"frames": []}', "at least one frame"),
    ('{"frames": [{"file": "a"}]}', 'needs "file", "K" and "w2c"'),
    ('{"frames": [{"file": "a", "K": [1, 2], "w2c": [[1,0,0,0],[0,1,0,0],[0,0,1,0]]}]}', "K must be 3x3"),
    ('{"frames": [{"file": "a", "K": [[1,0,0],[0,1,0],[0,0,1]], "w2c": [[2,0,0,0],[0,1,0,0],[0,0,1,0]]}]}',
     "not orthonormal"),
    ('{"frames": [{"file": "a", "K": [[-1,0,0],[0,1,0],[0,0,1]], "w2c": [[1,0,0,0],[0,1,0,0],[0,0,1,0]]}]}',
     "non-positive focal"),
    ('{"frames": [{"file": "a", "K": [[0,0,0],[0,1,0],[0,0,1]], "w2c": [[1,0,0,0],[0,1,0,0],[0,0,1,0]]}]}',
     r"non-positive focal length \(fx=0, fy=1\)"),
    ('{"frames": [{"file": "a", "K": [[1,0,0],[0,0,0],[0,0,1]], "w2c": [[1,0,0,0],[0,1,0,0],[0,0,1,0]]}]}',
     r"non-positive focal length \(fx=1, fy=0\)"),
    ('{"frames": [{"file": "a", "K": [[1,0,0],[0,1,0],[0,0,2]], "w2c": [[1,0,0,0],[0,1,0,0],[0,0,1,0]]}]}',
     r"camera 'a': K's last row is \[0.0, 0.0, 2.0\], expected \[0, 0, 1\]"),
    ('{"frames": [{"file": "a", "K": [[NaN,0,0],[0,1,0],[0,0,1]], "w2c": [[1,0,0,0],[0,1,0,0],[0,0,1,0]]}]}',
     "camera 'a' has NaN or inf values"),
    ('{"frames": [{"file": "a", "K": [[1,0,0],[0,1,0],[0,0,1]], "w2c": [[1,0,0,Infinity],[0,1,0,0],[0,0,1,0]]}]}',
     "camera 'a' has NaN or inf values"),
])
def test_malformed_json(tmp_path, content, match):
    (tmp_path / "c.json").write_text(content)
    with pytest.raises(ConfigError, match=match) as err:
        read_cameras(tmp_path / "c.json")
    assert "\n" not in str(err.value) and "c.json" in str(err.value)


def test_malformed_sources(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        read_cameras(tmp_path / "nope")
    with pytest.raises(ConfigError, match="not a COLMAP reconstruction"):
        read_cameras(tmp_path)
    (tmp_path / "c.txt").write_text("x")
    with pytest.raises(ConfigError, match="unknown kind '.txt'"):
        read_cameras(tmp_path / "c.txt")
    (tmp_path / "cams").write_text("x")
    with pytest.raises(ConfigError, match=r"unknown kind '\(no suffix\)' \(expected a COLMAP folder"):
        read_cameras(tmp_path / "cams")
    (tmp_path / "cameras.txt").write_text("1 PINHOLE 32 24 30\n")
    (tmp_path / "images.txt").write_text("1 1 0 0 0 0 0 0 1 a.png\n\n")
    with pytest.raises(ConfigError, match="expected 4"):
        read_colmap(tmp_path, use_pycolmap=False)
    (tmp_path / "cameras.txt").write_text("1 PINHOLE 32 24 30 30 16 12\n")
    (tmp_path / "images.txt").write_text("1 1 0 0 0 0 0 0 7 a.png\n\n")
    with pytest.raises(ConfigError, match="camera 7"):
        read_colmap(tmp_path, use_pycolmap=False)
    (tmp_path / "images.txt").write_text("1 x 0 0 0 0 0 0 1 a.png\n\n")
    with pytest.raises(ConfigError, match="malformed image line"):
        read_colmap(tmp_path, use_pycolmap=False)
    for qvec in ("0 0 0 0", "inf 0 0 0", "nan 1 0 0"):
        (tmp_path / "images.txt").write_text(f"1 1 0 0 0 0 0 0 1 z.png\n\n2 {qvec} 0 0 0 1 a.png\n\n")
        with pytest.raises(ConfigError, match=r"images.txt image line 2: image 'a.png' has an invalid quaternion"):
            read_colmap(tmp_path, use_pycolmap=False)
    (tmp_path / "images.txt").write_text("")
    with pytest.raises(ConfigError, match="no registered images"):
        read_colmap(tmp_path, use_pycolmap=False)
    h5 = tmp_path / "bad.h5"
    h5.write_bytes(b"garbage")
    with pytest.raises(ConfigError, match="bad.h5"):
        read_cameras(h5)


def test_find_camera(cams):
    named = {"sub/a.jpg": cams["v0.png"], "b.jpg": cams["v1.png"], "x/c.jpg": cams["v2.png"], "y/c.jpg": cams["v3.png"]}
    assert find_camera(named, "sub/a.jpg") is cams["v0.png"]
    assert find_camera(named, "a.jpg") is cams["v0.png"]
    assert find_camera(named, "other/b.jpg") is cams["v1.png"]
    assert find_camera(named, "c.jpg") is None and find_camera(named, "d.jpg") is None


def test_colmap_text_reader_skips_points_lines_and_trailing_blank_lines_and_numbers_lines(tmp_path):
    """images.txt: two lines per image, the second (its 2D points) may hold points or be empty, and
    the file may end in blank lines; an error names the 1-based data line of cameras.txt."""
    (tmp_path / "cameras.txt").write_text("# comment\n1 PINHOLE 32 24 30 30 16 12\n")
    (tmp_path / "images.txt").write_text("# comment\n1 1 0 0 0 0 0 0 1 a.png\n3.5 4.5 -1 7.5 2.5 -1\n"
                                         "2 1 0 0 0 1 0 0 1 b.png\n\n\n\n")
    cams = read_colmap(tmp_path, use_pycolmap=False)
    assert sorted(cams) == ["a.png", "b.png"]
    np.testing.assert_allclose(cams["b.png"].w2c[:, 3], [1, 0, 0])
    (tmp_path / "images.txt").write_text("1 1 0 0 0 0 0 0 1 a.png")  # no points line, no newline
    assert list(read_colmap(tmp_path, use_pycolmap=False)) == ["a.png"]
    # a quaternion that is not unit length is normalized: (2, 0, 0, 2) is 90 degrees about z
    (tmp_path / "images.txt").write_text("1 2 0 0 2 0 0 0 1 a.png\n\n")
    np.testing.assert_allclose(read_colmap(tmp_path, use_pycolmap=False)["a.png"].w2c[:, :3],
                               [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-12)
    (tmp_path / "cameras.txt").write_text("1 PINHOLE 32 24 30 30 16 12\n2 PINHOLE 32\n")
    with pytest.raises(ConfigError, match=r"cameras.txt line 2: malformed camera"):
        read_colmap(tmp_path, use_pycolmap=False)


def test_colmap_folder_needs_both_files_of_one_format_and_names_may_hold_spaces(tmp_path, cams):
    """A folder with a stray cameras.bin (no images.bin) is read from its text model; sparse/0 is
    found below the folder; an image name with spaces (COLMAP allows them) is kept whole."""
    model = tmp_path / "sparse" / "0"
    spaced = {"my image.png": FrameCamera("my image.png", cams["v0.png"].K, cams["v0.png"].w2c, W, H)}
    write_colmap_text(model, spaced)
    (model / "cameras.bin").write_bytes(b"stray")
    got = read_colmap(tmp_path, use_pycolmap=False)
    assert_same(got, spaced)
    (model / "images.txt").unlink()
    with pytest.raises(ConfigError, match="not a COLMAP reconstruction"):
        read_colmap(tmp_path, use_pycolmap=False)


def test_a_corrupt_binary_model_is_one_line_naming_pycolmap(tmp_path):
    import_pycolmap()
    (tmp_path / "cameras.bin").write_bytes(b"\x05garbage")
    (tmp_path / "images.bin").write_bytes(b"\x07garbage")
    with pytest.raises(ConfigError) as err:
        read_colmap(tmp_path, use_pycolmap=True)
    line = str(err.value)
    assert line.startswith(f"{tmp_path}: pycolmap cannot read the COLMAP model (") and "\n" not in line
