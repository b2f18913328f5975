"""`depthpe bench data --format jpeg`: the scene files it writes (stored like a converter writes them,
readable by the training loader), the width/views flags, the per-worker and raw OpenCV columns."""

import json

import h5py
import numpy as np

from depthpe.bench.data import raw_decode_rate, stored_images, write_bench_scenes
from depthpe.cli import main
from depthpe.scenes.format.scene_file import SceneReader, read_index
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
    result_path = tmp_path / "data.json"
    assert main(["bench", "data", "--config", "quickstart", "--format", "jpeg", "--frame-size", "56", "70",
                 "--image-width", "42", "--views", "2", "3", "--scenes", "2", "--frames", "4", "--workers", "0", "2",
                 "--batches", "3", "--raw", "--scene-dir", str(tmp_path), "--json", str(result_path)]) == 0
    out = capsys.readouterr().out
    assert "width 42, views (2, 3)" in out and str(tmp_path / "bench" / "train") in out
    # the unrounded numbers the benchmark computed (--json), not the rounded printout
    result = json.loads(result_path.read_text())
    assert result["data"]["image_width"] == 42 and result["data"]["views"] == [2, 3]
    raw = result["raw_images_per_s"]
    rows = {row["workers"]: row for row in result["rows"]}
    assert list(rows) == [0, 2] and raw > 0
    for row in rows.values():
        assert 2 <= row["images"] / row["samples"] <= 3
        assert row["per_worker_over_raw"] == row["images_per_s_per_worker"] / raw
    assert rows[2]["images_per_s_per_worker"] == rows[2]["images_per_s"] / 2  # per worker = images/s / workers
    assert f"one core: {raw:.1f} images/s" in out
    printed = table_rows(out, ("0", "2"))
    assert [printed[str(w)][-1] for w in rows] == [round(row["per_worker_over_raw"], 2) for row in rows.values()]


def test_written_scenes_store_depth_with_the_chosen_codec(tmp_path):
    from depthpe.bench import data as bench_data
    from depthpe.scenes.format import scene_file

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
    result_path = tmp_path / "data.json"
    assert main(["bench", "data", "--config", "quickstart", "--format", "jpeg", "--frame-size", "16", "20",
                 "--scenes", "1", "--frames", "2", "--workers", "0", "--batches", "1", "--depth-compression", "gzip",
                 "--depth-codecs", "--scene-dir", str(tmp_path), "--json", str(result_path)]) == 0
    with h5py.File(tmp_path / "bench" / "train" / "scene_000.h5") as f:
        assert f["depth"].compression == "gzip"
    table = json.loads(result_path.read_text())["depth_codecs"]
    assert (table["frames"], table["height"], table["width"], table["dtype"]) == (2, 16, 20, "float16")
    assert list(table["rates"]) == ["as stored", "sensor-like"]
    for rates in table["rates"].values():
        assert list(rates) == list(bench_data.DEPTH_COMPRESSIONS)
        assert all(r["ms_per_frame"] > 0 for r in rates.values())
    none_kb = table["rates"]["sensor-like"]["none"]["kb_per_frame"]
    assert 16 * 20 * 2 / 1e3 <= none_kb < 5  # uncompressed: 2 bytes per pixel, plus a share of the HDF5 header
    printed = capsys.readouterr().out.split("reading 2 stored float16 depth frames of 16x20 per codec")[1]
    rows = [line for line in printed.splitlines() if line.startswith(("| as stored", "| sensor-like"))]
    assert len(rows) == 2 and all(row.count(" ms / ") == 3 for row in rows)


def test_sensor_like_depth_keeps_dtype_holes_and_scale():
    from depthpe.bench.data import SENSOR_HOLES, sensor_like

    depth = np.full((4, 30, 40), 2.0, np.float16)
    noisy = sensor_like(depth)
    assert noisy.dtype == np.float16 and noisy.shape == depth.shape
    assert abs((noisy == 0).mean() - SENSOR_HOLES) < 0.02
    assert abs(float(noisy[noisy > 0].astype(np.float32).mean()) - 2.0) < 0.01 and noisy[noisy > 0].std() > 0


def test_bench_data_profile_attributes_time_to_every_step(tmp_path, capsys):
    from depthpe.bench.data import PROFILE_REST, PROFILE_STEPS

    result_path = tmp_path / "data.json"
    argv = ["bench", "data", "--config", "quickstart", "--format", "jpeg", "--frame-size", "56", "70",
            "--image-width", "42", "--views", "2", "3", "--scenes", "2", "--frames", "4", "--workers", "0",
            "--batches", "2", "--profile", "--scene-dir", str(tmp_path), "--json", str(result_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out.split("cProfile, MultiViewDataset.__getitems__")[1]
    rows = {line.split(" | ")[0][2:] for line in out.splitlines() if line.startswith("| ")}
    assert set(PROFILE_STEPS) | {PROFILE_REST} < rows
    # unrounded (--json): a renamed function would leave its step at exactly 0 s (the table rounds small
    # steps to 0.00 ms), and the rest row is what the steps leave of the total
    profile = json.loads(result_path.read_text())["profile"]
    assert profile["images"] > 0 and profile["seconds"] > 0 and list(profile["steps"]) == list(PROFILE_STEPS)
    for step, seconds in profile["steps"].items():
        assert seconds > 0, step
    assert profile["rest_seconds"] == profile["seconds"] - sum(profile["steps"].values())
