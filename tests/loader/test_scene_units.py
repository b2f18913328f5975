"""One scene in mm, m or km gets the same verdicts: ``depthpe check``, evaluation's normalization
(``SceneEvalDataset``) and prediction's (``predict_depth``) test camera motion relative to the
scene, never against an absolute floor; and ``write_scene`` refuses depth its dtype cannot hold
instead of changing it silently."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from depthpe.scenes.format.check import check_scene
from depthpe.loader.config import SourceConfig
from depthpe.loader.datasets import SceneEvalDataset
from depthpe.scenes.format.scene_file import SceneReader, write_index, write_scene
from depthpe.geometry import DegenerateSceneError, normalize_scene
from depthpe.model.inference import predict_depth
from tests.helpers.scenes import plane_scene

SCALES = (1e-6, 1.0, 1e3)  # km stored in units of 1e-6, metres, millimetres


class _ConstantDepth(torch.nn.Module):
    """A stand-in model: depth 1 in the normalized frame, so predict_depth returns the scale."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def forward(self, images, K, w2c):
        return {"depth": torch.ones(images.shape[:2] + images.shape[3:]) + self.weight}


def _write(root, scene: dict, scale: float, name: str = "s0", **kwargs) -> str:
    """``scene`` with depth and translations times ``scale``, as ROOT/units/val/<name>.h5."""
    w2c = scene["w2c"].copy()
    w2c[:, :, 3] *= scale
    split_dir = root / "units" / "val"
    entry = write_scene(split_dir / f"{name}.h5", images=scene["images"], depth=scene["depth"] * scale, K=scene["K"],
                        w2c=w2c, dataset="units", scene_id=name, split="val", metric=False, depth_units="scene",
                        **{"depth_dtype": "float32", **kwargs})
    write_index(split_dir, [entry], dataset="units", split="val")
    return str(split_dir / f"{name}.h5")


def _verdicts(path: str, root) -> dict:
    """What check, evaluation's normalization and prediction's normalization make of one scene,
    with the numbers that must not depend on its unit (normalized cameras and depth, scale / unit)."""
    report = check_scene(path)
    item = SceneEvalDataset([SourceConfig(name="units", root=str(root), split="val")], views=4, image_width=28)[0]
    with SceneReader(path) as reader:
        K, w2c = reader.read_cameras()
    images = torch.zeros(1, len(w2c), 3, 14, 14)
    try:
        scale = float(predict_depth(_ConstantDepth(), images, torch.from_numpy(K)[None], torch.from_numpy(w2c)[None])
                      ["scale"][0])
    except DegenerateSceneError:
        scale = None
    return {"check": [_words(p) for p in report.problems], "eval": _words(item["error"]), "predict": scale,
            "w2c": item.get("w2c"), "depth": item.get("depth")}


def _words(message: str | None) -> str | None:
    """A message without its numbers (they are in the scene's unit)."""
    return None if message is None else re.sub(r"\d[\d.e+-]*", "N", message)


def _same_verdicts(runs: dict) -> None:
    base = runs[1.0]
    for k, run in runs.items():
        assert run["check"] == base["check"], k
        assert run["eval"] == base["eval"], k
        assert (run["predict"] is None) == (base["predict"] is None), k
        if base["predict"] is not None:
            assert run["predict"] / k == pytest.approx(base["predict"], rel=1e-9)
        if base["eval"] is None:
            torch.testing.assert_close(run["w2c"], base["w2c"], atol=1e-5, rtol=0)
            torch.testing.assert_close(run["depth"], base["depth"], rtol=1e-5, atol=0)


def test_a_moving_scene_is_usable_in_every_unit(tmp_path):
    scene = plane_scene(radius=0.1)  # mean camera distance about 0.6: 6e-7 at the smallest scale
    runs = {k: _verdicts(_write(tmp_path / f"x{k}", scene, k), tmp_path / f"x{k}") for k in SCALES}
    assert runs[1.0]["check"] == [] and runs[1.0]["eval"] is None and runs[1.0]["predict"] > 0
    _same_verdicts(runs)


def test_cameras_that_do_not_move_are_refused_in_every_unit(tmp_path):
    scene = plane_scene(radius=0.5, pure_rotation=True)
    runs = {k: _verdicts(_write(tmp_path / f"x{k}", scene, k), tmp_path / f"x{k}") for k in SCALES}
    assert runs[1.0]["check"] and runs[1.0]["check"][0].startswith("the cameras do not move")
    assert "degenerate normalization" in runs[1.0]["eval"] and runs[1.0]["predict"] is None
    _same_verdicts(runs)


def test_the_degenerate_test_is_relative_to_the_camera_positions():
    w2c = torch.from_numpy(plane_scene(pure_rotation=True)["w2c"])
    far, tiny = w2c.clone(), w2c.clone()
    far[:, :, 3] *= 1e9  # rounding noise of positions 1e9 from the origin is still no motion
    tiny[:, :, 3] *= 1e-12
    for cams in (w2c, far, w2c.float(), tiny):
        with pytest.raises(DegenerateSceneError, match="no scale"):
            normalize_scene(cams)
    moving = torch.from_numpy(plane_scene()["w2c"])
    moving[:, :, 3] *= 1e-12  # a real baseline is one at any scale
    assert float(normalize_scene(moving)[2]) > 0


def test_write_scene_refuses_depth_its_dtype_cannot_hold(tmp_path):
    scene = plane_scene()
    cases = {"underflow": (scene["depth"] * 1e-5, "below float16's smallest normal number"),  # 2e-5..3e-5 m
             "overflow": (scene["depth"] * 3e4, "exceeds the float16 range"),
             "merged": (1000 + scene["depth"] * 1e-4, "float16 merges its")}
    for name, (depth, problem) in cases.items():
        with pytest.raises(ValueError, match=problem) as err:
            _write(tmp_path, {**scene, "depth": depth}, 1.0, name=name, depth_dtype="float16")
        assert 'depth_dtype="float32" (depthpe convert --depth-dtype float32)' in str(err.value)
        assert "\n" not in str(err.value)
        assert not (tmp_path / "units" / "val" / f"{name}.h5").exists()
        path = _write(tmp_path, {**scene, "depth": depth}, 1.0, name=name)  # float32 holds it
        with SceneReader(path) as reader:
            stored = reader.read_depth(0)
        assert np.array_equal(stored, depth[0].astype(np.float32))
    _write(tmp_path, scene, 1e3, name="mm", depth_dtype="float16")  # float16 suits ordinary depth
