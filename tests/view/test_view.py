"""depthpe view without a browser: the points it draws (filters, budget, GT layers), loading a
predict folder and a held-out scene, the settings' errors, and the viser server in process."""

from __future__ import annotations


import numpy as np
import pytest

from depthpe.cli import main
from depthpe.view.config import ViewConfig
from depthpe.view.scene import Selection, ViewFrame, ViewScene, select_points, side_offset, subsample
from tests.helpers.view import expected_count






def toy_scene(with_gt=True) -> ViewScene:
    """Two 4x5 views looking down +z from x = 0 and x = 1; GT 2, prediction 2.2 except one pixel."""
    frames = []
    for i in range(2):
        w2c = np.concatenate([np.eye(3), [[-float(i)], [0.0], [0.0]]], axis=1)
        depth = np.full((4, 5), 2.2, np.float32)
        depth[0, 0] = 0.0  # invalid prediction
        conf = np.arange(20, dtype=np.float32).reshape(4, 5) + 1
        frames.append(ViewFrame(name=f"v{i}", image=np.full((4, 5, 3), 100 * i, np.uint8),
                                K=np.array([[5.0, 0, 2.5], [0, 5.0, 2.0], [0, 0, 1]]), w2c=w2c, depth=depth,
                                conf=conf, gt=np.full((4, 5), 2.0, np.float32) if with_gt else None))
    return ViewScene(title="toy", frames=frames, scales={"native": 1.0, "scene_aligned": 2.0 / 2.2})


def test_filters_and_budget_count_exactly():
    s = toy_scene()
    assert select_points(s, Selection()).total == 2 * 19
    assert select_points(s, Selection(conf_threshold=11)).total == 2 * 10  # conf 11..20
    assert select_points(s, Selection(views=(False, True))).total == 19
    capped = select_points(s, Selection(max_points=7))
    assert capped.shown == 7 and capped.total == 38 and capped.points.dtype == np.float32
    assert list(subsample(10, 0)) == list(range(10)) and len(set(subsample(1000, 50, seed=3))) == 50


def test_gt_layers_alignment_and_colours():
    s = toy_scene()
    both = select_points(s, Selection(source="side by side"))
    assert both.total == 2 * 19 + 2 * 20
    shift = side_offset(s)
    assert shift[0] > 1.0 and shift[1] == shift[2] == 0.0
    aligned = select_points(s, Selection(alignment="scene_aligned"))
    np.testing.assert_allclose(aligned.points[:, 2], 2.0, rtol=1e-5)  # scaled onto the GT depth
    native = select_points(s, Selection(coloring="error"))
    assert len(np.unique(native.colors, axis=0)) == 1  # one AbsRel (0.1) everywhere
    with pytest.raises(ValueError, match="needs ground truth"):
        select_points(toy_scene(with_gt=False), Selection(source="overlaid"))


def ramp_scene(with_gt=True) -> ViewScene:
    """``toy_scene`` with depth varying over the image: GT 1..3 along x, prediction 1.1 x GT."""
    s = toy_scene(with_gt)
    ramp = np.tile(np.linspace(1.0, 3.0, 5, dtype=np.float32), (4, 1))
    for f in s.frames:
        f.depth = 1.1 * ramp
        f.gt = ramp.copy() if with_gt else None
    s.scales = {"native": 1.0, "scene_aligned": 1 / 1.1}
    return s


def test_depth_colours_share_one_range_for_prediction_and_gt():
    """Colour by depth: one range for both layers, so the aligned prediction has the GT's colours
    pixel for pixel and the native one (10 % deeper) does not; near and far differ."""
    s = ramp_scene()
    n = 2 * 20  # every pixel of both views is valid in both layers
    aligned = select_points(s, Selection(source="side by side", coloring="depth", alignment="scene_aligned"))
    np.testing.assert_array_equal(aligned.colors[:n], aligned.colors[n:])
    assert len(np.unique(aligned.colors[:5], axis=0)) == 5  # the five depths of a row: five colours
    native = select_points(s, Selection(source="side by side", coloring="depth"))
    assert (native.colors[:n] != native.colors[n:]).any(axis=1).sum() >= n // 2
    from depthpe.report.viz import colorize_depth, depth_range

    gts = np.stack([f.gt for f in s.frames]).astype(np.float64)
    expected = colorize_depth(s.frames[0].gt, None, *depth_range(gts))  # the GT's range, not the prediction's
    np.testing.assert_array_equal(native.colors[n:n + 20], expected.reshape(-1, 3))
    alone = select_points(ramp_scene(with_gt=False), Selection(coloring="depth"))  # the prediction's own range
    assert len(np.unique(alone.colors[:5], axis=0)) == 5


def test_load_prediction_dir_matches_the_files(pred_dir):
    from depthpe.view.loaders import load_prediction_dir

    s = load_prediction_dir(pred_dir)
    assert [f.name for f in s.frames] == ["v0.png", "v1.png", "v2.png", "v3.png"]
    assert s.frames[0].image.shape == (28, 42, 3) and s.frames[0].image.std() > 0  # the input, not grey
    assert select_points(s, Selection()).total == expected_count(pred_dir)
    with pytest.raises(ValueError, match="no prediction.json"):
        load_prediction_dir(pred_dir / "nothing")


def test_eval_scene_is_the_evaluated_scene(saved_model, synth_root):
    from depthpe.evaluation.scene import EvalSceneSpec, predict_eval_scene, scene_metrics
    from depthpe.metrics import scene_rows

    spec = EvalSceneSpec(model=str(saved_model), data=str(synth_root), scene="val_000001", views=3, image_width=42)
    predicted = predict_eval_scene(spec)
    assert (predicted.dataset, predicted.scene, len(predicted.frames)) == ("synth", "val_000001", 3)
    metrics, scales = scene_metrics(predicted)
    rows = scene_rows(predicted.depth, predicted.gt, predicted.gt > 0, modes=("native",))
    assert metrics["native"]["abs_rel"] == pytest.approx(np.mean([r["abs_rel"] for r in rows]))
    assert list(metrics) == ["native", "scene_aligned", "image_aligned"] and scales["native"] == 1.0
    with pytest.raises(ValueError, match="no scene named 'nope'"):
        predict_eval_scene(EvalSceneSpec(model=str(saved_model), data=str(synth_root), scene="nope", views=3))


@pytest.mark.parametrize("argv, message", [
    ([], "nothing to show"),
    (["some_dir", "--data", "root"], "not both"),
    (["--model", "m"], "go together"),
    (["some_dir", "--port", "70000"], "--port must be"),
    (["some_dir", "--min-valid-fraction", "1.5"], "--min-valid-fraction must be in [0, 1], got 1.5"),
])
def test_bad_settings_are_one_line_errors(argv, message, capsys):
    assert main(["view", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_not_a_prediction_folder_is_an_error(tmp_path, capsys):
    pytest.importorskip("viser", reason="the view extra (viser) is not installed")
    assert main(["view", str(tmp_path)]) == 2
    assert "no prediction.json" in capsys.readouterr().err


def test_viewer_serves_and_saves(pred_dir, tmp_path):
    pytest.importorskip("viser", reason="the view extra (viser) is not installed")
    from depthpe.prediction.files import read_ply
    from depthpe.view.app import Viewer
    from depthpe.view.loaders import load_prediction_dir
    from tests.helpers.browser import free_port

    viewer = Viewer(load_prediction_dir(pred_dir), port=free_port(), max_points=500, save_path=tmp_path / "f.ply")
    try:
        assert viewer.last.shown == 500 and viewer.last.total == expected_count(pred_dir)
        assert "points shown: 500 of" in viewer._controls["status"].content
        viewer._controls["views"][0].value = False  # a toggle redraws through its callback
        assert viewer.last.total == expected_count(pred_dir, views=(False, True, True, True))
        points, colors = read_ply(viewer.save())
        assert len(points) == viewer.last.total and colors.dtype == np.uint8  # all filtered points, no budget
    finally:
        viewer.stop()
