"""No name from a dataset writes outside the output folder (reliability IV item 1): scene ids, dataset
and image names that climb out (``../../victim``), hide (``.x``) or carry odd characters go through
``depthpe.files.safe_component`` in every writer; the test hashes everything beside the output folder
before and after each command."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from depthpe.cli import main
from depthpe.files import safe_component
from tests.helpers.trees import assert_only_inside, tree_hashes

HOSTILE_SCENE = "x/../../../../victim"


def test_eval_writes_a_hostile_scene_id_inside_out(resume_data, saved_model, tmp_path):
    work = tmp_path / "work"
    data = work / "data"
    shutil.copytree(resume_data, data)
    index = data / "synth" / "val" / "index.json"
    doc = json.loads(index.read_text())
    doc["scenes"][0]["scene_id"] = HOSTILE_SCENE
    doc["scenes"][1]["scene_id"] = ".hidden scene\u00e9"
    index.write_text(json.dumps(doc))
    out = work / "nested" / "eval"
    before = tree_hashes(tmp_path, out)
    assert main(["eval", "--model", str(saved_model), "--data", str(data), "--out", str(out), "--views", "2",
                 "--image-width", "42", "--panels", "5", "--worst", "5", "--num-workers", "0", "--cpu"]) == 0
    assert_only_inside(tmp_path, out, before)
    panels = sorted(p.name for p in (out / "panels").iterdir())
    assert any(name.startswith("synth_x_.._") for name in panels) and len(panels) == 5
    assert all(name.endswith(".png") for name in panels)  # the hash goes before the suffix
    worst = json.loads((out / "worst.json").read_text())
    assert all((out / w["file"]).is_file() and "/" not in w["file"].removeprefix("worst/") for w in worst)
    assert all(w["file"].endswith(".png") for w in worst)


def test_plot_writes_a_hostile_dataset_name_inside_out(tmp_path):
    run = tmp_path / "runs" / "a"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("model:\n  global_pe: rope\nseed: 0\n")
    lines = [{"step": s, "dataset": "../../../victim", "native": {"abs_rel": 0.5 - 0.1 * s}} for s in (1, 2)]
    (run / "val_history.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "runs" / "plots"
    before = tree_hashes(tmp_path, out)
    code = main(["plot", str(run), "--out", str(out)])
    assert_only_inside(tmp_path, out, before)
    pngs = list(out.rglob("*.png"))
    assert code == 0 and len(pngs) == 1 and pngs[0].parent == out and pngs[0].name.startswith("curves_.._")


def test_predict_image_names_stay_inside_out(tmp_path):
    from depthpe.prediction.files import write_prediction
    from depthpe.prediction.result import ImagePrediction, PredictionResult

    frames = [ImagePrediction(name=name, image=np.zeros((2, 3, 3), np.uint8), depth=np.ones((2, 3), np.float32),
                              conf=np.ones((2, 3), np.float32), K=np.eye(3), w2c=np.eye(4)[:3], views=[0])
              for name in ("../../victim.png", "a/..hidden.png")]
    out = tmp_path / "pred"
    before = tree_hashes(tmp_path, out)
    write_prediction(PredictionResult(frames=frames, size=(2, 3), unit="normalized", mode="all",
                                      views_per_prediction=2, notes=[]), out)
    assert_only_inside(tmp_path, out, before)


def test_probe_gives_every_dataset_its_own_figures(resume_data, saved_model, tmp_path):
    data = tmp_path / "work" / "data"
    names = ("synth.v2", "synth.v3", ".hidden x")  # with_suffix once made lift_synth.png of the first two
    for name in names:
        shutil.copytree(resume_data / "synth", data / name)
    out = tmp_path / "work" / "nested" / "probe"
    before = tree_hashes(tmp_path, out)
    assert main(["probe", "attention", "--model", str(saved_model), "--data", str(data), "--out", str(out),
                 "--views", "2", "--scenes", "1", "--image-width", "42", "--cpu"]) == 0
    assert_only_inside(tmp_path, out, before)
    for name in names:
        for suffix in (".png", ".svg"):
            assert (out / (safe_component(f"lift_{name}") + suffix)).is_file(), (name, suffix)
    assert len(list(out.glob("lift_*"))) == 2 * len(names)


def test_view_saves_each_hostile_scene_to_its_own_file_here(resume_data, saved_model, tmp_path, monkeypatch):
    pytest.importorskip("viser", reason="the view extra (viser) is not installed")
    from depthpe.view.app import Viewer
    from depthpe.view.config import ViewConfig
    from depthpe.view.serve import scene_for
    from tests.helpers.browser import free_port

    data = tmp_path / "work" / "data"
    shutil.copytree(resume_data, data)
    index = data / "synth" / "val" / "index.json"
    doc = json.loads(index.read_text())
    names = ["a:b/../../../victim", "a:c/../../../victim", "q" * 300]  # once view_synth_a.ply twice, and too long
    for entry, name in zip(doc["scenes"], names):
        entry["scene_id"] = name
    index.write_text(json.dumps(doc))
    here = tmp_path / "work" / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    paths = [scene_for(ViewConfig(model=str(saved_model), data=str(data), scene=name, views=2, image_width=42,
                                  device="cpu")) for name in names]
    assert len({path for _, path in paths}) == len(names)
    assert all(len(path.parts) == 1 and path.suffix == ".ply" for _, path in paths)
    before = tree_hashes(tmp_path, here)
    for scene, path in paths:
        viewer = Viewer(scene, port=free_port(), max_points=100, save_path=path)
        try:
            assert viewer.save() == path
        finally:
            viewer.stop()
    assert_only_inside(tmp_path, here, before)
    assert sorted(p.name for p in here.iterdir()) == sorted(path.name for _, path in paths)


def test_compare_writes_a_hostile_dataset_name_inside_out(study, tmp_path):
    root = tmp_path / "work" / "study"
    shutil.copytree(study[0], root)
    hostile = "../../../victim"
    for run in sorted(root.iterdir()):
        for name in ("summary.json", "manifest.json", "metrics_per_image.csv"):
            path = run / "eval" / name
            path.write_text(path.read_text().replace('"synth"', json.dumps(hostile))
                            .replace('"synth/', f'"{hostile}/').replace("\nsynth,", f"\n{hostile},"))
        lines = [{"step": s, "dataset": hostile, "native": {"abs_rel": 0.5 - 0.1 * s}} for s in (1, 2)]
        (run / "val_history.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "work" / "nested" / "cmp"
    before = tree_hashes(tmp_path, out)
    assert main(["compare", *map(str, sorted(root.iterdir())), "--bootstrap", "50", "--out", str(out)]) == 0
    assert_only_inside(tmp_path, out, before)
    assert hostile in json.loads((out / "compare.json").read_text())["result"]["datasets"]
    curves = sorted(p.name for p in (out / "curves").iterdir())
    assert curves == [safe_component(f"curves_{hostile}") + suffix for suffix in (".png", ".svg")]
    assert {p.name for p in out.iterdir()} == {"compare.md", "compare.json", "report.html", "curves",
                                              ".depthpe-owner.json", ".lock"}  # the output folder's owner
