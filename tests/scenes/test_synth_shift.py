"""Distribution shifts of the procedural scenes (`depthpe synth --shift NAME`, depthpe.scenes.synth.SHIFTS).

Each shift must change the statistic it claims relative to the default distribution, leave the
default scenes untouched, be deterministic for a seed, and write scenes that `depthpe check`, the
index reader and evaluation accept.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from depthpe.scenes import synth
from depthpe.scenes.synth import SHIFTS, SynthParams, generate_scene, scene_seed, shift_label, shift_params

V, H, W, N_SCENES, SEED = 4, 24, 24, 6, 11


def _centers(w2c: np.ndarray) -> np.ndarray:
    """(V, 3) camera centres of (V, 3, 4) world-to-camera matrices."""
    return -np.einsum("vji,vj->vi", w2c[:, :, :3], w2c[:, :, 3])


def _hfov_deg(K: np.ndarray) -> np.ndarray:
    return np.degrees(2 * np.arctan(W / 2 / K[:, 0, 0]))


@pytest.fixture(scope="module")
def scenes() -> dict[str, list[dict]]:
    """N_SCENES small val scenes of seed SEED per shift name, and of the default ("none")."""
    return {
        name: [generate_scene(scene_seed(SEED, "val", i), V, H, W, shift_params([] if name == "none" else [name]))
               for i in range(N_SCENES)]
        for name in ("none", *SHIFTS, "all")
    }


def _median_depths(outs: list[dict]) -> np.ndarray:
    return np.array([np.median(o["depth"][o["depth"] > 0]) for o in outs])


def _baseline_ratios(outs: list[dict]) -> np.ndarray:
    """Per scene: mean distance of the other camera centres to the first one / median GT depth."""
    ratios = []
    for o, med in zip(outs, _median_depths(outs)):
        c = _centers(o["w2c"])
        ratios.append(np.linalg.norm(c[1:] - c[0], axis=1).mean() / med)
    return np.array(ratios)


def _straightness(outs: list[dict]) -> np.ndarray:
    """Per scene: second / first singular value of the centred camera centres (0 on a straight line)."""
    out = []
    for o in outs:
        c = _centers(o["w2c"])
        sv = np.linalg.svd(c - c.mean(axis=0), compute_uv=False)
        out.append(sv[1] / sv[0])
    return np.array(out)


def test_names_labels_and_params():
    assert shift_params() == SynthParams() == synth.DEFAULT_PARAMS
    assert shift_label([]) is None and shift_label(["fov", "scale", "fov"]) == "scale-fov"
    assert shift_label(list(SHIFTS)) == shift_label(["all"]) == "all"
    assert shift_params(["all"]) == shift_params(list(SHIFTS)) == shift_params(["all", "fov"])
    for name, changes in SHIFTS.items():
        params = shift_params([name])
        assert params != SynthParams()
        assert {k: getattr(params, k) for k in changes} == changes
    with pytest.raises(ValueError, match="unknown shift"):
        shift_params(["zoom"])


def test_default_scenes_unchanged():
    """Values of one default scene recorded before the shifts existed (pins the default stream)."""
    out = generate_scene(scene_seed(5, "val", 1), 3, 16, 16)
    explicit = generate_scene(scene_seed(5, "val", 1), 3, 16, 16, SynthParams())
    for key in ("images", "depth", "K", "w2c"):
        np.testing.assert_array_equal(out[key], explicit[key])
    scene = out["scene"]
    np.testing.assert_allclose(scene.room_min, [-6.849609, 1.125665, -0.689855], atol=2e-6)
    assert scene.scale == pytest.approx(7.342654, abs=1e-6)
    assert [p.kind for p in scene.primitives] == ["box", "cylinder", "sphere", "sphere", "cylinder"]
    np.testing.assert_allclose(out["w2c"][:, :, 3], [[0.463528, 3.227119, -4.239938],
                                                      [2.232869, 3.017783, -3.942709],
                                                      [3.181547, 2.923438, -3.698436]], atol=2e-6)
    np.testing.assert_allclose(out["K"][:, 0, 0], [15.05335, 15.472494, 14.662789], atol=2e-6)


def test_same_seed_same_shifted_scenes(scenes):
    again = generate_scene(scene_seed(SEED, "val", 0), V, H, W, shift_params(["all"]))
    for key in ("images", "depth", "K", "w2c"):
        np.testing.assert_array_equal(scenes["all"][0][key], again[key])
    assert not np.array_equal(scenes["all"][0]["w2c"], scenes["none"][0]["w2c"])


def test_scale_shift_makes_scenes_deeper(scenes):
    default, shifted = _median_depths(scenes["none"]), _median_depths(scenes["scale"])
    assert np.median(shifted) >= 2 * np.median(default)
    for o in scenes["scale"]:
        dims = o["scene"].room_max - o["scene"].room_min
        assert 12 * 0.6 - 1e-9 <= dims[:2].max() <= 30 + 1e-9  # room scale 12-30, width U(0.6, 1) x it
        assert 3 - 1e-9 <= o["scene"].scale <= 10 + 1e-9  # objects and cameras keep the default scale


def test_baseline_shift_moves_cameras_less_relative_to_depth(scenes):
    default, shifted = _baseline_ratios(scenes["none"]), _baseline_ratios(scenes["baseline"])
    assert shifted.max() < default.min()
    assert np.median(shifted) < 0.4 * np.median(default)


def test_path_shift_puts_cameras_on_straight_lines(scenes):
    assert (_straightness(scenes["path"]) < 1e-9).all()
    assert (_straightness(scenes["none"]) > 1e-3).all()  # orbits and walks curve
    kinds = set()
    for o in scenes["path"]:
        c = _centers(o["w2c"])
        motion = (c[-1] - c[0]) / np.linalg.norm(c[-1] - c[0])
        cos = np.abs(o["w2c"][:, 2, :3] @ motion)  # optical axis (row 2 of R) vs the motion
        assert (cos > 0.95).all() or (cos < 0.3).all()  # dolly (forward) or truck (sideways)
        kinds.add("dolly" if cos[0] > 0.95 else "truck")
    assert kinds == {"dolly", "truck"}


def test_fov_shift_uses_narrow_and_wide_lenses(scenes):
    narrow = wide = 0
    for o in scenes["fov"]:
        fov = _hfov_deg(o["K"])  # 30-40 or 80-95 degrees per scene, +-3% per view
        narrow += ((fov >= 30 * 0.97 - 1e-9) & (fov <= 40 * 1.03 + 1e-9)).all()
        wide += ((fov >= 80 * 0.97 - 1e-9) & (fov <= 95 * 1.03 + 1e-9)).all()
    assert narrow + wide == N_SCENES and narrow > 0 and wide > 0
    default = np.concatenate([_hfov_deg(o["K"]) for o in scenes["none"]])
    assert ((default > 45 * 0.97 - 1e-9) & (default < 70 * 1.03 + 1e-9)).all()


def test_objects_shift_draws_more_smaller_round_objects(scenes):
    def stats(outs):
        counts = [len(o["scene"].primitives) for o in outs]
        sizes = [p.size.max() / o["scene"].scale for o in outs for p in o["scene"].primitives]
        kinds = {p.kind for o in outs for p in o["scene"].primitives}
        return np.array(counts), np.median(sizes), kinds

    counts, size, kinds = stats(scenes["objects"])
    d_counts, d_size, d_kinds = stats(scenes["none"])
    assert counts.min() >= 9 and counts.max() <= 16 and d_counts.max() <= 8
    assert size < 0.75 * d_size
    assert kinds == {"sphere", "cylinder"} and "box" in d_kinds


def test_all_combines_every_shift(scenes):
    outs = scenes["all"]
    assert (_straightness(outs) < 1e-9).all()
    assert _baseline_ratios(outs).max() < _baseline_ratios(scenes["none"]).min()
    assert np.median(_median_depths(outs)) >= 2 * np.median(_median_depths(scenes["none"]))
    assert all(len(o["scene"].primitives) >= 9 for o in outs)
    assert all(_hfov_deg(o["K"]).min() < 42 or _hfov_deg(o["K"]).min() > 77 for o in outs)


def _cli(out, *extra):
    from depthpe.cli import main

    return main(["synth", "--out", str(out), "--train-scenes", "1", "--val-scenes", "2", "--views", "3",
                 "--height", "28", "--width", "28", "--workers", "1", "--quiet", *extra])


def test_cli_writes_shifted_scenes_that_pass_check(tmp_path, capsys):
    from depthpe.scenes.format.check import check_scene
    from depthpe.scenes.format.scene_file import SceneReader, read_index

    assert _cli(tmp_path, "--shift", "fov", "--shift", "baseline") == 0
    assert '"shift": "baseline-fov"' in capsys.readouterr().out
    for split, count in (("train", 1), ("val", 2)):
        entries = read_index(tmp_path / "synth" / split)
        assert [e["scene_id"] for e in entries] == [f"{split}_shift-baseline-fov_{i:06d}" for i in range(count)]
        for e in entries:
            assert e["shift"] == "baseline-fov"
            path = tmp_path / "synth" / split / e["path"]
            with SceneReader(path) as reader:
                attrs = reader.attrs
            assert attrs["shift"] == "baseline-fov" and attrs["source"] == synth.SOURCE
            assert json.loads(attrs["synth_params"])["hfov_deg"] == [[30.0, 40.0], [80.0, 95.0]]
            report = check_scene(path, max_rel_error=0.005)
            assert report.ok, report.problems
    assert _cli(tmp_path, "--shift", "baseline", "--shift", "fov") == 0  # same shifts: resumed
    assert "0 written, 2 skipped" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        _cli(tmp_path, "--shift", "zoom")


def test_default_run_has_no_shift_fields(tmp_path):
    from depthpe.scenes.format.scene_file import SceneReader, read_index

    assert _cli(tmp_path) == 0
    for e in read_index(tmp_path / "synth" / "val"):
        assert "shift" not in e and e["scene_id"].startswith("val_0")
        with SceneReader(tmp_path / "synth" / "val" / e["path"]) as reader:
            assert "shift" not in reader.attrs and "synth_params" not in reader.attrs


def test_evaluation_accepts_shifted_scenes(tmp_path):
    """A model returning the normalized ground truth scores AbsRel 0 on a shifted set."""
    from depthpe.loader.datasets import SceneEvalDataset
    from depthpe.evaluation.heldout import HeldOutProtocol, ViewDraw, InputSize, resolve_held_out
    from depthpe.evaluation.loop import EvalOptions, evaluate
    from depthpe.evaluation.protocol import discover_sources
    from tests.helpers.models import GroundTruthModel

    synth.write_synth_dataset(tmp_path, train_scenes=0, val_scenes=2, views=3, height=28, width=28, seed=1,
                              progress=False, shift=["all"])
    sources = discover_sources(tmp_path, "val")
    items = [SceneEvalDataset(sources, views=3, image_width=28)[i] for i in range(2)]
    model = GroundTruthModel([it["depth"][None] for it in items], 1.0)
    held_out = resolve_held_out(sources, HeldOutProtocol(ViewDraw(3)), InputSize(28))
    summary = evaluate(model, held_out, EvalOptions(progress=False)).summary["synth"]
    assert summary["native"]["abs_rel"] == pytest.approx(0.0, abs=1e-6)
    assert summary["native"]["n_scenes"] == 2
