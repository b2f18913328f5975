import multiprocessing as mp

import h5py
import numpy as np
import pytest

from depthpe.data.scene_file import SceneFileError, SceneReader, read_index, write_index, write_scene
from tests.scenes import plane_scene


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
        assert f["depth"].dtype == np.float16 and f["depth"].compression == "gzip"
        assert f["depth"].chunks == (1, 24, 32)


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
        ("frame_names", ["a"], "frame names"),
    ],
)
def test_write_rejects_bad_input(tmp_path, field, value, match):
    with pytest.raises(ValueError, match=match):
        write(tmp_path, **{field: value})


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
