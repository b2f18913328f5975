"""``depthpe study correspondence`` end to end on the micro model and the synthetic fixture data
(3 train and 2 val scenes of 4 views, 56 x 56 px: 4 x 4 patches), and its evaluation settings."""

from __future__ import annotations

import contextlib
import json
from types import SimpleNamespace

import pytest
import torch

from depthpe.studies.correspondence import evaluation as correspondence_eval
from depthpe.studies.correspondence.evaluation import zoom_center
from depthpe.cli import main

MICRO = ["--image-width", "56", "--embed-dim", "32", "--num-heads", "2", "--num-blocks", "2", "--steps", "2",
         "--batch-size", "2", "--train-draws", "1", "--eval-steps", "0", "1"]


def test_bench_runs_end_to_end_and_writes_the_results(synth_root, tmp_path, capsys):
    out = tmp_path / "bench"
    status = main(["bench", "correspondence", "--data", str(synth_root), "--out", str(out), "--pe", "prope", *MICRO,
                   "--eval-views", "3", "--eval-zooms", "1.5", "--eval-rotation-noise", "5",
                   "--eval-translation-noise", "0.1"])
    assert status == 0
    result = json.loads((out / "results.json").read_text())
    assert set(result) == {"meta", "runs", "summary"}
    assert result["meta"]["pe"] == "prope" and result["meta"]["grid"] == [4, 4]
    names = ["base", "views3", "zoom1.5", "rotation5deg", "translation0.1"]
    assert list(result["summary"]) == names
    [run] = result["runs"]
    assert [p["step"] for p in run["curve"]] == [0, 1, 2]
    assert run["curve"][0]["train_loss"] is None and run["curve"][-1]["train_loss"] > 0
    for point in run["curve"]:
        assert list(point["settings"]) == names
        for rows in point["settings"].values():
            assert [r["layer"] for r in rows] == [0, 1]
            for row in rows:
                assert row["matches"] > 0
                assert 0 <= row["top1"] <= row["within1"] <= 1
                for r in (0, 1):
                    assert row[f"lift_r{r}"] > 0
                    assert row[f"lift_minus_same_r{r}"] == pytest.approx(
                        row[f"lift_r{r}"] - row[f"same_position_lift_r{r}"])
    more_views = run["curve"][0]["settings"]["views3"][0]["matches"]
    assert more_views > run["curve"][0]["settings"]["base"][0]["matches"]  # 6 view pairs instead of 2
    assert "| base | 0 |" in (out / "summary.md").read_text() and "| base | 0 |" in capsys.readouterr().out


def test_missing_data_is_one_line(tmp_path, capsys):
    status = main(["bench", "correspondence", "--data", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o"), *MICRO])
    assert status == 2
    assert "index.json not found" in capsys.readouterr().err


def test_bad_options_are_one_line(synth_root, tmp_path, capsys):
    status = main(["bench", "correspondence", "--data", str(synth_root), "--out", str(tmp_path / "o"),
                   "--eval-zooms", "0.5"])
    assert status == 2 and "--eval-zooms values must be >= 1" in capsys.readouterr().err


def _plane_views():
    """Two 28 x 28 views of the plane z = 2 (camera 1 moved and turned a little), float64."""
    K = torch.tensor([[30.0, 0, 13.5], [0, 30.0, 13.5], [0, 0, 1]], dtype=torch.float64).expand(1, 2, 3, 3)
    w2c = torch.eye(4, dtype=torch.float64).repeat(1, 2, 1, 1)
    w2c[0, 1, 0, 3] = -0.3
    depth = torch.full((1, 2, 28, 28), 2.0, dtype=torch.float64)
    return K, w2c, depth


def test_zoom_keeps_the_geometry_consistent():
    """Zoom 2 of a 28 x 28 view whose depth at column u is u: the zoomed K maps every pixel's ray back
    to the original pixel whose depth the zoomed depth map holds there (nearest)."""
    K, _, _ = _plane_views()
    depth = torch.arange(28, dtype=torch.float64).expand(1, 2, 28, 28) + 1.0
    images = torch.rand(1, 2, 3, 28, 28)
    z_images, z_K, z_depth, z_valid = zoom_center(images, K, depth, depth > 0, 2.0)
    assert z_images.shape == images.shape and z_valid.all()
    torch.testing.assert_close(z_K[..., 0, 0], 2 * K[..., 0, 0])
    torch.testing.assert_close(z_K[..., :2, 2], K[..., :2, 2])  # the image centre stays the centre
    u = torch.arange(28, dtype=torch.float64)
    original = (u - z_K[0, 0, 0, 2]) / z_K[0, 0, 0, 0] * K[0, 0, 0, 0] + K[0, 0, 0, 2]
    assert torch.equal(z_depth[0, 0, 5], torch.round(original) + 1.0)


class _OffByOneAttention:
    """A stand-in for the model in ``evaluate_setting``: one global layer, 1 special token, 14-px
    patches, whose attention puts all of every query's weight on one key patch of the other view:
    the true target of the analytic stereo pair of tests/geometry/test_correspondence.py (view 0 patch
    (r, c) -> view 1 (r, c - 2), view 1 (r, c) -> view 0 (r, c + 2)) moved one column towards the
    query's own column. It ignores the cameras it is given."""

    config = SimpleNamespace(patch_size=14, num_special_tokens=1)

    def __init__(self, monkeypatch):
        self.on_layer = None

        @contextlib.contextmanager
        def capture(model, on_layer):
            model.on_layer = on_layer
            yield

        monkeypatch.setattr(correspondence_eval, "capture_global_attention", capture)

    def aggregator(self, images, K, w2c):
        B, S, T = images.shape[0], 2, 9
        probs = torch.zeros(B, 1, S * T, S * T)
        for view, step in ((0, -1), (1, 1)):
            for r in range(2):
                for c in range(4):
                    key = min(max(c + step, 0), 3)  # one patch off a target two columns away
                    probs[:, 0, view * T + 1 + 4 * r + c, (1 - view) * T + 1 + 4 * r + key] = 1.0
        self.on_layer(0, probs, None)


def _stereo_sample():
    """The stereo pair of tests/geometry/test_correspondence.py as one sample of evaluate_setting."""
    depth = torch.full((2, 28, 56), 2.0)
    K = torch.tensor([[56.0, 0, 27.5], [0, 56.0, 13.5], [0, 0, 1]]).expand(2, 3, 3)
    w2c = torch.eye(4).repeat(2, 1, 1)
    w2c[1, 0, 3] = -1.0
    return {"images": torch.zeros(2, 3, 28, 56), "K": K, "w2c": w2c, "depth": depth, "valid": depth > 0}


def _layer_row(monkeypatch, setting):
    rows = correspondence_eval.evaluate_setting(_OffByOneAttention(monkeypatch), [_stereo_sample()], setting,
                                                radii=(0, 1), depth_tolerance=0.05, seed=0)
    assert len(rows) == 1
    return rows[0]


def test_attention_one_patch_off_is_a_within_1_hit_not_a_top_1_hit(monkeypatch):
    row = _layer_row(monkeypatch, correspondence_eval.Setting("base", 2))
    assert row["matches"] == 8  # two of four columns per view and row
    assert row["top1"] == 0.0 and row["within1"] == 1.0


def test_camera_noise_leaves_the_true_matches_alone(monkeypatch):
    base = _layer_row(monkeypatch, correspondence_eval.Setting("base", 2))
    for setting in (correspondence_eval.Setting("rotation20deg", 2, rotation_deg=20.0),
                    correspondence_eval.Setting("translation0.5", 2, translation=0.5)):
        noisy = _layer_row(monkeypatch, setting)
        assert {k: noisy[k] for k in ("matches", "top1", "within1", "scene_matches")} == \
               {k: base[k] for k in ("matches", "top1", "within1", "scene_matches")}, setting.name


def test_the_curve_points_default_to_quarters_and_always_end_at_the_last_step():
    from depthpe.studies.correspondence.config import CorrespondenceConfig

    assert CorrespondenceConfig(data="d", out="o", steps=300).checkpoints() == [0, 75, 150, 225, 300]
    assert CorrespondenceConfig(data="d", out="o", steps=300, eval_steps=[10]).checkpoints() == [10, 300]
    with pytest.raises(ValueError, match=r"--eval-steps values must be in \[0, --steps = 300\]"):
        CorrespondenceConfig(data="d", out="o", steps=300, eval_steps=[301])


def test_urope_ablations_and_plucker_reach_the_model():
    import pytest

    from depthpe.studies.correspondence.runner import build_model
    from depthpe.studies.correspondence.config import CorrespondenceConfig

    cfg = CorrespondenceConfig(data="d", out="o", pe="urope", anchors=1, anchor_assignment="channels", plucker=True,
                               embed_dim=32, num_heads=2, num_blocks=2)
    assert cfg.pe_options() == {"num_anchors": 1, "anchor_assignment": "channels"}
    model = build_model(cfg, seed=0)
    assert model.config.pe_options == {"num_anchors": 1, "anchor_assignment": "channels"} and model.config.plucker
    with pytest.raises(ValueError, match="--anchors and --anchor-assignment are options of --pe urope"):
        CorrespondenceConfig(data="d", out="o", pe="rope", anchors=1)
