"""Shared converter machinery: exact resizing, splits, resume, limits, options, CLI, workers."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from depthpe.cli import main
from depthpe.scenes.format.check import check_root
from depthpe.scenes.convert import convert
from depthpe.scenes.convert.common import (
    ConvertOptions,
    fit_size,
    random_val_split,
    resize_frame,
)
from depthpe.scenes.format.scene_file import SceneReader, read_index
from depthpe.scenes.synth import render_views
from depthpe.testing import fake_datasets as fake


def _opts(**kw):
    return ConvertOptions(progress=False, **kw)


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("raw")
    scenes = fake.make_scenes(4, views=5, height=45, width=63, seed=50)
    truth = fake.write_fake_megasynth(tmp / "ms", scenes, edge_block=0)
    return tmp / "ms", truth


def test_fit_size():
    assert fit_size(480, 640, 640) == (480, 640)
    assert fit_size(480, 640, 320) == (240, 320)
    assert fit_size(1440, 1080, 512) == (512, 384)
    assert fit_size(45, 63, 21) == (15, 21)


def test_resize_is_exact_against_a_rerender(raw, tmp_path):
    """Downscaling 45x63 by 3 (odd factor): nearest-exact depth samples the source pixel whose centre
    is the target pixel centre, so the stored depth must equal a render with the stored K."""
    src, truth = raw
    convert("megasynth", src, tmp_path, _opts(max_side=21, val_scenes=0))
    for scene_id, fs in truth.items():
        reader = SceneReader(tmp_path / "megasynth" / "train" / f"{scene_id}.h5")
        K, w2c = reader.read_cameras()
        assert (reader.height, reader.width) == (15, 21)
        depth = np.stack([reader.read_depth(i) for i in range(reader.num_frames)])
        _, rendered = render_views(fs.gt["scene"], K, w2c, 15, 21)
        both = (depth > 0) & (rendered > 0)
        rel = np.abs(depth - rendered)[both] / rendered[both]
        assert np.median(rel) < 1e-3 and np.quantile(rel, 0.9) < 2e-3, (scene_id, np.quantile(rel, [0.5, 0.9]))
        m = fake.compare_to_ground_truth(tmp_path / "megasynth" / "train" / f"{scene_id}.h5", fs)
        assert m["K_err"] < 1e-4 and m["image_mae"] < 4 and m["false_valid"] == 0


def test_resize_non_integer_scale_uses_nearest_exact_depth(raw, tmp_path):
    """45x63 -> 29x40: stored depth values are source values picked by INTER_NEAREST_EXACT (never
    blended across edges or with the invalid 0), K follows the pixel-centre resize formula."""
    src, truth = raw
    convert("megasynth", src, tmp_path, _opts(max_side=40, val_scenes=0))
    for scene_id, fs in truth.items():
        m = fake.compare_to_ground_truth(tmp_path / "megasynth" / "train" / f"{scene_id}.h5", fs)
        assert m["frames"] == 5 and m["K_err"] < 1e-4
        assert m["depth_rel_err"] < 1e-3 and m["false_valid"] == 0 and m["valid_recall"] == 1.0
        assert m["image_mae"] < 4


def test_resize_frame_updates_K_with_pixel_centres():
    image = np.zeros((40, 60, 3), np.uint8)
    depth = np.ones((40, 60), np.float32)
    K = np.array([[50.0, 0, 29.5], [0, 50, 19.5], [0, 0, 1]])
    img2, d2, K2 = resize_frame(image, depth, K, 20, 30)
    assert img2.shape == (20, 30, 3) and d2.shape == (20, 30)
    np.testing.assert_allclose(K2, [[25, 0, 14.5], [0, 25, 9.5], [0, 0, 1]])  # centre stays centred


def test_random_split_is_seeded_and_capped():
    ids = [f"s{i:03d}" for i in range(40)]
    a, b = random_val_split(ids, 10, 0), random_val_split(ids[::-1], 10, 0)
    assert a == b and sum(v == "val" for v in a.values()) == 10
    assert a != random_val_split(ids, 10, 1)
    assert sum(v == "val" for v in random_val_split(ids[:6], 2000, 0).values()) == 3  # at most half


def test_split_file_reused_resume_and_settings_change(raw, tmp_path):
    src, truth = raw
    s1 = convert("megasynth", src, tmp_path, _opts(val_scenes=1, split_seed=0))
    split_doc = json.loads((tmp_path / "megasynth" / "split.json").read_text())
    assert len(split_doc["splits"]["val"]) == 1 and s1["split_file"]["created"]
    files = sorted((tmp_path / "megasynth").glob("*/*.h5"))
    mtimes = [f.stat().st_mtime_ns for f in files]
    # rerun with another seed: the existing split file wins and finished scenes are kept
    s2 = convert("megasynth", src, tmp_path, _opts(val_scenes=2, split_seed=7))
    assert json.loads((tmp_path / "megasynth" / "split.json").read_text()) == split_doc
    assert s2["scenes_existing"] == 4 and s2["scenes_written"] == 0 and not s2["split_file"]["created"]
    assert [f.stat().st_mtime_ns for f in files] == mtimes
    assert s2["splits"] == s1["splits"]
    # different content settings: scenes are reconverted
    s3 = convert("megasynth", src, tmp_path, _opts(max_side=32))
    assert s3["scenes_written"] == 4
    assert read_index(tmp_path / "megasynth" / "train")[0]["width"] == 32


def test_limit_keeps_earlier_scenes_in_the_index(raw, tmp_path):
    src, _ = raw
    s = convert("megasynth", src, tmp_path, _opts(limit=1, val_scenes=0))
    assert s["scenes_processed"] == 1 and len(read_index(tmp_path / "megasynth" / "train")) == 1
    convert("megasynth", src, tmp_path, _opts(val_scenes=0))
    s = convert("megasynth", src, tmp_path, _opts(limit=1, val_scenes=0))
    assert s["scenes_processed"] == 1 and len(read_index(tmp_path / "megasynth" / "train")) == 4
    reports, problems = check_root(tmp_path, progress=False, max_pairs=4)
    assert not problems and all(r.ok for r in reports)


def test_frame_stride_and_min_frames(raw, tmp_path):
    src, truth = raw
    s = convert("megasynth", src, tmp_path / "a", _opts(frame_stride=2, val_scenes=0))
    assert s["frames_written"] == 4 * 3
    sid = sorted(truth)[0]
    names = SceneReader(tmp_path / "a" / "megasynth" / "train" / f"{sid}.h5").frame_names()
    assert names == ["00000000_rgba.png", "00000002_rgba.png", "00000004_rgba.png"]
    s = convert("megasynth", src, tmp_path / "b", _opts(min_frames=6, val_scenes=0))
    assert s["scenes_written"] == 0 and s["skip_reasons"] == {"too few usable frames": 4}


def test_cli_and_parallel_workers(raw, tmp_path, capsys):
    src, _ = raw
    rc = main(["convert", "megasynth", "--src", str(src), "--out", str(tmp_path / "p"), "--workers", "2",
               "--val-scenes", "1", "--quiet"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "4 written" in out and "frames/s" in out
    summary = json.loads((tmp_path / "p" / "megasynth" / "convert_summary.json").read_text())
    assert summary["frames_written"] == 20 and summary["options"]["workers"] == 2
    serial = convert("megasynth", src, tmp_path / "s", _opts(val_scenes=1))
    assert serial["splits"] == summary["splits"]
    for split in ("train", "val"):
        assert read_index(tmp_path / "p" / "megasynth" / split) == read_index(tmp_path / "s" / "megasynth" / split)


def test_cli_errors(tmp_path, capsys):
    assert main(["convert", "co3d", "--src", str(tmp_path / "missing"), "--out", str(tmp_path)]) == 2
    os.makedirs(tmp_path / "empty")
    assert main(["convert", "co3d", "--src", str(tmp_path / "empty"), "--out", str(tmp_path), "--quiet"]) == 2
    assert "no co3d scenes found" in capsys.readouterr().out


def _bench_convert_rows(capsys, *argv: str) -> dict[str, list[str]]:
    """Run ``depthpe bench convert`` -> ``{dataset: table cells}``."""
    import argparse

    from depthpe.bench import convert as bench

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    assert bench.run(parser.parse_args(list(argv))) == 0
    rows = [line.strip("|").split("|") for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells] for cells in rows[1:]}  # rows[0]: header


def test_bench_convert_reports_every_layout_with_its_options(capsys):
    from depthpe.scenes.convert import CONVERTERS, OWN_CAPTURES

    rows = _bench_convert_rows(capsys, "--scenes", "2", "--views", "3", "--height", "24", "--width", "32",
                               "--max-side", "16")
    assert sorted(rows) == sorted(set(CONVERTERS) - set(OWN_CAPTURES))  # the four dataset layouts
    for name, (_, src, stored, frames, wall, fps, fps_worker, kb) in rows.items():
        assert (src, stored, frames) == ("24x32", "12x16", "6"), name  # --max-side reaches the converter
        # one worker converts the scenes one after another, so their summed busy time is at most the
        # wall time: frames/s per worker >= frames/s (both rounded the same way)
        assert float(fps_worker) >= float(fps) > 0, name
        assert float(kb) > 0, name


def test_bench_convert_one_dataset_and_unknown_dataset(capsys):
    rows = _bench_convert_rows(capsys, "--dataset", "wildrgbd", "--scenes", "1", "--views", "2",
                               "--height", "24", "--width", "32")
    assert list(rows) == ["wildrgbd"] and rows["wildrgbd"][1:4] == ["24x32", "24x32", "2"]
    with pytest.raises(SystemExit):
        _bench_convert_rows(capsys, "--dataset", "nope")
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_depth_compression_option_reaches_the_scene_files(raw, tmp_path):
    import h5py

    src, _ = raw
    assert main(["convert", "megasynth", "--src", str(src), "--out", str(tmp_path / "n"), "--val-scenes", "0",
                 "--limit", "1", "--depth-compression", "none", "--quiet"]) == 0
    convert("megasynth", src, tmp_path / "g", _opts(val_scenes=0, limit=1))  # default
    codecs, depth = {}, {}
    for name in ("n", "g"):
        split_dir = tmp_path / name / "megasynth" / "train"
        path = split_dir / read_index(split_dir)[0]["path"]
        with h5py.File(path, "r", locking=False) as f:
            codecs[name] = f["depth"].compression
        with SceneReader(path) as reader:
            depth[name] = reader.read_depth(0)
    assert codecs["n"] is None and codecs["g"] == "gzip"
    np.testing.assert_array_equal(depth["n"], depth["g"])
    with pytest.raises(ValueError, match="depth_compression must be one of"):
        _opts(depth_compression="zip")
