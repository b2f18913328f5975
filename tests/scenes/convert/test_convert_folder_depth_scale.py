"""`depthpe convert folder` reads 16-bit PNG depth as millimetres unless told otherwise: without
``--depth-scale`` the stored depth is the PNG value / 1000 (docs/data.md: "default 1000"), and
``--depth-scale S`` divides by S instead; the library call (``convert`` with default options)
agrees. The expectation is computed from the PNG files themselves."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from depthpe.cli import main
from depthpe.scenes.convert import convert
from depthpe.scenes.convert.common import ConvertOptions
from depthpe.scenes.format.scene_file import SceneReader
from depthpe.scenes.synth import write_synth_dataset
from depthpe.testing.captures import export_capture, read_scene_frames

DOCUMENTED_DEFAULT = 1000.0  # PNG value per camera unit: millimetres with metre cameras


@pytest.fixture(scope="module")
def png_capture(tmp_path_factory) -> Path:
    """A synth scene written as a capture with depth PNGs in millimetres (value = round(1000 * depth))."""
    root = tmp_path_factory.mktemp("synth")
    write_synth_dataset(root, train_scenes=1, val_scenes=0, views=3, height=28, width=28, seed=5, progress=False)
    return export_capture(root / "synth" / "train" / "train_000000.h5", root / "capture", depth_format="png",
                          depth_scale=1000.0)


def _converted_depth_vs_png(src: Path, out: Path) -> tuple[np.ndarray, np.ndarray]:
    """(stored depth of the converted scene, raw PNG values of the same frames), frame by frame."""
    scene = out / "folder" / "train" / f"{src.name}.h5"
    with SceneReader(scene) as reader:
        names = reader.frame_names()
    raw = np.stack([cv2.imread(str(src / "depth" / Path(n).with_suffix(".png")), cv2.IMREAD_UNCHANGED) for n in names])
    assert raw.dtype == np.uint16 and raw.max() > 100
    return read_scene_frames(scene)["depth"], raw.astype(np.float64)


@pytest.mark.parametrize("option, scale", [([], DOCUMENTED_DEFAULT), (["--depth-scale", "250"], 250.0)])
def test_png_depth_is_divided_by_the_depth_scale(png_capture, tmp_path, option, scale):
    out = tmp_path / "out"
    assert main(["convert", "folder", "--src", str(png_capture), "--out", str(out), "--quiet", "--no-check",
                 *option]) == 0
    depth, raw = _converted_depth_vs_png(png_capture, out)
    assert ((depth > 0) == (raw > 0)).all()
    np.testing.assert_allclose(depth[raw > 0], raw[raw > 0] / scale, rtol=1e-3)  # float16 storage


def test_library_default_options_read_millimetres_too(png_capture, tmp_path):
    convert("folder", png_capture, tmp_path / "out", ConvertOptions(progress=False, workers=1))
    depth, raw = _converted_depth_vs_png(png_capture, tmp_path / "out")
    np.testing.assert_allclose(depth[raw > 0], raw[raw > 0] / DOCUMENTED_DEFAULT, rtol=1e-3)
