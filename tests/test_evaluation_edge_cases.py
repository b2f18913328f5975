"""`depthpe eval` edge cases: empty splits and datasets are errors, --views beyond a scene's frames
is recorded per scene, --dtype bf16 runs (autocast on CPU)."""

from __future__ import annotations

import csv
import json
import math
import shutil

import pytest

from depthpe.data.scene_file import write_index
from depthpe.eval import main
from tests.test_evaluation import saved_model  # noqa: F401 (fixture)
from tests.test_training import synth_root  # noqa: F401 (fixture)

ARGS = ["--image-width", "42", "--panels", "0", "--num-workers", "0", "--cpu"]


def _data(tmp_path, synth_root, empty=("hollow",)):  # noqa: F811
    """A root with the synth val split and empty val splits for the names in ``empty``."""
    root = tmp_path / "data"
    shutil.copytree(synth_root / "synth" / "val", root / "synth" / "val")
    for name in empty:
        write_index(root / name / "val", [], dataset=name, split="val")
    return root


def _eval(root, model, out, *extra):
    return main(["--model", str(model), "--data", str(root), "--out", str(out), *ARGS, *extra])


def test_empty_split_or_dataset_is_an_error(synth_root, saved_model, tmp_path, capsys):  # noqa: F811
    root = _data(tmp_path, synth_root)
    assert _eval(root, saved_model, tmp_path / "o1", "--datasets", "hollow") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: dataset 'hollow' has no scene")
    assert _eval(root, saved_model, tmp_path / "o2", "--split", "test") == 2
    assert "no dataset with a 'test' split" in capsys.readouterr().err
    shutil.rmtree(root / "synth")
    assert _eval(root, saved_model, tmp_path / "o3") == 2
    assert capsys.readouterr().err.startswith("error: nothing to evaluate: dataset 'hollow'")
    assert _eval(root, saved_model, tmp_path / "o4", "--views", "1") == 2
    assert "--views must be at least 2" in capsys.readouterr().err


def test_an_empty_dataset_found_next_to_others_is_skipped_with_a_warning(synth_root, saved_model, tmp_path,  # noqa: F811
                                                                         capsys):
    root = _data(tmp_path, synth_root)
    assert _eval(root, saved_model, tmp_path / "out", "--views", "3") == 0
    out = capsys.readouterr().out
    assert "warning: skipping dataset 'hollow'" in out and "| synth | native |" in out


def test_all_scenes_unusable_is_an_error(synth_root, saved_model, tmp_path, capsys):  # noqa: F811
    root = _data(tmp_path, synth_root, empty=())
    for path in (root / "synth" / "val").glob("*.h5"):
        path.write_bytes(b"not an hdf5 file")
    assert _eval(root, saved_model, tmp_path / "out", "--views", "3") == 2
    captured = capsys.readouterr()
    assert "skipped synth/val_000000" in captured.out
    assert captured.err.splitlines()[-1].startswith("error: no scene could be evaluated: all 2 were skipped")


def test_more_views_than_frames_warns_and_records_the_views_used(synth_root, saved_model, tmp_path,  # noqa: F811
                                                                 capsys):
    out = tmp_path / "out"
    assert _eval(synth_root, saved_model, out, "--views", "6") == 0  # the scenes have 4 frames
    assert "warning: 2 scene(s) have fewer frames than --views 6" in capsys.readouterr().out
    views = json.loads((out / "summary.json").read_text())["views"]
    assert views["requested"] == 6
    assert views["per_scene"] == {"synth/val_000000": 4, "synth/val_000001": 4}
    assert views["fewer_than_requested"] == views["per_scene"]
    with open(out / "metrics_per_image.csv") as f:
        assert {row["views"] for row in csv.DictReader(f)} == {"4"}


def test_bf16_runs_and_keeps_the_views(synth_root, saved_model, tmp_path, capsys):  # noqa: F811
    assert _eval(synth_root, saved_model, tmp_path / "fp32", "--views", "3") == 0
    assert _eval(synth_root, saved_model, tmp_path / "bf16", "--views", "3", "--dtype", "bf16") == 0
    assert "bf16 autocast" in capsys.readouterr().out
    fp32 = json.loads((tmp_path / "fp32" / "summary.json").read_text())
    bf16 = json.loads((tmp_path / "bf16" / "summary.json").read_text())
    assert bf16["meta"]["dtype"] == "bf16"
    assert bf16["views"]["per_scene"] == fp32["views"]["per_scene"] == {"synth/val_000000": 3,
                                                                        "synth/val_000001": 3}
    assert (json.loads((tmp_path / "bf16" / "manifest.json").read_text())
            == json.loads((tmp_path / "fp32" / "manifest.json").read_text()))
    a, b = (d["summary"]["synth"]["native"]["abs_rel"] for d in (fp32, bf16))
    assert math.isfinite(b) and b == pytest.approx(a, rel=0.1, abs=0.02)
