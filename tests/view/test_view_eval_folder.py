"""`depthpe view EVAL_DIR --scene NAME`: an evaluation folder is shown as it was evaluated (its model,
data, views, width, dtype and the frames of its manifest), its scores are the evaluation's own, and a
folder that is not an evaluation is a one-line error."""

from __future__ import annotations

import csv
import json
import re
import shutil

import numpy as np
import pytest

from depthpe.config import ConfigError
from depthpe.evaluation.scene import held_out_of_spec, predict_eval_scene, spec_from_eval_dir
from depthpe.view.config import ViewConfig
from depthpe.view.serve import scene_for
from tests.helpers.compare import edit_summary

SCENE = "synth/val_000001"


def _abs_rel(eval_dir, scene: str, mode: str) -> list[float]:
    """The AbsRel of every image of ``scene`` ("<dataset>/<id>") in the evaluation's rows of ``mode``."""
    dataset, scene_id = scene.split("/")
    with open(eval_dir / "metrics_per_image.csv", newline="") as f:
        return [float(r["abs_rel"]) for r in csv.DictReader(f)
                if r["mode"] == mode and r["dataset"] == dataset and r["scene"] == scene_id]


def _edited_eval(eval_dir, folder, **meta):
    """A copy of ``eval_dir``'s summary.json (no manifest) in ``folder`` with ``meta`` changed."""
    folder.mkdir()
    shutil.copy(eval_dir / "summary.json", folder)
    edit_summary(folder, lambda doc: doc["meta"].update(meta))
    return folder


def test_an_eval_folder_shows_its_scene_with_the_evaluated_frames_and_scores(eval_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scene, save = scene_for(ViewConfig(source=str(eval_dir), scene="val_000001"))
    frames = json.loads((eval_dir / "manifest.json").read_text())["scenes"][SCENE]
    assert [f.name for f in scene.frames] == [f"frame {i}" for i in frames]
    assert scene.frames[0].image.shape[1] == 42  # the evaluation's --image-width, not the model's 518
    for mode in ("native", "scene_aligned"):  # the evaluation's own scores of this scene
        assert scene.metrics[mode]["abs_rel"] == pytest.approx(np.mean(_abs_rel(eval_dir, SCENE, mode)), rel=1e-5)
    depth, gt = (np.stack([getattr(f, a) for f in scene.frames]) for a in ("depth", "gt"))
    median_ratio = np.median(gt[gt > 0]) / np.median(depth[gt > 0])
    assert scene.scales == pytest.approx({"native": 1.0, "scene_aligned": median_ratio}, rel=1e-5)
    assert save.name == "view_synth_val_000001.ply" and scene.title.startswith(SCENE)


def test_the_evaluations_settings_are_the_defaults_and_options_win(eval_dir, tmp_path):
    meta = json.loads((eval_dir / "summary.json").read_text())["meta"]
    spec = spec_from_eval_dir(eval_dir, "val_000000")
    assert (spec.model, spec.data, spec.split) == (meta["model"], meta["data"], "val")
    assert (spec.views, spec.seed, spec.image_width, spec.dtype) == (3, 0, 42, "fp32")
    assert spec.manifest == str(eval_dir / "manifest.json") and spec.scene == "val_000000"
    given = spec_from_eval_dir(eval_dir, None, views=2, seed=None, dtype="bf16", image_width=None)
    assert (given.views, given.seed, given.dtype, given.image_width) == (2, 0, "bf16", 42)
    other = spec_from_eval_dir(_edited_eval(eval_dir, tmp_path / "other", split="test", seed=3, revision="v1",
                                            min_valid_fraction=0.5))
    assert (other.split, other.seed, other.revision, other.manifest) == ("test", 3, "v1", None)
    assert other.min_valid_fraction == 0.5 and spec.min_valid_fraction == meta["min_valid_fraction"] == 0.01


def test_the_viewed_scene_needs_the_valid_depth_its_evaluation_asked_for(eval_dir, tmp_path):
    """An evaluation run with ``--min-valid-fraction F`` scores only views with F of valid depth: the
    viewer's held-out set keeps F (no view of the synthetic scenes is 99 % valid, so 0.99 refuses all)."""
    spec = spec_from_eval_dir(_edited_eval(eval_dir, tmp_path / "strict", min_valid_fraction=0.99), "val_000001")
    assert held_out_of_spec(spec).min_valid_fraction == 0.99
    with pytest.raises(ValueError, match="cannot be used"):
        predict_eval_scene(spec)


def _recorded_specs(monkeypatch, configs: list[ViewConfig]) -> list:
    """The EvalSceneSpec that ``depthpe view`` would predict with, for each config (nothing predicted)."""
    import depthpe.evaluation.scene as eval_scene

    used = []

    def predict_eval_scene(spec, device="cpu"):
        used.append(spec)
        raise ValueError("recorded")

    monkeypatch.setattr(eval_scene, "predict_eval_scene", predict_eval_scene)
    for cfg in configs:
        with pytest.raises(ConfigError, match="recorded"):
            scene_for(cfg)
    return used


def test_a_bf16_evaluation_is_viewed_in_bf16_unless_dtype_is_given(eval_dir, tmp_path, monkeypatch):
    folder = str(_edited_eval(eval_dir, tmp_path / "eval", dtype="bf16"))
    used = _recorded_specs(monkeypatch, [ViewConfig(source=folder), ViewConfig(source=folder, dtype="fp32")])
    assert [spec.dtype for spec in used] == ["bf16", "fp32"]  # no --dtype: the evaluation's


def test_min_valid_fraction_is_the_evaluations_unless_given(eval_dir, tmp_path, monkeypatch):
    """``--min-valid-fraction``: an evaluation folder's own by default, the option when given; with
    --model and --data (no evaluation) the option, else depthpe eval's default 0.01."""
    folder = str(_edited_eval(eval_dir, tmp_path / "eval", min_valid_fraction=0.3))
    meta = json.loads((eval_dir / "summary.json").read_text())["meta"]
    direct = {"model": meta["model"], "data": meta["data"]}
    used = _recorded_specs(monkeypatch, [ViewConfig(source=folder), ViewConfig(source=folder, min_valid_fraction=0.6),
                                         ViewConfig(**direct), ViewConfig(**direct, min_valid_fraction=0.2)])
    assert [spec.min_valid_fraction for spec in used] == [0.3, 0.6, 0.01, 0.2]


def test_a_folder_that_is_not_an_evaluation_is_one_error_line(tmp_path):
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path}: no summary.json (not a depthpe eval output folder)")):
        spec_from_eval_dir(tmp_path)
    (tmp_path / "summary.json").write_text(json.dumps({"meta": {"data": "root"}}))
    message = f"{tmp_path / 'summary.json'}: its meta names no model or data; pass --model and --data"
    with pytest.raises(ValueError, match=re.escape(message)):
        spec_from_eval_dir(tmp_path)
    with pytest.raises(ConfigError, match=re.escape(message)):  # what `depthpe view` prints after "error: "
        scene_for(ViewConfig(source=str(tmp_path)))
