"""`depthpe bench data --format jpeg`: the scene files it writes (stored like a converter writes them,
readable by the training loader), the width/views flags, the per-worker and raw OpenCV columns."""

import h5py
import numpy as np
import pytest

from depthpe.bench.data import raw_decode_rate, stored_images, write_bench_scenes
from depthpe.cli import main
from depthpe.data.format.scene_file import SceneReader, read_index
from tests.helpers.tables import table_rows


def test_written_scenes_are_jpeg_scene_files_with_exact_cameras(tmp_path):
    split = write_bench_scenes(tmp_path, scenes=2, frames=3, frame_hw=(56, 70), fmt="jpeg")
    entries = read_index(split)
    assert [(e["num_frames"], e["height"], e["width"]) for e in entries] == [(3, 56, 70)] * 2
    with h5py.File(split / entries[0]["path"]) as f:
        assert bytes(np.asarray(f["images"][0])[:2]) == b"\xff\xd8"  # JPEG bytes
        assert f["depth"].dtype == np.float16
    with SceneReader(split / entries[0]["path"], strict=True) as reader:
        frame = reader.read_frame(0)
        assert frame["image"].shape == (56, 70, 3) and frame["valid"].any()
        # rendered at 28 x 35 and enlarged 2x: the principal point moves by the pixel-centre rule
        assert frame["K"][0, 0] > 0 and 0 < frame["K"][0, 2] < 70 and 0 < frame["K"][1, 2] < 56
    before = (split / entries[0]["path"]).stat().st_mtime_ns
    write_bench_scenes(tmp_path, scenes=2, frames=3, frame_hw=(56, 70), fmt="jpeg")  # reused, not rewritten
    assert (split / entries[0]["path"]).stat().st_mtime_ns == before
    images = stored_images(split, limit=4)
    assert len(images) == 4 and raw_decode_rate(images, width=42, repeats=1) > 0


def test_bench_data_on_written_jpeg_scenes_reports_per_worker_and_raw_rates(tmp_path, capsys):
    assert main(["bench", "data", "--config", "quickstart", "--format", "jpeg", "--frame-size", "56", "70",
                 "--image-width", "42", "--views", "2", "3", "--scenes", "2", "--frames", "4", "--workers", "0", "2",
                 "--batches", "3", "--raw", "--scene-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "width 42, views (2, 3)" in out and str(tmp_path / "bench" / "train") in out
    raw = float(out.split("one core: ")[1].split(" images/s")[0])
    rows = table_rows(out, ("0", "2"))
    assert set(rows) == {"0", "2"}
    for samples_s, images_s, per_worker, s_per_batch, relative, of_raw in rows.values():
        assert 2 <= images_s / samples_s <= 3
        assert of_raw == pytest.approx(per_worker / raw, abs=0.01)
    assert rows["2"][2] == pytest.approx(rows["2"][1] / 2, rel=0.01)  # per worker = images/s / workers


def test_written_scenes_store_depth_with_the_chosen_codec(tmp_path):
    from depthpe.bench import data as bench_data
    from depthpe.data.format import scene_file

    # the CLI's choices (depth_codecs: no h5py import to build a parser) each have an HDF5 filter
    assert bench_data.DEPTH_COMPRESSIONS == scene_file.DEPTH_COMPRESSIONS
    assert {name: bool(scene_file.depth_filters(name)) for name in scene_file.DEPTH_COMPRESSIONS} == {
        "gzip": True, "lzf": True, "none": False}
    for codec, expected in (("none", None), ("gzip", "gzip"), ("lzf", "lzf")):
        split = write_bench_scenes(tmp_path / codec, scenes=1, frames=2, frame_hw=(16, 20), fmt="jpeg",
                                   depth_compression=codec)
        with h5py.File(split / "scene_000.h5") as f:
            assert f["depth"].compression == expected


def test_bench_data_depth_compression_flag_reaches_the_written_scenes(tmp_path, monkeypatch, capsys):
    import depthpe.bench.data as bench_data

    monkeypatch.setattr(bench_data, "measure_loader", lambda *a, **k: {
        "samples_per_s": 1.0, "images_per_s": 2.0, "images_per_s_per_worker": 2.0, "s_per_batch": 1.0})
    assert main(["bench", "data", "--config", "quickstart", "--format", "jpeg", "--frame-size", "16", "20",
                 "--scenes", "1", "--frames", "2", "--workers", "0", "--batches", "1", "--depth-compression", "gzip",
                 "--depth-codecs", "--scene-dir", str(tmp_path)]) == 0
    with h5py.File(tmp_path / "bench" / "train" / "scene_000.h5") as f:
        assert f["depth"].compression == "gzip"
    table = capsys.readouterr().out.split("reading 2 stored float16 depth frames of 16x20 per codec")[1]
    rows = [line for line in table.splitlines() if line.startswith("| as stored") or line.startswith("| sensor-like")]
    assert len(rows) == 2 and all(row.count(" ms / ") == 3 for row in rows)
    none_kb = float(rows[1].split("|")[2].split("ms / ")[1].split(" KB")[0])
    assert 16 * 20 * 2 / 1e3 <= none_kb < 5  # uncompressed: 2 bytes per pixel, plus a share of the HDF5 header


def test_sensor_like_depth_keeps_dtype_holes_and_scale():
    from depthpe.bench.data import SENSOR_HOLES, sensor_like

    depth = np.full((4, 30, 40), 2.0, np.float16)
    noisy = sensor_like(depth)
    assert noisy.dtype == np.float16 and noisy.shape == depth.shape
    assert abs((noisy == 0).mean() - SENSOR_HOLES) < 0.02
    assert abs(float(noisy[noisy > 0].astype(np.float32).mean()) - 2.0) < 0.01 and noisy[noisy > 0].std() > 0


def test_bench_data_profile_attributes_time_to_every_step(tmp_path, capsys):
    import argparse

    from depthpe.bench.data import PROFILE_STEPS, _overrides, add_arguments, profile_batches
    from depthpe.run import load_run_config

    argv = ["bench", "data", "--config", "quickstart", "--format", "jpeg", "--frame-size", "56", "70",
            "--image-width", "42", "--views", "2", "3", "--scenes", "2", "--frames", "4", "--workers", "0",
            "--batches", "2", "--profile", "--scene-dir", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out.split("cProfile, MultiViewDataset.__getitems__")[1]
    rows = {line.split(" | ")[0][2:]: line.split(" | ") for line in out.splitlines() if line.startswith("| ")}
    assert set(PROFILE_STEPS) < set(rows)
    shares = [float(r[1].rstrip("%")) for name, r in rows.items() if name not in ("step", "---")]
    assert sum(shares) == pytest.approx(100, abs=0.5)
    # unrounded: a renamed function would leave its step at exactly 0 s (the table rounds small steps to 0.00 ms)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    cfg = load_run_config("quickstart", _overrides(parser.parse_args(argv[2:]), tmp_path))
    images, total, steps = profile_batches(cfg.data, batches=2)
    assert images > 0 and total > 0
    for step, seconds in steps.items():
        assert seconds > 0, step