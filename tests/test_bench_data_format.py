"""`depthpe bench data --format jpeg`: the scene files it writes (stored like a converter writes them,
readable by the training loader), the width/views flags, the per-worker and raw OpenCV columns."""

import h5py
import numpy as np
import pytest

from depthpe.bench.data import raw_decode_rate, stored_images, write_bench_scenes
from depthpe.cli import main
from depthpe.data.scene_file import SceneReader, read_index
from tests.test_bench_training import _table


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
    rows = _table(out, ("0", "2"))
    assert set(rows) == {"0", "2"}
    for samples_s, images_s, per_worker, s_per_batch, relative, of_raw in rows.values():
        assert 2 <= images_s / samples_s <= 3
        assert of_raw == pytest.approx(per_worker / raw, abs=0.01)
    assert rows["2"][2] == pytest.approx(rows["2"][1] / 2, rel=0.01)  # per worker = images/s / workers
