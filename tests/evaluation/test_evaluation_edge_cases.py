"""`depthpe eval` edge cases: empty splits and datasets are errors, --views beyond a scene's frames
is recorded per scene, --dtype bf16 runs (autocast on CPU), scenes and images with too little
valid depth are skipped and counted, and summary.json is strict JSON (no NaN)."""

from __future__ import annotations

import csv
import json
import math
import shutil

import h5py
import numpy as np
import pytest

from depthpe.scenes.format.scene_file import write_index
from depthpe.eval import main

ARGS = ["--image-width", "42", "--panels", "0", "--num-workers", "0", "--cpu"]


def _data(tmp_path, synth_root, empty=("hollow",)):
    """A root with the synth val split and empty val splits for the names in ``empty``."""
    root = tmp_path / "data"
    shutil.copytree(synth_root / "synth" / "val", root / "synth" / "val")
    for name in empty:
        write_index(root / name / "val", [], dataset=name, split="val")
    return root


def _eval(root, model, out, *extra):
    return main(["--model", str(model), "--data", str(root), "--out", str(out), *ARGS, *extra])


def test_empty_split_or_dataset_is_an_error(synth_root, saved_model, tmp_path, capsys):
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


def test_an_empty_dataset_found_next_to_others_is_skipped_with_a_warning(synth_root, saved_model, tmp_path,
                                                                         capsys):
    root = _data(tmp_path, synth_root)
    assert _eval(root, saved_model, tmp_path / "out", "--views", "3") == 0
    out = capsys.readouterr().out
    assert "warning: skipping dataset 'hollow'" in out and "| synth | native |" in out


def test_all_scenes_unusable_is_an_error(synth_root, saved_model, tmp_path, capsys):
    root = _data(tmp_path, synth_root, empty=())
    for path in (root / "synth" / "val").glob("*.h5"):
        path.write_bytes(b"not an hdf5 file")
    assert _eval(root, saved_model, tmp_path / "out", "--views", "3") == 2
    captured = capsys.readouterr()
    assert "skipped synth/val_000000" in captured.out
    assert captured.err.splitlines()[-1].startswith("error: no scene could be evaluated: all 2 were skipped")


def test_more_views_than_frames_warns_and_records_the_views_used(synth_root, saved_model, tmp_path,
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


def test_bf16_runs_and_keeps_the_views(synth_root, saved_model, tmp_path, capsys):
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


def _set_depth(path, frames, keep_pixels: int | None):
    """Overwrite the stored depth of ``frames`` of the scene file ``path``: all invalid
    (``keep_pixels=None``) or only the first ``keep_pixels`` valid pixels kept."""
    with h5py.File(path, "r+") as f:
        depth = f["depth"][...]
        for i in frames:
            kept = np.zeros(depth[i].size, depth.dtype)
            if keep_pixels:
                first = np.flatnonzero(depth[i] > 0)[:keep_pixels]
                kept[first] = depth[i].reshape(-1)[first]
            depth[i] = kept.reshape(depth[i].shape)
        f["depth"][...] = depth


def _strict_json(path) -> dict:
    """summary.json read by a parser that refuses NaN and infinities (they are not JSON)."""
    def refuse(constant):
        raise AssertionError(f"{path} holds {constant}, which is not JSON")
    return json.loads(path.read_text(), parse_constant=refuse)


def test_a_scene_without_valid_depth_is_skipped_and_counted(synth_root, saved_model, tmp_path, capsys):
    root = _data(tmp_path, synth_root, empty=())
    _set_depth(root / "synth" / "val" / "val_000000.h5", range(4), None)
    assert _eval(root, saved_model, tmp_path / "out", "--views", "3") == 0
    printed = capsys.readouterr().out
    assert "skipped synth/val_000000: no usable view subset: valid depth fraction 0.000 < 0.01" in printed
    assert "nan" not in printed.lower()
    doc = _strict_json(tmp_path / "out" / "summary.json")
    assert [f["scene"] for f in doc["failures"]] == ["synth/val_000000"]
    assert doc["summary"]["synth"]["scene_aligned"]["n_scenes"] == 1
    assert list(doc["views"]["per_scene"]) == ["synth/val_000001"]
    # every scene without valid depth: nothing evaluated, the error of unusable files
    _set_depth(root / "synth" / "val" / "val_000001.h5", range(4), None)
    assert _eval(root, saved_model, tmp_path / "out2", "--views", "3") == 2
    captured = capsys.readouterr()
    assert "skipped synth/val_000001: no usable view subset" in captured.out
    assert captured.err.splitlines()[-1].startswith("error: no scene could be evaluated: all 2 were skipped")
    assert _strict_json(tmp_path / "out2" / "summary.json")["summary"] == {}


def test_a_scene_with_one_valid_pixel_is_skipped(synth_root, saved_model, tmp_path, capsys):
    root = _data(tmp_path, synth_root, empty=())
    _set_depth(root / "synth" / "val" / "val_000000.h5", range(4), 1)
    assert _eval(root, saved_model, tmp_path / "out", "--views", "3") == 0
    assert "skipped synth/val_000000: no usable view subset: valid depth fraction 0.00" in capsys.readouterr().out
    # without the fraction, the absolute minimum of an image still holds
    assert _eval(root, saved_model, tmp_path / "out0", "--views", "3", "--min-valid-fraction", "0") == 0
    assert ("skipped synth/val_000000: no usable view subset: too little valid depth: no view has the 16 valid "
            "pixels an image needs to be scored (0 of 42x42, at least 16)") in capsys.readouterr().out
    for out in ("out", "out0"):
        doc = _strict_json(tmp_path / out / "summary.json")
        assert doc["summary"]["synth"]["scene_aligned"]["n_scenes"] == 1
        assert [f["scene"] for f in doc["failures"]] == ["synth/val_000000"]


def test_images_with_too_little_valid_depth_are_left_out_of_a_scene(synth_root, saved_model, tmp_path):
    root = _data(tmp_path, synth_root, empty=())
    _set_depth(root / "synth" / "val" / "val_000000.h5", [1, 2, 3], 1)  # frame 0 keeps its depth
    assert _eval(root, saved_model, tmp_path / "out", "--views", "4") == 0
    doc = _strict_json(tmp_path / "out" / "summary.json")
    assert doc["failures"] == []
    for mode in ("native", "scene_aligned", "image_aligned", "scene_constant"):
        entry = doc["summary"]["synth"][mode]
        assert (entry["n_scenes"], entry["n_images"]) == (2, 5), mode  # 4 + 1 scored images
    with open(tmp_path / "out" / "metrics_per_image.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["scene"] == "val_000000" and r["mode"] == "scene_aligned"]
    assert sorted((int(r["image"]), int(r["n_valid"]) > 0) for r in rows) == [(0, True), (1, False), (2, False),
                                                                            (3, False)]


def test_the_summary_of_evaluate_holds_no_nan(synth_root, tmp_path):
    """Validation during training logs and records ``evaluate``'s summary: it must hold finite
    values only, also when scenes and images are skipped."""
    import torch

    from depthpe.loader.config import SourceConfig
    from depthpe.evaluation.heldout import HeldOutProtocol, ViewDraw, InputSize, resolve_held_out
    from depthpe.evaluation.loop import EvalOptions, evaluate
    from depthpe.evaluation.outputs import format_summary
    from depthpe.model import DepthModel
    from depthpe.run import RunConfig
    from tests.helpers.training import MICRO_MODEL

    root = _data(tmp_path, synth_root, empty=())
    _set_depth(root / "synth" / "val" / "val_000000.h5", range(4), None)
    _set_depth(root / "synth" / "val" / "val_000001.h5", [1, 2, 3], 1)
    torch.manual_seed(0)
    model = DepthModel(RunConfig.from_dict({"model": dict(MICRO_MODEL)}).model_config())
    held_out = resolve_held_out([SourceConfig(name="synth", root=str(root), split="val")], HeldOutProtocol(ViewDraw(4)),
                                InputSize(42))
    result = evaluate(model, held_out, EvalOptions(progress=False, loss_fn=lambda *a: {"l1": float("nan"), "grad": 0.5}))

    def leaves(tree):
        return [x for v in tree.values() for x in leaves(v)] if isinstance(tree, dict) else [tree]

    assert [f["scene"] for f in result.failures] == ["synth/val_000000"]
    assert result.summary["synth"]["native"]["n_images"] == 1
    assert result.summary["synth"]["loss"] == {"grad": 0.5}  # an undefined value is left out
    assert all(math.isfinite(v) for v in leaves(result.summary) if isinstance(v, float))
    assert "nan" not in format_summary(result.summary).lower()


def test_an_evaluation_leaves_no_scene_file_open(synth_root, saved_model, tmp_path):
    """When the evaluation returns, every scene file it read is closed, not when its dataset is
    garbage-collected (with the collector off here, as it may not have run yet in a long process):
    the files can be rewritten, moved or deleted at once (HDF5 refuses to open for writing a file this
    process still has open)."""
    import gc

    root = _data(tmp_path, synth_root, empty=())
    gc.collect()
    gc.disable()
    try:
        assert _eval(root, saved_model, tmp_path / "out", "--views", "3") == 0
        for path in sorted((root / "synth" / "val").glob("*.h5")):
            with h5py.File(path, "r+"):
                pass
    finally:
        gc.enable()
