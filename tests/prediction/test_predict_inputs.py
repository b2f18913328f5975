"""What `depthpe predict` / `depthpe.predict` accept as images (a folder, one file, a glob, a list)
and the one-line errors of its Python entry for a missing file, clashing names, a model that does
not load, a bad width or view count; with cameras but one view per prediction it says the depth is
in the normalized unit."""

from __future__ import annotations

import re
import shutil

import pytest

import depthpe
from depthpe.config import ConfigError
from depthpe.prediction.api import input_size, list_images, load_model, plan_views
from depthpe.scenes.cameras import read_cameras
from tests.fixtures.prediction import VIEWS
from tests.helpers.training import micro_model


def _names(found) -> list[str]:
    return [name for name, _ in found]


def test_images_from_a_folder_a_file_a_glob_or_a_list(inputs, tmp_path):
    nested = tmp_path / "capture"
    shutil.copytree(inputs / "images", nested / "day1")
    (nested / "day1" / "notes.txt").write_text("not an image")
    (nested / "v9.PNG").write_bytes((inputs / "images" / "v0.png").read_bytes())
    assert _names(list_images(nested)) == ["day1/v0.png", "day1/v1.png", "day1/v2.png", "day1/v3.png", "v9.PNG"]
    one = inputs / "images" / "v2.png"
    assert list_images(one) == [("v2.png", one)]
    assert _names(list_images(str(inputs / "images" / "v[13].png"))) == ["v1.png", "v3.png"]
    assert _names(list_images([inputs / "images" / "v3.png", inputs / "images" / "v0.png"])) == ["v0.png", "v3.png"]


def test_image_arguments_that_name_nothing_or_clash_are_one_line_errors(inputs, tmp_path):
    missing = tmp_path / "nope.png"
    with pytest.raises(ConfigError, match=re.escape(f"--images {missing}: no such folder or file (pass a folder, "
                                                    "a glob or files)")):
        list_images(missing)
    (tmp_path / "b").mkdir()
    shutil.copy(inputs / "images" / "v0.png", tmp_path / "b" / "v0.png")
    clash = [inputs / "images" / "v0.png", tmp_path / "b" / "v0.png"]
    with pytest.raises(ConfigError, match="several images are named 'v0.png'; pass a folder so that names keep"):
        list_images(clash)
    assert _names(list_images(tmp_path / "b")) == ["v0.png"]


def test_a_model_that_does_not_load_is_named_in_one_line(tmp_path):
    (tmp_path / "m").mkdir()
    with pytest.raises(ConfigError, match=f"cannot load model {re.escape(str(tmp_path / 'm'))}: ") as err:
        load_model(str(tmp_path / "m"), "cpu")
    assert "\n" not in str(err.value)


def test_a_bad_width_or_view_count_from_python_is_refused():
    with pytest.raises(ConfigError, match="image width must be a positive multiple of 14, got 50"):
        input_size((40, 64), None, image_width=50)
    with pytest.raises(ConfigError, match="max views must be >= 1, got 0"):
        plan_views(4, 0, None)


def test_one_view_per_prediction_with_cameras_is_in_the_normalized_unit(inputs):
    cameras = read_cameras(inputs / "cams.json")
    result = depthpe.predict(micro_model("prope"), inputs / "images", cameras, max_views=1)
    assert result.unit == "normalized" and len(result.frames) == VIEWS
    assert "one view per prediction: no camera motion, so depth is in the model's normalized unit" in result.notes
    with_motion = depthpe.predict(micro_model("prope"), inputs / "images", cameras, max_views=2)
    assert with_motion.unit == "cameras" and not any("one view per prediction" in n for n in with_motion.notes)
