import multiprocessing as mp
import re

import h5py
import numpy as np
import pytest

from depthpe.scenes.format.scene_file import (
    DEFAULT_DEPTH_COMPRESSION,
    SceneFileError,
    SceneReader,
    encode_image,
    read_index,
    write_index,
    write_scene,
)
from tests.helpers.scenes import plane_scene


def write(tmp_path, name="s0", **overrides):
    sc = plane_scene(3, 24, 32)
    kwargs = dict(
        images=sc["images"], depth=sc["depth"], K=sc["K"], w2c=sc["w2c"], dataset="toy",
        scene_id=name, split="train", metric=False, depth_units="scene", source="test",
    )
    kwargs.update(overrides)
    return sc, write_scene(tmp_path / f"{name}.h5", **kwargs)


def test_round_trip(tmp_path):
    valid = np.ones((3, 24, 32), bool)
    valid[1, :5] = False
    sc, entry = write(tmp_path, valid=valid, frame_names=["a", "b", "c"], image_format="png", depth_dtype="float32")
    assert entry == {"path": "s0.h5", "scene_id": "s0", "num_frames": 3, "height": 24, "width": 32,
                     "metric": False, "depth_units": "scene"}
    r = SceneReader(tmp_path / "s0.h5")
    assert (r.num_frames, r.height, r.width) == (3, 24, 32)
    assert r.attrs["format"] == "depthpe-scene" and r.attrs["version"] == 1 and r.attrs["metric"] is False
    fr = r.read_frame(1)
    np.testing.assert_array_equal(fr["image"], sc["images"][1])  # PNG is lossless
    np.testing.assert_array_equal(fr["depth"], sc["depth"][1])
    np.testing.assert_array_equal(fr["valid"], (sc["depth"][1] > 0) & valid[1])
    np.testing.assert_allclose(fr["K"], sc["K"][1])
    np.testing.assert_allclose(fr["w2c"], sc["w2c"][1], atol=0)
    assert fr["w2c"].dtype == np.float64 and fr["depth"].dtype == np.float32
    assert r.frame_names() == ["a", "b", "c"]
    K, w2c = r.read_cameras()
    assert K.shape == (3, 3, 3) and w2c.shape == (3, 3, 4)


def test_jpeg_and_float16_are_close(tmp_path):
    sc, _ = write(tmp_path, jpeg_quality=95)
    r = SceneReader(tmp_path / "s0.h5")
    fr = r.read_frame(0)
    assert np.abs(fr["image"].astype(int) - sc["images"][0]).mean() < 6
    d = sc["depth"][0]
    np.testing.assert_allclose(fr["depth"][d > 0], d[d > 0], rtol=1e-3)
    r.close()
    with h5py.File(tmp_path / "s0.h5", "r", locking=False) as f:
        assert f["depth"].dtype == np.float16 and f["depth"].chunks == (1, 24, 32)
        assert f["depth"].compression == "gzip"  # the default depth_compression="gzip"


def test_write_is_atomic_and_leaves_no_temp(tmp_path):
    write(tmp_path)
    with pytest.raises(ValueError, match="NaN"):
        sc = plane_scene(3, 24, 32)
        bad = sc["depth"].copy()
        bad[0, 0, 0] = np.nan
        write(tmp_path, name="s0", depth=bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s0.h5"]
    SceneReader(tmp_path / "s0.h5").read_frame(0)  # the earlier file is intact


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("K", np.zeros((2, 3, 3)), "K must be"),
        ("w2c", np.zeros((3, 3, 3)), "w2c must be"),
        ("depth", -np.ones((3, 24, 32), np.float32), "negative"),
        ("frame_names", ["a"], "1 frame names for 3 frames"),
        ("depth", np.ones((24, 32), np.float32), re.escape("depth must be (N, H, W), got shape (24, 32)")),
        ("depth", np.ones((0, 24, 32), np.float32), "a scene needs at least one frame"),
        ("images", np.zeros((2, 24, 32, 3), np.uint8), "2 images but 3 depth maps"),
        ("images", np.zeros((3, 24, 30, 3), np.uint8),
         re.escape("image 0 has shape (24, 30, 3); all frames must be RGB of the depth size (24, 32, 3)")),
        ("images", np.zeros((3, 24, 32, 3), np.float32), "images must be uint8 RGB"),
        ("K", np.full((3, 3, 3), np.nan), "K or w2c contain NaN or inf"),
        ("valid", np.ones((3, 24, 31), bool), re.escape("valid must be (N, H, W) = (3, 24, 32), got (3, 24, 31)")),
        ("depth_dtype", "float64", "depth_dtype must be 'float16' or 'float32', got 'float64'"),
        ("image_format", "webp", "image format must be 'jpeg' or 'png', got 'webp'"),
    ],
)
def test_write_rejects_bad_input(tmp_path, field, value, match):
    """Each bad argument is refused with what was wrong, and nothing is written."""
    with pytest.raises(ValueError, match=match):
        write(tmp_path, **{field: value})
    assert list(tmp_path.iterdir()) == []


def _edit(path, edit) -> None:
    """Apply ``edit(h5py.File)`` to a written scene file."""
    with h5py.File(path, "a") as f:
        edit(f)


@pytest.mark.parametrize("edit, message", [
    (lambda f: f.attrs.__setitem__("format", "other"), "format attribute is 'other', expected 'depthpe-scene'"),
    (lambda f: f.attrs.__setitem__("version", 99), "format version 99 is newer than this depthpe (1); upgrade depthpe"),
])
def test_a_file_of_another_format_or_a_newer_version_is_refused_by_name(tmp_path, edit, message):
    write(tmp_path)
    _edit(tmp_path / "s0.h5", edit)
    with pytest.raises(SceneFileError, match=re.escape(f"{tmp_path / 's0.h5'}: {message}")):
        SceneReader(tmp_path / "s0.h5").num_frames


def test_frames_out_of_range_and_a_depth_that_is_not_3d_are_named(tmp_path):
    write(tmp_path)
    reader = SceneReader(tmp_path / "s0.h5")
    assert np.array_equal(reader.read_image(-1), reader.read_image(2))  # Python's negative indices
    for i in (3, -4):
        with pytest.raises(IndexError, match=re.escape(f"s0.h5: frame {i} out of range for 3 frames")):
            reader.read_depth(i)
    reader.close()

    def flat_depth(f):
        del f["depth"]
        f["depth"] = np.ones((24, 32), np.float32)

    _edit(tmp_path / "s0.h5", flat_depth)
    with pytest.raises(SceneFileError, match=re.escape("depth has shape (24, 32), expected (N, H, W)")):
        SceneReader(tmp_path / "s0.h5").num_frames


def test_an_index_whose_scenes_are_not_a_list_is_malformed(tmp_path):
    (tmp_path / "index.json").write_text('{"scenes": {"a": 1}}')
    with pytest.raises(SceneFileError, match="malformed index .*'scenes' must be a list, got dict"):
        read_index(tmp_path)


def test_index_round_trip_and_errors(tmp_path):
    _, e0 = write(tmp_path, "b")
    _, e1 = write(tmp_path, "a")
    write_index(tmp_path, [e0, e1], dataset="toy", split="train")
    entries = read_index(tmp_path)
    assert [e["path"] for e in entries] == ["a.h5", "b.h5"]
    (tmp_path / "index.json").write_text("{not json")
    with pytest.raises(SceneFileError, match="malformed index"):
        read_index(tmp_path)
    with pytest.raises(SceneFileError, match="no scene index"):
        read_index(tmp_path / "nowhere")


def test_corrupt_files_give_named_errors(tmp_path):
    write(tmp_path)
    data = (tmp_path / "s0.h5").read_bytes()
    (tmp_path / "trunc.h5").write_bytes(data[: len(data) // 3])
    with pytest.raises(SceneFileError, match="trunc.h5"):
        SceneReader(tmp_path / "trunc.h5").read_frame(0)
    (tmp_path / "garbage.h5").write_bytes(b"x" * 1000)
    with pytest.raises(SceneFileError, match="garbage.h5: cannot open"):
        SceneReader(tmp_path / "garbage.h5").num_frames
    with pytest.raises(SceneFileError, match="missing.h5: file not found"):
        SceneReader(tmp_path / "missing.h5").num_frames
    with h5py.File(tmp_path / "schema.h5", "w") as f:
        f.attrs["format"] = "something-else"
    with pytest.raises(SceneFileError, match="missing attributes"):
        SceneReader(tmp_path / "schema.h5").num_frames
    with h5py.File(tmp_path / "s0.h5", "a") as f:
        del f["K"]
        f["K"] = np.zeros((2, 3, 3), np.float32)
    with pytest.raises(SceneFileError, match="K has shape"):
        SceneReader(tmp_path / "s0.h5").read_frame(0)


def test_reader_is_lazy_and_picklable(tmp_path):
    import pickle

    write(tmp_path)
    r = SceneReader(tmp_path / "s0.h5")
    assert r._file is None  # nothing opened at construction
    r.read_depth(0)
    assert r._file is not None
    r2 = pickle.loads(pickle.dumps(r))
    assert r2._file is None
    np.testing.assert_array_equal(r2.read_depth(2), r.read_depth(2))
    assert pickle.loads(pickle.dumps(SceneReader(tmp_path / "s0.h5", strict=True))).strict


def _read_in_child(reader, q):
    q.put(float(reader.read_depth(1).sum()))


def test_reader_reopens_in_child_process(tmp_path):
    write(tmp_path)
    r = SceneReader(tmp_path / "s0.h5")
    expected = float(r.read_depth(1).sum())
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_read_in_child, args=(r, q))
    p.start()
    p.join(20)
    assert q.get(timeout=5) == expected


@pytest.mark.parametrize("node", ["K", "w2c", "depth", "images"])
def test_a_scene_file_missing_a_required_dataset_is_refused_by_name(tmp_path, node):
    write(tmp_path)
    with h5py.File(tmp_path / "s0.h5", "a") as f:
        del f[node]
    with pytest.raises(SceneFileError, match=rf"missing datasets \['{node}'\]"):
        SceneReader(tmp_path / "s0.h5").read_frame(0)


_FILTERS = {"none": (None, False), "lzf": ("lzf", True), "gzip": ("gzip", True)}


@pytest.mark.parametrize("codec", ["none", "lzf", "gzip"])
def test_depth_and_valid_are_stored_with_the_chosen_codec_and_read_back_exactly(tmp_path, codec):
    valid = np.ones((3, 24, 32), bool)
    valid[2, 3:9] = False
    sc, _ = write(tmp_path, valid=valid, depth_compression=codec)
    with h5py.File(tmp_path / "s0.h5", "r", locking=False) as f:
        for node in ("depth", "valid"):
            assert (f[node].compression, f[node].shuffle) == _FILTERS[codec], node
            assert f[node].chunks == (1, 24, 32)
    with SceneReader(tmp_path / "s0.h5", strict=True) as r:
        for i in range(3):
            np.testing.assert_array_equal(r.read_depth(i), sc["depth"][i].astype(np.float16).astype(np.float32))
            np.testing.assert_array_equal(r.read_valid(i), valid[i])


def test_new_files_use_the_default_codec_and_bad_codecs_are_refused(tmp_path):
    assert DEFAULT_DEPTH_COMPRESSION == "gzip"
    write(tmp_path)
    with h5py.File(tmp_path / "s0.h5", "r", locking=False) as f:
        assert f["depth"].compression == "gzip" and f["depth"].shuffle
    with pytest.raises(ValueError, match="depth_compression must be one of"):
        write(tmp_path, name="s1", depth_compression="zstd")
    assert not (tmp_path / "s1.h5").exists()


def _write_old_gzip_layout(path, sc, valid, names):
    """A scene file laid out as write_scene wrote it before depth_compression existed (gzip level 4
    with shuffle for depth, gzip without shuffle for valid), written here with h5py alone."""
    with h5py.File(path, "w", libver="latest") as f:
        for key, value in dict(format="depthpe-scene", version=1, dataset="toy", scene_id="old", split="train",
                               metric=False, depth_units="scene", source="test").items():
            f.attrs[key] = value
        images = f.create_dataset("images", (len(sc["images"]),), dtype=h5py.vlen_dtype(np.uint8))
        for i, im in enumerate(sc["images"]):
            images[i] = encode_image(im)
        n, h, w = sc["depth"].shape
        f.create_dataset("depth", data=sc["depth"].astype(np.float16), chunks=(1, h, w), compression="gzip",
                         compression_opts=4, shuffle=True)
        f.create_dataset("K", data=sc["K"].astype(np.float32))
        f.create_dataset("w2c", data=sc["w2c"].astype(np.float64))
        f.create_dataset("valid", data=valid.astype(np.uint8), chunks=(1, h, w), compression="gzip",
                         compression_opts=4)
        f.create_dataset("frame_names", data=names, dtype=h5py.string_dtype())


@pytest.mark.parametrize("strict", [False, True])
def test_old_gzip_files_read_exactly_like_new_files(tmp_path, strict):
    sc = plane_scene(3, 24, 32)
    valid = np.ones((3, 24, 32), bool)
    valid[0, :4] = False
    _write_old_gzip_layout(tmp_path / "old.h5", sc, valid, ["a", "b", "c"])
    write(tmp_path, name="new", valid=valid, frame_names=["a", "b", "c"])
    with h5py.File(tmp_path / "old.h5", "r", locking=False) as f:
        assert f["depth"].compression == "gzip"  # the old layout, really
    with SceneReader(tmp_path / "old.h5", strict=strict) as old, SceneReader(tmp_path / "new.h5", strict=strict) as new:
        assert (old.num_frames, old.height, old.width) == (new.num_frames, new.height, new.width)
        assert old.frame_names() == new.frame_names()
        for a, b in zip(old.read_cameras(), new.read_cameras()):
            np.testing.assert_array_equal(a, b)
        for i in range(3):
            fo, fn = old.read_frame(i), new.read_frame(i)
            for key in ("image", "depth", "valid", "K", "w2c"):
                assert fo[key].dtype == fn[key].dtype
                np.testing.assert_array_equal(fo[key], fn[key], err_msg=key)


def test_cameras_kept_by_the_reader_are_handed_out_as_copies(tmp_path):
    sc, _ = write(tmp_path)
    with SceneReader(tmp_path / "s0.h5") as r:
        fr = r.read_frame(1)
        fr["K"][:] = 0
        K, w2c = r.read_cameras()
        w2c[:] = 0
        np.testing.assert_allclose(r.read_frame(1)["K"], sc["K"][1].astype(np.float32))
        np.testing.assert_array_equal(r.read_cameras()[1], sc["w2c"].astype(np.float64))


def test_float16_depth_converts_to_float32_exactly_like_numpy():
    from depthpe.scenes.format.scene_file import _as_float32

    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)  # every float16 value
    got, expected = _as_float32(every), every.astype(np.float32)
    assert got.dtype == np.float32 and got.shape == every.shape
    finite = ~np.isnan(expected)
    np.testing.assert_array_equal(got[finite].view(np.uint32), expected[finite].view(np.uint32))  # incl. -0, inf
    assert np.isnan(got[~finite]).all()
    np.testing.assert_array_equal(_as_float32(np.arange(6.0).reshape(2, 3)),
                                  np.arange(6.0, dtype=np.float32).reshape(2, 3))
