"""One resolved held-out set (depthpe.evaluation.heldout): `depthpe eval` reads each source's
index.json and the model's training_inputs.json once; validation, the probe and the viewer's
held-out scene run on the very scenes and views that `evaluate` runs on for the same set; a scene
record keeps the JSON line format of the partial results."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest
import torch

from depthpe.config import ConfigError
from depthpe.evaluation.heldout import HeldOutProtocol, ViewDraw, InputSize, model_input_size, resolve_held_out
from depthpe.evaluation.protocol import discover_sources
from tests.helpers.training import MICRO_MODEL

VIEWS, WIDTH = 3, 28


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Two datasets of the val split: synth (5 scenes of 4 frames) and more (3 scenes of 5 frames)."""
    from depthpe.scenes.synth import write_synth_dataset

    root = tmp_path_factory.mktemp("data")
    for name, scenes, views in (("synth", 5, 4), ("more", 3, 5)):
        raw = tmp_path_factory.mktemp(name)
        write_synth_dataset(raw, train_scenes=0, val_scenes=scenes, views=views, height=28, width=28, seed=len(name),
                            progress=False)
        (raw / "synth").rename(root / name)
    return root


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from depthpe.model import DepthModel
    from depthpe.model.training_inputs import TrainingInputs, write_training_inputs
    from depthpe.run import RunConfig

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("model")
    DepthModel(RunConfig.from_dict({"model": dict(MICRO_MODEL)}).model_config()).save_pretrained(path)
    write_training_inputs(path, TrainingInputs(WIDTH, (1.0, 1.0), (2, 4), "all"))
    return path


def _counting(monkeypatch, module_path: str, name: str) -> list:
    """Replace function ``name`` of ``module_path`` with a wrapper that records its first argument,
    in that module and in every depthpe module that imported it by name."""
    real = getattr(sys.modules[module_path], name)
    calls = []

    def wrapper(*args, **kwargs):
        calls.append(str(args[0]))
        return real(*args, **kwargs)

    for module in [m for key, m in list(sys.modules.items()) if key.startswith("depthpe")]:
        if getattr(module, name, None) is real:
            monkeypatch.setattr(module, name, wrapper)
    return calls


def test_eval_reads_each_index_and_the_training_inputs_once(data, model_dir, tmp_path, monkeypatch):
    import depthpe.scenes.format.scene_file  # noqa: F401
    import depthpe.evaluation.command  # noqa: F401 (its imports bind the readers first)
    import depthpe.model.training_inputs  # noqa: F401
    from depthpe.eval import main

    indexes = _counting(monkeypatch, "depthpe.scenes.format.scene_file", "read_index")
    inputs = _counting(monkeypatch, "depthpe.model.training_inputs", "read_training_inputs")
    assert main(["--model", str(model_dir), "--data", str(data), "--out", str(tmp_path / "eval"), "--views", "3",
                 "--scenes", "2", "--panels", "1", "--num-workers", "0", "--cpu"]) == 0
    assert sorted(indexes) == sorted(str(data / name / "val") for name in ("more", "synth"))
    assert inputs == [str(model_dir)]
    assert (tmp_path / "eval" / "summary.json").is_file()


def _held_out(data):
    return resolve_held_out(discover_sources(data, "val"),
                            HeldOutProtocol(ViewDraw(VIEWS, 3), max_scenes=2, selection="random"),
                            InputSize(WIDTH, scale_reference="all"))


def _recording(monkeypatch, module) -> list[tuple[str, list[int]]]:
    """Record ("<dataset>/<scene>", frames) of every scene ``module.scene_prediction`` predicts."""
    real, seen = module.scene_prediction, []

    def wrapper(model, batch, dtype="fp32"):
        seen.append((f"{batch['dataset'][0]}/{batch['scene'][0]}", [int(i) for i in batch["frames"][0]]))
        return real(model, batch, dtype)

    monkeypatch.setattr(module, "scene_prediction", wrapper)
    return seen


@pytest.fixture(scope="module")
def model(model_dir):
    from depthpe.model import DepthModel

    return DepthModel.from_pretrained(model_dir).eval()


def test_resolving_draws_per_source_and_fixes_the_input_size(data):
    held_out = _held_out(data)
    assert [key.split("/")[0] for key in held_out.scenes] == ["more", "more", "synth", "synth"]
    dataset = held_out.dataset()
    assert [dataset.scene_key(i) for i in held_out.order] == list(held_out.scenes)
    assert (dataset.image_width, dataset.scale_reference, dataset.views) == (WIDTH, "all", VIEWS)
    assert _held_out(data) == held_out  # the same draw every time
    other_seed = resolve_held_out(discover_sources(data, "val"),
                                  HeldOutProtocol(ViewDraw(VIEWS, 4), max_scenes=2, selection="random"))
    assert {s.source.name: s.index for s in other_seed.sources} == {s.source.name: s.index for s in held_out.sources}


def test_probe_and_viewer_get_the_scenes_and_views_of_evaluate(data, model, monkeypatch):
    import depthpe.evaluation.loop as loop
    import depthpe.evaluation.scene as scene
    import depthpe.probe.runner as runner
    from depthpe.evaluation.loop import EvalOptions, evaluate

    held_out = _held_out(data)
    evaluated = _recording(monkeypatch, loop)
    result = evaluate(model, held_out, EvalOptions(progress=False))
    assert [key for key, _ in evaluated] == list(held_out.scenes)
    assert dict(evaluated) == result.manifest and all(len(f) == VIEWS for f in result.manifest.values())
    probed = _recording(monkeypatch, runner)
    found = runner.probe_attention(model, held_out)
    assert probed == evaluated and sum(acc.samples for acc in found.values()) == len(evaluated)
    probed.clear()
    runner.probe_attention(model, held_out.with_manifest(dict(evaluated[1:3])))
    assert probed == evaluated[1:3]
    viewed = _recording(monkeypatch, scene)
    for key, frames in evaluated:
        predicted = scene.predict_held_out_scene(held_out, key, model)
        assert (f"{predicted.dataset}/{predicted.scene}", predicted.frames) == (key, frames)
    assert viewed == evaluated


def test_validation_evaluates_and_probes_the_held_out_set_of_its_settings(data, model, monkeypatch):
    import depthpe.evaluation.loop as loop
    import depthpe.probe.runner as runner
    from depthpe.run import RunConfig
    from depthpe.run.trainer import validate

    sources = [{"name": name, "root": str(data), "split": "val"} for name in ("more", "synth")]
    cfg = RunConfig.from_dict({"model": dict(MICRO_MODEL), "data": {"image_width": WIDTH, "scale_reference": "all"},
                               "val": {"sources": sources, "views": VIEWS, "seed": 3, "max_scenes": 2,
                                       "selection": "random", "correspondence": True}})
    given = []
    real_evaluate = loop.evaluate

    def spy(model, held_out, *args, **kwargs):
        given.append(held_out)
        return real_evaluate(model, held_out, *args, **kwargs)

    monkeypatch.setattr(loop, "evaluate", spy)
    evaluated, probed = _recording(monkeypatch, loop), _recording(monkeypatch, runner)
    accelerator = SimpleNamespace(process_index=0, num_processes=1, is_main_process=False, unwrap_model=lambda m: m)
    run = SimpleNamespace(cfg=cfg, state=SimpleNamespace(step=1), accelerator=accelerator, model=model)
    validate(run)
    assert given == [_held_out(data)]
    assert [key for key, _ in evaluated] == list(given[0].scenes) and probed == evaluated


def test_a_scene_record_keeps_the_json_line_format():
    from depthpe.evaluation.record import SceneRecord

    failed = SceneRecord("a/s", "a", "s", failure="unusable scene file: x")
    assert failed.to_json() == {"key": "a/s", "dataset": "a", "scene": "s", "failure": "unusable scene file: x",
                                "worst": []}
    scored = SceneRecord("a/t", "a", "t", frames=[0, 2], rows=[{"abs_rel": 0.5}], loss={"l1": 1.0},
                         panel_file="panel_a_t.png", panel_image=torch.zeros(1))
    line = scored.to_json()
    assert list(line) == ["key", "dataset", "scene", "loss", "frames", "rows", "panel_file", "worst"]
    again = SceneRecord.from_json(line)
    assert again.to_json() == line and again.panel_image is None
    assert SceneRecord.from_json(failed.to_json()) == failed


def test_the_views_travel_as_one_value_from_the_options_to_the_dataset(tmp_path, data):
    """--views, --seed and --manifest are declared once (ViewProtocol) and reach the dataset as one
    ViewDraw, unchanged."""
    import dataclasses

    from depthpe.config.inference import EvalConfig, ViewProtocol
    from depthpe.evaluation.heldout import ViewDraw, view_draw

    assert [f.name for f in dataclasses.fields(ViewDraw)] == [f.name for f in dataclasses.fields(ViewProtocol)]
    assert issubclass(EvalConfig, ViewProtocol)
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"scenes": {"synth/a": [0, 2, 4]}}')
    draw = view_draw(ViewProtocol(views=5, seed=7, manifest=str(manifest)))
    assert (draw.views, draw.seed) == (5, 7) and draw.manifest == {"synth/a": [0, 2, 4]}
    held_out = resolve_held_out(discover_sources(data, "val"), HeldOutProtocol(ViewDraw(3, 2)), InputSize(28))
    dataset = held_out.dataset()
    assert held_out.draw == ViewDraw(3, 2) and (dataset.views, dataset.seed) == (3, 2)


@pytest.mark.parametrize("width", [0, -14, 50])
def test_a_width_that_is_not_a_positive_multiple_of_14_is_refused_from_python_too(saved_model, width):
    """``EvalSceneSpec`` and validation reach ``model_input_size`` without the command line's check."""
    with pytest.raises(ConfigError, match=f"--image-width must be a positive multiple of 14, got {width}"):
        model_input_size(str(saved_model), None, width)
    assert model_input_size(str(saved_model), None, 56).image_width == 56


def test_the_manifest_records_the_seed_and_views_of_its_evaluation(eval_dir):
    """manifest.json (docs/evaluation.md): the draw's seed and views beside each scene's frames."""
    manifest = json.loads((eval_dir / "manifest.json").read_text())
    assert (manifest["seed"], manifest["views"]) == (0, 3)  # tests/fixtures/evaluation.py: --views 3
    assert sorted(manifest["scenes"]) == ["synth/val_000000", "synth/val_000001"]
    assert all(len(frames) == 3 and len(set(frames)) == 3 for frames in manifest["scenes"].values())


def test_the_eval_options_choose_datasets_scenes_and_the_models_training_aspect(data, tmp_path):
    """``--datasets``, ``--scenes K`` and a model trained at one aspect (H / W = 0.5 here, the scenes are
    square) reach the held-out set that `depthpe eval` runs on."""
    from depthpe.config.inference import EvalConfig
    from depthpe.evaluation.heldout import held_out_of_config
    from depthpe.model import DepthModel
    from depthpe.model.training_inputs import TrainingInputs, write_training_inputs
    from depthpe.run import RunConfig

    model = tmp_path / "model"
    DepthModel(RunConfig.from_dict({"model": dict(MICRO_MODEL)}).model_config()).save_pretrained(model)
    write_training_inputs(model, TrainingInputs(WIDTH, (0.5, 0.5), (2, 4), "all"))
    cfg = EvalConfig(model=str(model), data=str(data), out=str(tmp_path / "eval"), views=VIEWS, datasets=["more"],
                     max_scenes=2)
    held_out, warnings = held_out_of_config(cfg)
    assert held_out.scenes == ("more/val_000000", "more/val_000001") and not warnings
    item = held_out.dataset()[held_out.order[0]]
    assert tuple(item["images"].shape[-2:]) == (14, WIDTH)  # 0.5 x 28, a multiple of 14
    everything, _ = held_out_of_config(EvalConfig(model=str(model), data=str(data), out=str(tmp_path / "all"),
                                                  views=VIEWS))
    assert sorted({key.split("/")[0] for key in everything.scenes}) == ["more", "synth"]
    assert len(everything.scenes) == 3 + 5


def test_only_the_scenes_named_are_held_out_and_a_manifest_narrows_the_set(data):
    """Validation after its first manifest names its scenes (``only_scenes``: a scene added to the val
    data later is not evaluated); ``with_manifest`` keeps keys and item indices together."""
    named = {"more/val_000002", "synth/val_000004"}
    held_out = resolve_held_out(discover_sources(data, "val"), HeldOutProtocol(ViewDraw(VIEWS, 0), only_scenes=named),
                                InputSize(WIDTH, scale_reference="all"))
    assert set(held_out.scenes) == named and len(held_out.order) == 2
    full = resolve_held_out(discover_sources(data, "val"), HeldOutProtocol(ViewDraw(VIEWS, 0)),
                            InputSize(WIDTH, scale_reference="all"))
    narrowed = full.with_manifest({"synth/val_000004": [0, 1, 2]})
    assert narrowed.scenes == ("synth/val_000004",)
    dataset = narrowed.dataset()
    assert dataset.scene_key(narrowed.order[0]) == "synth/val_000004"
    assert [int(i) for i in dataset[narrowed.order[0]]["frames"]] == [0, 1, 2]


def test_a_manifest_that_is_missing_not_json_or_not_a_manifest_is_one_line(saved_model, synth_root, tmp_path, capsys):
    """--manifest is read before anything is built: each bad file is one error line, status 2, and no
    output folder (it was a JSONDecodeError traceback)."""
    from depthpe.cli import main

    (tmp_path / "cut.json").write_text('{"scenes": {')
    (tmp_path / "list.json").write_text("[1, 2]")
    cases = [(tmp_path / "nowhere.json", "cannot read it ([Errno 2] No such file or directory"),
             (tmp_path / "cut.json", "cannot read it (Expecting"),
             (tmp_path / "list.json", "not a depthpe evaluation manifest (no 'scenes' mapping)")]
    for path, message in cases:
        out = tmp_path / f"out_{path.stem}"
        assert main(["eval", "--model", str(saved_model), "--data", str(synth_root), "--out", str(out),
                     "--manifest", str(path), "--cpu"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
        assert not out.exists()
