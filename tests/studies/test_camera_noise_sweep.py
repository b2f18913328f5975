"""`depthpe study camera-noise`: every model at every level on one manifest, the table that
`depthpe compare SWEEP` prints, the figure of `depthpe plot SWEEP`, resuming, and one-line errors;
the table's "vs first level" on evaluation folders written by hand with known per-scene AbsRel
(each group against its own first level; noise that makes an encoding worse is positive)."""

from __future__ import annotations

import contextlib
import csv
import io
import json

import pytest
import torch

from depthpe.analysis.compare import resolve_input
from depthpe.studies.camera_noise.runner import CameraNoiseSweepConfig, model_labels
from depthpe.studies.camera_noise.sweep import NoiseSweep, sweep_result
from depthpe.cli import main
from tests.helpers.compare import SCENES, write_run
from tests.helpers.training import MICRO_MODEL

EVAL_ARGS = ["--views", "3", "--image-width", "42", "--cpu", "--bootstrap", "200"]
LEVELS = ["--rotation-levels", "0", "5", "--translation-levels", "0", "0.2"]


def _save(root, name: str, pe: str):
    """The micro model with ``pe`` in its global attention (random weights) in ``root/name/final``."""
    from depthpe.model import DepthModel
    from depthpe.run import RunConfig

    torch.manual_seed(0)
    model = DepthModel(RunConfig.from_dict({"model": {**MICRO_MODEL, "global_pe": pe}}).model_config())
    path = root / name / "final"
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, synth_root):
    """A finished sweep of a RoPE and a PRoPE model at 2 levels (no noise; 5 degrees + 0.2 baselines)."""
    root = tmp_path_factory.mktemp("sweep")
    models = [_save(root, "rope_s0", "rope"), _save(root, "prope_s0", "prope")]
    out = root / "out"
    torch.set_num_threads(1)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["bench", "camera-noise", *map(str, models), "--data", str(synth_root), "--out", str(out),
                     *LEVELS, *EVAL_ARGS])
    assert code == 0
    PRINTED["sweep"] = printed.getvalue()
    return out, models


PRINTED: dict[str, str] = {}  # what the sweep fixture's command printed


def test_the_sweep_names_only_the_folders_it_wrote(sweep):
    out, _ = sweep
    evals = [p for p in out.rglob("summary.json") if (p.parent / "metrics_per_image.csv").exists()]
    assert evals and not any((p.parent / "panels").exists() or (p.parent / "worst").exists() for p in evals)
    wrote = [line for line in PRINTED["sweep"].splitlines() if line.startswith("wrote ") and "summary.md" in line]
    assert len(wrote) == len(evals)
    assert not [line for line in wrote if "panels/" in line or "worst/" in line], wrote


def _native(eval_dir) -> list[str]:
    with open(eval_dir / "metrics_per_image.csv") as f:
        return [r["abs_rel"] for r in csv.DictReader(f) if r["mode"] == "native"]


def test_every_model_is_evaluated_at_every_level_on_one_manifest(sweep):
    out, _ = sweep
    plan = json.loads((out / "sweep.json").read_text())
    assert [m["label"] for m in plan["models"]] == ["rope_s0", "prope_s0"]
    assert plan["levels"] == [{"rotation_deg": 0.0, "translation": 0.0, "focal": 0.0},
                              {"rotation_deg": 5.0, "translation": 0.2, "focal": 0.0}]
    scenes = {json.dumps(json.loads((out / e / "manifest.json").read_text())["scenes"], sort_keys=True)
              for m in plan["models"] for e in m["evals"]}
    assert len(scenes) == 1
    noisy = json.loads((out / "prope_s0" / "level_1" / "summary.json").read_text())["meta"]
    assert noisy["camera_noise"] == {"rotation_deg": 5.0, "translation": 0.2, "focal": 0.0, "seed": 0}
    assert "camera_noise" not in json.loads((out / "prope_s0" / "level_0" / "summary.json").read_text())["meta"]


def test_rope_ignores_the_noise_and_prope_does_not(sweep):
    out, _ = sweep
    assert _native(out / "rope_s0" / "level_0") == _native(out / "rope_s0" / "level_1")
    assert _native(out / "prope_s0" / "level_0") != _native(out / "prope_s0" / "level_1")
    result = json.loads((out / "compare.json").read_text())["result"]
    rope, prope = result["datasets"]["synth"]["rope"], result["datasets"]["synth"]["prope"]
    assert rope[1]["vs_first_level"]["mean"] == 0.0
    assert prope[1]["vs_first_level"]["mean"] != 0.0
    # the table's numbers are the evaluations' own
    summary = json.loads((out / "prope_s0" / "level_1" / "summary.json").read_text())["summary"]["synth"]
    assert prope[1]["stats"]["native_abs_rel"]["mean"] == pytest.approx(summary["native"]["abs_rel"], rel=1e-12)
    # against the reference (the first group, rope) at the same level: rope-only equals prope - rope
    assert prope[0]["vs_reference"]["n_scenes"] == 2 and result["reference"] == "rope"


def test_compare_and_plot_read_the_sweep_folder(sweep, tmp_path, capsys):
    out, _ = sweep
    assert (out / "report.html").is_file() and (out / "noise_synth.png").is_file()
    capsys.readouterr()
    assert main(["compare", str(out), "--bootstrap", "200"]) == 0
    printed = capsys.readouterr().out
    assert printed.strip() == (out / "compare.md").read_text().strip()
    assert "| prope | 5° / 0.2 / 0 | 1 |" in printed
    assert main(["plot", str(out), "--out", str(tmp_path / "plots")]) == 0
    line = capsys.readouterr().out
    assert (tmp_path / "plots" / "noise_synth.png").stat().st_size > 1000
    assert "(2 panels)" in line  # native abs_rel and delta1; the validation loss has no place in a sweep


def test_rerun_resumes_without_evaluating_again(sweep, synth_root, capsys):
    out, models = sweep
    before = (out / "prope_s0" / "level_1" / "metrics_per_image.csv").read_bytes()
    capsys.readouterr()
    assert main(["bench", "camera-noise", *map(str, models), "--data", str(synth_root), "--out", str(out),
                 *LEVELS, *EVAL_ARGS]) == 0
    printed = capsys.readouterr().out
    assert printed.count("already holds a complete evaluation") == 4
    assert (out / "prope_s0" / "level_1" / "metrics_per_image.csv").read_bytes() == before


def test_an_unfinished_sweep_and_a_mix_of_kinds_are_one_line(sweep, tmp_path, capsys):
    import shutil

    out, _ = sweep
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    shutil.rmtree(broken / "prope_s0" / "level_1")
    capsys.readouterr()
    assert main(["compare", str(broken)]) == 2
    err = capsys.readouterr().err.strip()
    assert "prope_s0 at level 1 is missing" in err and "rerun the same" in err and len(err.splitlines()) == 1
    assert main(["compare", str(out), str(out / "rope_s0" / "level_0")]) == 2
    assert "folders of one kind" in capsys.readouterr().err


def _edited_sweep(out, folder, edit):
    """A copy of the sweep ``out`` in ``folder`` whose sweep.json ``edit(doc)`` changed (or replaced: its return)."""
    import shutil

    shutil.copytree(out, folder)
    doc = json.loads((folder / "sweep.json").read_text())
    changed = edit(doc)
    (folder / "sweep.json").write_text(changed if isinstance(changed, str) else json.dumps(doc))
    return str(folder)


def test_a_damaged_sweep_file_other_levels_and_bad_options_are_one_line(sweep, tmp_path, capsys):
    out, _ = sweep

    def rename_model(doc):
        doc["models"][0]["label"] = "../elsewhere"

    def other_seed(doc):
        doc["noise_seed"] = doc["noise_seed"] + 1

    cases = [([_edited_sweep(out, tmp_path / "cut", lambda doc: '{"levels": ')], "not a camera-noise sweep file"),
             ([_edited_sweep(out, tmp_path / "hostile", rename_model)],
              "model '../elsewhere' is not a safe folder name or does not have one evaluation per level (2)"),
             ([str(out), _edited_sweep(out, tmp_path / "seed", other_seed)],
              "other noise levels or seed than"),
             ([str(out), "--reference", "gta"], "--reference 'gta': no such group (groups: "),
             ([str(out), "--bootstrap", "0"], "--bootstrap must be at least 1, got 0")]
    capsys.readouterr()
    for args, message in cases:
        assert main(["compare", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and err.count("\n") == 1, (args, err)


def test_level_lists_must_match_and_labels_are_safe_and_unique():
    with pytest.raises(ValueError, match="same number of levels"):
        CameraNoiseSweepConfig(model=["m"], data="d", out="o", rotation_levels=[0, 1, 2], translation_levels=[0, 1])
    with pytest.raises(ValueError, match="--rotation-levels must be at most 180"):
        CameraNoiseSweepConfig(model=["m"], data="d", out="o", rotation_levels=[0, 200], translation_levels=[0])
    cfg = CameraNoiseSweepConfig(model=["m"], data="d", out="o", rotation_levels=[0, 2], translation_levels=[0.1])
    assert cfg.levels() == [{"rotation_deg": 0.0, "translation": 0.1, "focal": 0.0},
                            {"rotation_deg": 2.0, "translation": 0.1, "focal": 0.0}]
    labels = [label for label, _ in model_labels(["runs/a/final", "other/a/final", "org/b c", "../.."])]
    assert labels[:2] == ["a", "a-2"]
    assert all("/" not in label and label not in ("", ".", "..") for label in labels)
    assert len(set(labels)) == 4


NOISE_LEVELS = [{"rotation_deg": 0.0, "translation": 0.0, "focal": 0.0},
                {"rotation_deg": 5.0, "translation": 0.1, "focal": 0.1}]


def _hand_sweep(root) -> NoiseSweep:
    """rope (the reference): the same AbsRel at both levels; prope: 0.25 worse than rope at level 0
    and 1.0 worse again at level 1 (per scene, both images alike)."""
    rope = {scene: 2.0 + 0.5 * i for i, scene in enumerate(SCENES)}
    prope = [{scene: value + 0.25 + level for scene, value in rope.items()} for level in (0, 1)]
    evals = []
    for level in (0, 1):
        items = []
        for pe, values in (("rope", rope), ("prope", prope[level])):
            run = write_run(root, f"{pe}_level{level}", seed=0, config={"model.global_pe": pe}, summary={},
                            images={scene: [v, v] for scene, v in values.items()})
            items.append(resolve_input(str(run / "eval")))
        evals.append(items)
    return NoiseSweep([root], NOISE_LEVELS, 0, evals)


def test_vs_first_level_is_each_groups_own_first_level_with_worse_positive(tmp_path):
    result = sweep_result(_hand_sweep(tmp_path), n_boot=50)
    assert result["reference"] == "rope"
    table = result["datasets"]["synth"]
    assert table["prope"][0]["vs_first_level"]["mean"] == pytest.approx(0.0)  # itself, not rope
    assert table["prope"][1]["vs_first_level"]["mean"] == pytest.approx(1.0)  # worse with noise: > 0
    assert table["rope"][1]["vs_first_level"]["mean"] == pytest.approx(0.0)
    assert table["prope"][0]["vs_reference"]["mean"] == pytest.approx(0.25)
    assert table["prope"][1]["vs_reference"]["mean"] == pytest.approx(1.25)
