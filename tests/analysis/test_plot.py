"""``depthpe plot``: the smoothing formula by hand, and the figures written from val_history.jsonl files."""

import json
import math

import numpy as np
import pytest

from depthpe.cli import main
from depthpe.config import ConfigError
from depthpe.analysis.plotting import ema, read_history, run_plot, series


def test_ema_equals_a_hand_computation():
    steps, values = [500, 1000, 3000, 3500], [4.0, 2.0, 1.0, 3.0]
    a = [0.95 ** 0.5, 0.95 ** 0.5, 0.95 ** 2, 0.95 ** 0.5]  # gaps 500 (from step 0), 500, 2000, 500
    m = c = 0.0
    expected = []
    for ai, x in zip(a, values):
        m, c = ai * m + (1 - ai) * x, ai * c + (1 - ai)
        expected.append(m / c)
    assert np.allclose(ema(steps, values), expected, rtol=1e-12)
    assert expected[1] == pytest.approx((0.95 ** 0.5 * (1 - 0.95 ** 0.5) * 4 + (1 - 0.95 ** 0.5) * 2) / (1 - 0.95))
    assert ema(steps, values)[0] == 4.0  # bias-corrected: the first value is kept
    # a first point at step 0 counts from step -1000; regular steps: the usual debiased EMA
    assert np.allclose(ema([0, 1000, 2000], [1.0, 2.0, 3.0]),
                       [1.0, (0.95 * 0.05 * 1 + 0.05 * 2) / (1 - 0.95 ** 2),
                        (0.95 ** 2 * 0.05 * 1 + 0.95 * 0.05 * 2 + 0.05 * 3) / (1 - 0.95 ** 3)])
    smoothed = ema([1000, 2000, 3000], [1.0, math.nan, 3.0])
    a = 0.95 ** 2  # a skipped NaN: the next gap runs from step 1000
    assert math.isnan(smoothed[1]) and smoothed[2] == pytest.approx((a * 0.05 * 1 + (1 - a) * 3) / (a * 0.05 + 1 - a))


def history_line(step, dataset, abs_rel, loss=None):
    line = {"step": step, "dataset": dataset,
            "metrics": {"native": {"abs_rel": abs_rel, "delta1": 1 - abs_rel, "n_scenes": 4, "n_images": 8},
                        "scene_aligned": {"abs_rel": abs_rel / 2, "delta1": 0.9, "n_scenes": 4, "n_images": 8}}}
    if loss is not None:
        line["loss"] = {"l1": loss / 2, "gradient": loss / 2, "total": loss}
    return json.dumps(line)


def write_run(root, name, pe, seed, lines):
    from depthpe.run import RunConfig, save_run_config
    from tests.helpers.training import MICRO_MODEL

    run = root / name
    run.mkdir()
    save_run_config(RunConfig.from_dict({"seed": seed, "model": {**MICRO_MODEL, "global_pe": pe}}), run / "config.yaml")
    (run / "val_history.jsonl").write_text("\n".join(lines) + "\n")
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    out = []
    for pe in ("rope", "prope"):
        for seed in (0, 1):
            lines = [history_line(s, d, 1.0 / (1 + s / 1000 + seed), loss=2.0 - s / 1000)
                     for s in (1000, 2000, 3000) for d in ("co3d", "synth")]
            out.append(write_run(root, f"{pe}_s{seed}", pe, seed, lines))
    return out


def test_plot_writes_png_and_svg_with_one_panel_per_metric(runs, tmp_path, capsys):
    figures = run_plot([str(r) for r in runs], tmp_path, metrics=["abs_rel", "delta1", "loss"],
                       rows=["native", "scene_aligned"])
    assert [f.dataset for f in figures] == ["co3d", "synth"]
    for figure in figures:
        assert figure.panels == ["native abs_rel", "scene_aligned abs_rel", "native delta1", "scene_aligned delta1",
                                 "validation loss"]
        assert figure.lines == 4  # one smoothed line per run
        assert figure.png.read_bytes().startswith(b"\x89PNG") and figure.png.stat().st_size > 1000
        assert b"<svg" in figure.svg.read_bytes()[:1000]
    assert main(["plot", *map(str, runs), "--metrics", "abs_rel", "loss.l1", "--out", str(tmp_path / "cli")]) == 0
    assert "(2 panels)" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "cli").iterdir() if not p.name.startswith(".")) == [
        "curves_co3d.png", "curves_co3d.svg", "curves_synth.png", "curves_synth.svg"]


def test_history_later_line_wins_and_missing_loss(tmp_path):
    lines = [history_line(1000, "synth", 0.5), history_line(2000, "synth", 0.4), "{torn",
             history_line(2000, "synth", 0.3), history_line(1500, "synth", 0.45)]
    run = write_run(tmp_path, "r", "rope", 0, lines)
    steps, values = series(read_history(run), "synth", "abs_rel")
    assert steps.tolist() == [1000, 1500, 2000] and values.tolist() == [0.5, 0.45, 0.3]
    steps, values = series(read_history(run), "synth", "loss")
    assert np.isnan(values).all()  # no loss recorded: NaN, the panel stays empty
    figure, = run_plot([str(run)], tmp_path / "out", metrics=["abs_rel", "loss"])
    assert figure.lines == 1 and len(figure.panels) == 2


def test_plot_errors(tmp_path, capsys):
    with pytest.raises(ConfigError, match="not a run folder"):
        run_plot([str(tmp_path)], tmp_path / "out")
    run = write_run(tmp_path, "r", "rope", 0, [history_line(1000, "synth", 0.5)])
    (run / "val_history.jsonl").unlink()
    assert main(["plot", str(run), "--out", str(tmp_path / "out")]) == 2
    assert "no val_history.jsonl" in capsys.readouterr().err
