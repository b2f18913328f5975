"""Multi-view dataset: normalized outputs, geometry consistency, redraws, skipped files, workers."""

import os
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import depthpe.loader.scenes as scenes_mod
from depthpe.loader.batching import collate, collate_eval
from depthpe.loader.config import DataConfig, SourceConfig
from depthpe.loader.datasets import MultiViewDataset, NoUsableSampleError, SceneEvalDataset, SceneSkippedWarning
from depthpe.loader.loaders import build_train_loader
from depthpe.loader.sampling import SampleKey, batch_shape
from depthpe.scenes.format.scene_file import write_index, write_scene
from depthpe.geometry import camera_centers, unproject_depth
from tests.helpers.scenes import look_at_w2c

H, W = 48, 64
K0 = np.array([[50.0, 0, 33.0], [0, 50.0, 22.5], [0, 0, 1]])


def _look_at(center, target=(0.0, 0.0, 0.0)):
    """OpenCV w2c (3, 4) of a camera at ``center`` looking at ``target`` with world +z up."""
    return look_at_w2c(np.asarray(center, float), np.asarray(target, float))


def _plane_depth(K, w2c):
    """z-depth of the ground plane z = 0 seen by camera (K, w2c); 0 where the ray misses it."""
    v, u = np.mgrid[0:H, 0:W].astype(float)
    rays_cam = np.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], np.ones_like(u)], -1)
    R, t = w2c[:, :3], w2c[:, 3]
    c = -R.T @ t
    d_world = rays_cam @ R  # R^T applied to each ray
    tz = -c[2] / d_world[..., 2]
    return np.where(tz > 0, tz, 0).astype(np.float32)


def _cameras(n, degenerate=False, radius=3.0):
    if degenerate:  # pure rotation: every camera at the same centre
        return [_look_at((radius, 0, 2), (0, np.sin(a), 0)) for a in np.linspace(-0.3, 0.3, n)]
    return [_look_at((radius * np.cos(a), radius * np.sin(a), 2.0)) for a in np.linspace(0, 2 * np.pi, n, False)]


def _write(split_dir, scene_id, n=6, degenerate=False, seed=0, dataset="toy", valid_rows=H):
    rng = np.random.default_rng(seed)
    w2c = np.stack(_cameras(n, degenerate))
    K = np.repeat(K0[None], n, 0)
    depth = np.stack([_plane_depth(K0, w) for w in w2c])
    depth[:, valid_rows:] = 0  # rows below valid_rows have no depth
    images = rng.integers(0, 256, (n, H, W, 3), dtype=np.uint8)
    return write_scene(
        Path(split_dir) / f"{scene_id}.h5", images=images, depth=depth, K=K, w2c=w2c, dataset=dataset,
        scene_id=scene_id, split="train", metric=True, depth_units="m",
    )


def _make_source(root, name, scenes, split="train"):
    """scenes: list of (scene_id, kwargs) -> writes files + index; returns the split dir."""
    split_dir = Path(root) / name / split
    entries = [_write(split_dir, sid, seed=i, dataset=name, **kw) for i, (sid, kw) in enumerate(scenes)]
    write_index(split_dir, entries, dataset=name, split=split)
    return split_dir


def _cfg(root, names=("toy",), **kw):
    kw.setdefault("views", (2, 4))
    kw.setdefault("image_width", 56)
    kw.setdefault("max_images_per_batch", 8)
    return DataConfig(sources=[SourceConfig(name=n, root=str(root)) for n in names], **kw)


def _scene_index(ds, scene_id, source=0):
    return [e.scene_id for e in ds.entries[source]].index(scene_id)


@pytest.fixture
def toy_root(tmp_path):
    _make_source(tmp_path, "toy", [("s0", {}), ("s1", {"n": 8})])
    return tmp_path


def test_sample_is_normalized_and_geometrically_consistent(toy_root):
    cfg = _cfg(toy_root)
    ds = MultiViewDataset(cfg)
    assert ds.scene_counts == [2]
    sample = ds[SampleKey(0, 1, 4, 42, 56, 123)]
    S = 4
    assert sample["images"].shape == (S, 3, 42, 56) and sample["images"].dtype == torch.float32
    assert 0 <= sample["images"].min() and sample["images"].max() <= 1
    assert sample["depth"].shape == (S, 42, 56) and sample["depth"].dtype == torch.float32
    assert sample["valid"].dtype == torch.bool and sample["K"].shape == (S, 3, 3)
    assert sample["w2c"].shape == (S, 4, 4) and sample["w2c"].dtype == torch.float32
    assert (sample["depth"][~sample["valid"]] == 0).all() and (sample["depth"][sample["valid"]] > 0).all()
    assert sample["dataset"] == "toy" and sample["scene"] == "s1" and sample["redraws"] == 0
    assert sample["skipped_files"] == 0 and len(set(sample["frames"].tolist())) == S
    w2c = sample["w2c"].double()
    torch.testing.assert_close(w2c[0], torch.eye(4, dtype=torch.float64), atol=1e-6, rtol=0)
    c = camera_centers(w2c)
    assert abs((c[1:] - c[0]).norm(dim=-1).mean().item() - 1.0) < 1e-5
    # the normalized depth, K and w2c, mapped back with scale, put every valid pixel on the plane z=0
    frames = sample["frames"].tolist()
    w2c_orig = torch.from_numpy(np.stack(_cameras(8))[frames])
    ref = torch.cat([w2c_orig[0], torch.tensor([[0, 0, 0, 1.0]], dtype=torch.float64)])
    for i in range(S):
        pts_n = unproject_depth(sample["depth"][i].double(), sample["K"][i].double(), w2c[i])
        pts_cam0 = pts_n[sample["valid"][i]] * sample["scale"]  # reference-camera frame, metres
        world = (pts_cam0 - ref[:3, 3]) @ ref[:3, :3]  # R0^T (x - t0)
        assert world.shape[0] > 100
        assert world[:, 2].abs().max() < 0.02 * world[:, :2].norm(dim=-1).max()


def test_same_key_same_sample_and_eval_mode_has_no_jitter(toy_root):
    ds = MultiViewDataset(_cfg(toy_root))
    key = SampleKey(0, 0, 3, 28, 56, 7)
    a, b = ds[key], ds[key]
    for k in ("images", "depth", "K", "w2c", "frames"):
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)
    plain = MultiViewDataset(_cfg(toy_root), train=False)[key]
    again = MultiViewDataset(_cfg(toy_root, color_jitter={"apply_prob": 0, "grayscale_prob": 0},
                                  crop_scale=(1.0, 1.0)))[key]
    torch.testing.assert_close(plain["images"], again["images"], rtol=0, atol=0)


def test_a_pure_rotation_scene_is_skipped_and_counted_like_an_unusable_file(tmp_path):
    """All camera centres of the scene coincide: no draw of it can ever be scaled, so the file is
    unusable (warned once, counted in skipped_files / bad_files) instead of being redrawn forever."""
    _make_source(tmp_path, "toy", [("bad", {"degenerate": True}), ("good", {})])
    ds = MultiViewDataset(_cfg(tmp_path))
    with pytest.warns(SceneSkippedWarning, match="all 6 camera centres coincide \\(pure rotation\\)"):
        first = ds[SampleKey(0, _scene_index(ds, "bad"), 3, 42, 56, 0)]
    for seed in range(5):
        with warnings.catch_warnings(record=True) as again:
            warnings.simplefilter("always")
            sample = ds[SampleKey(0, _scene_index(ds, "bad"), 3, 42, 56, seed)]
        assert not [w for w in again if w.category is SceneSkippedWarning]  # warned once per file and process
        assert sample["scene"] == "good" and sample["skipped_files"] >= 1 and sample["redraws"] == 0
        assert [p for p, _ in sample["bad_files"]] == [str(tmp_path / "toy" / "train" / "bad.h5")] * len(sample["bad_files"])
        c = camera_centers(sample["w2c"].double())
        assert abs((c[1:] - c[0]).norm(dim=-1).mean().item() - 1) < 1e-5
    assert "pure rotation" in first["bad_files"][0][1]
    only_bad = tmp_path / "only"
    _make_source(only_bad, "toy", [("bad", {"degenerate": True})])
    with pytest.raises(RuntimeError, match="no usable sample"), warnings.catch_warnings():
        warnings.simplefilter("ignore", SceneSkippedWarning)
        MultiViewDataset(_cfg(only_bad, max_attempts=3))[SampleKey(0, 0, 3, 42, 56, 0)]


def test_too_little_valid_depth_is_redrawn(tmp_path):
    _make_source(tmp_path, "toy", [("sparse", {"valid_rows": 1}), ("good", {})])
    ds = MultiViewDataset(_cfg(tmp_path, min_valid_fraction=0.05))
    sample = ds[SampleKey(0, _scene_index(ds, "sparse"), 3, 42, 56, 0)]
    assert sample["scene"] == "good" and sample["redraws"] >= 1
    assert sample["valid"].float().mean() >= 0.05
    _make_source(tmp_path / "only", "toy", [("sparse", {"valid_rows": 1})])
    only_sparse = MultiViewDataset(_cfg(tmp_path / "only", max_attempts=4))
    with pytest.raises(RuntimeError, match="valid depth fraction"):
        only_sparse[SampleKey(0, 0, 3, 42, 56, 0)]


def test_corrupt_scene_files_are_skipped_with_warning(tmp_path):
    split_dir = _make_source(tmp_path, "toy", [("good", {}), ("trunc", {})])
    (split_dir / "garbage.h5").write_bytes(os.urandom(2000))
    data = (split_dir / "trunc.h5").read_bytes()
    (split_dir / "trunc.h5").write_bytes(data[: len(data) // 2])
    entries = [
        {"path": p, "scene_id": p[:-3], "num_frames": 6, "height": H, "width": W, "metric": True,
         "depth_units": "m"} for p in ("garbage.h5", "good.h5", "trunc.h5")
    ]
    write_index(split_dir, entries, dataset="toy", split="train")
    for scene, name in ((0, "garbage.h5"), (2, "trunc.h5")):
        ds = MultiViewDataset(_cfg(tmp_path))  # fresh: each file is warned about once per process
        with pytest.warns(SceneSkippedWarning) as record:
            sample = ds[SampleKey(0, scene, 3, 42, 56, 1)]
        assert any(name in str(w.message) for w in record)
        assert sample["scene"] == "good" and sample["skipped_files"] >= 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SceneSkippedWarning)
        batch = collate([ds[SampleKey(0, s, 3, 42, 56, 5)] for s in (0, 1, 2)])
    assert batch["skipped_files"] >= 2 and batch["scene"] == ["good"] * 3


def test_nonfinite_depth_or_cameras_make_a_file_unusable(tmp_path):
    """NaN/inf depth (in a frame read) or cameras (any frame) in a file: SceneReader(strict=True) refuses the
    file where SceneReader would repair it silently; the sample is drawn elsewhere and counted."""
    from depthpe.scenes.format.scene_file import SceneFileError, SceneReader

    split_dir = _make_source(tmp_path, "toy", [("good", {}), ("nan_depth", {}), ("inf_cam", {})])
    with h5py.File(split_dir / "nan_depth.h5", "r+") as f:
        f["depth"][:, 10, 10] = np.nan
    with h5py.File(split_dir / "inf_cam.h5", "r+") as f:
        f["w2c"][4, 0, 3] = np.inf
    assert np.isfinite(SceneReader(split_dir / "nan_depth.h5").read_depth(0)).all()  # the lenient reader
    with pytest.raises(SceneFileError, match="NaN/inf depth value.* in frame 0"):
        SceneReader(split_dir / "nan_depth.h5", strict=True).read_frame(0)
    with pytest.raises(SceneFileError, match="non-finite camera values .* first frame 4"):
        SceneReader(split_dir / "inf_cam.h5", strict=True).read_frame(0)  # frame 0 is fine, the file is not
    for name in ("nan_depth", "inf_cam"):
        ds = MultiViewDataset(_cfg(tmp_path))  # fresh: each file is warned about once per process
        with pytest.warns(SceneSkippedWarning) as record:
            sample = ds[SampleKey(0, _scene_index(ds, name), 3, 42, 56, 2)]
        assert any(f"{name}.h5" in str(w.message) for w in record)
        assert sample["scene"] == "good" and sample["skipped_files"] >= 1
        assert all(torch.isfinite(sample[k]).all() for k in ("depth", "K", "w2c"))
        paths = {p for p, _ in sample["bad_files"]}
        assert str(split_dir / f"{name}.h5") in paths and len(sample["bad_files"]) == sample["skipped_files"]
    # a file once found bad is skipped without reading it again, with the same reason
    again = ds[SampleKey(0, _scene_index(ds, "inf_cam"), 3, 42, 56, 2)]
    assert again["bad_files"][0][1].endswith("(`depthpe check` lists such files)")
    ev = SceneEvalDataset([SourceConfig(name="toy", root=str(tmp_path))], views=3, image_width=56)
    with pytest.warns(SceneSkippedWarning):
        items = [ev[i] for i in range(len(ev))]
    assert [it["error"] is None for it in items] == [True, False, False]


def test_collate_stacks_and_sums(toy_root):
    ds = MultiViewDataset(_cfg(toy_root))
    batch = collate([ds[SampleKey(0, i % 2, 3, 28, 56, i)] for i in range(3)])
    assert batch["images"].shape == (3, 3, 3, 28, 56) and batch["w2c"].shape == (3, 3, 4, 4)
    assert batch["frames"].shape == (3, 3) and batch["scale"].shape == (3,)
    assert batch["scene"] == ["s0", "s1", "s0"] and batch["redraws"] == 0
    with pytest.raises(ValueError, match="share"):
        collate([ds[SampleKey(0, 0, 3, 28, 56, 0)], ds[SampleKey(0, 0, 2, 28, 56, 0)]])


class _RecordingReader(scenes_mod.SceneReader):
    created: list = []

    def __init__(self, path, **kwargs):
        _RecordingReader.created.append((os.getpid(), str(path)))
        super().__init__(path, **kwargs)


def test_dataloader_with_workers_matches_in_process_and_parent_opens_nothing(toy_root, monkeypatch):
    monkeypatch.setattr(scenes_mod, "SceneReader", _RecordingReader)
    _RecordingReader.created.clear()
    cfg = _cfg(toy_root)
    open_before = len(h5py.h5f.get_obj_ids(types=h5py.h5f.OBJ_FILE))
    loader = build_train_loader(cfg, seed=3, rank=1, world_size=2, start_step=10, num_steps=13, num_workers=2)
    batches = list(loader)
    assert len(batches) == 3
    assert _RecordingReader.created == []  # workers created readers in their own memory only
    assert len(h5py.h5f.get_obj_ids(types=h5py.h5f.OBJ_FILE)) == open_before
    assert len(loader.dataset._cache) == 0
    for step, batch in zip(range(10, 13), batches):
        shape = batch_shape(3, step, cfg)
        assert batch["images"].shape == (shape.batch_size, shape.num_views, 3, shape.height, shape.width)
        assert isinstance(batch["redraws"], int) and isinstance(batch["skipped_files"], int)
    in_process = build_train_loader(cfg, seed=3, rank=1, world_size=2, start_step=11, num_steps=13, num_workers=0)
    for a, b in zip(batches[1:], in_process):
        torch.testing.assert_close(a["images"], b["images"], rtol=0, atol=0)
        assert a["frames"].tolist() == b["frames"].tolist() and a["scene"] == b["scene"]
    assert _RecordingReader.created and {pid for pid, _ in _RecordingReader.created} == {os.getpid()}


def test_eval_dataset_fixed_views_and_errors(tmp_path):
    split_dir = _make_source(tmp_path, "toy", [("a", {}), ("b", {"n": 9})], split="val")
    (split_dir / "c.h5").write_bytes(b"not an hdf5 file")
    entries = [{"path": f"{s}.h5", "scene_id": s, "num_frames": n, "height": H, "width": W}
               for s, n in (("a", 6), ("b", 9), ("c", 6))]
    write_index(split_dir, entries, dataset="toy", split="val")
    src = [SourceConfig(name="toy", root=str(tmp_path), split="val")]
    ds = SceneEvalDataset(src, views=4, seed=0, image_width=56)
    assert len(ds) == 3 and ds.output_size(0) == (42, 56)
    first = ds[1]
    assert first["error"] is None and first["images"].shape == (4, 3, 42, 56)
    assert first["frames"].tolist() == ds.view_indices(1, 9) and first["scene"] == "b"
    with pytest.warns(SceneSkippedWarning):
        bad = ds[2]
    assert bad["error"] and "c.h5" in bad["error"] and bad["scene"] == "c"
    # an explicit manifest reproduces given frames
    manifest = {"toy/b": [5, 0, 3]}
    again = SceneEvalDataset(src, views=4, seed=0, image_width=56, manifest=manifest)[1]
    assert again["frames"].tolist() == [5, 0, 3]
    for frames in ([5, 0, 9], [-1, 2], []):  # a manifest of another version of the scene: skipped, said why
        stale = SceneEvalDataset(src, views=4, seed=0, image_width=56, manifest={"toy/b": frames})[1]
        assert stale["error"] and f"manifest frames {frames} out of range for 9 frames" in stale["error"], stale
    with pytest.raises(ValueError, match="evaluation needs at least 2 views per scene, got 1"):
        SceneEvalDataset(src, views=1)
    loader = DataLoader(SceneEvalDataset(src, views=4, seed=0, image_width=56), batch_size=1, collate_fn=collate_eval)
    with pytest.warns(SceneSkippedWarning):
        batches = list(loader)
    assert [b["error"] is None for b in batches] == [True, True, False]
    assert batches[1]["images"].shape == (1, 4, 3, 42, 56)
    torch.testing.assert_close(batches[1]["images"][0], first["images"], rtol=0, atol=0)


def test_nearest_view_selection_draws_close_cameras(tmp_path):
    """view_selection "nearest": views come from the cameras closest to the anchor (train and eval)."""
    from depthpe.loader.config import DataConfig, SourceConfig
    from depthpe.loader.datasets import MultiViewDataset, SceneEvalDataset
    from depthpe.loader.sampling import SampleKey
    from depthpe.scenes.format.scene_file import write_index, write_scene
    from depthpe.geometry import camera_centers
    from tests.helpers.scenes import plane_scene

    sc = plane_scene(12, 28, 28, seed=3)
    split = tmp_path / "ring" / "train"
    entry = write_scene(split / "s.h5", images=sc["images"], depth=sc["depth"], K=sc["K"], w2c=sc["w2c"],
                        dataset="ring", scene_id="s", split="train", metric=False, depth_units="scene")
    write_index(split, [entry], dataset="ring", split="train")
    src = dict(name="ring", root=str(tmp_path), split="train", view_selection="nearest", window=3)
    centers = camera_centers(torch.from_numpy(sc["w2c"])).numpy()

    def max_gap(frames):
        c = centers[list(frames)]
        return max(np.linalg.norm(c[i] - c[0]) for i in range(1, len(frames)))

    ring_gap = max(np.linalg.norm(centers[i] - centers[(i + 3) % 12]) for i in range(12))
    ds = MultiViewDataset(DataConfig(sources=[src], views=(3, 3), image_width=28, max_images_per_batch=3), train=True)
    for seed in range(5):
        sample = ds[SampleKey(0, 0, 3, 28, 28, seed)]
        assert max_gap(sample["frames"].tolist()) <= ring_gap + 1e-6
    ev = SceneEvalDataset([SourceConfig(**src)], views=3, image_width=28)
    assert max_gap(ev[0]["frames"].tolist()) <= ring_gap + 1e-6


def test_the_configs_scale_reference_and_baseline_ratio_reach_the_samples(toy_root):
    key = SampleKey(0, 1, 3, 42, 56, 123)
    others = MultiViewDataset(_cfg(toy_root))[key]
    everyone = MultiViewDataset(_cfg(toy_root, scale_reference="all"))[key]
    assert torch.equal(others["frames"], everyone["frames"])
    # S = 3: the mean centre distance over views 1 and 2, against the mean over all three (the reference's 0 too)
    assert everyone["scale"] == pytest.approx(others["scale"] * 2 / 3, rel=1e-6)
    with pytest.raises(NoUsableSampleError, match=r"Last problems: .*camera baseline .* is below 50.0 x median depth"):
        MultiViewDataset(_cfg(toy_root, min_scale_ratio=50.0))[key]  # no draw has a baseline of 50 x its depth
