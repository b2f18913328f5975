"""`DataConfig`, `SourceConfig` and `ColorJitterConfig` built from Python or a dict (what a run
config's `data:` section becomes): values are coerced as documented and each bad value is one
`ValueError` naming the key, the value and the allowed range."""

from __future__ import annotations

import re

import pytest

from depthpe.config.camera_noise import CameraNoise
from depthpe.loader.config import ColorJitterConfig, DataConfig, SourceConfig


def _source(**kw) -> dict:
    return {"name": "synth", "root": "data", **kw}


def test_scalars_become_pairs_and_dicts_become_their_configs():
    cfg = DataConfig(sources=[_source(window="5", weight=2)], views=4, aspect=0.5, crop_scale=1,
                     color_jitter={"hue": 0.2}, camera_noise={"rotation_deg": 1.5, "translation": 0.01})
    assert cfg.views == (4, 4) and cfg.aspect == (0.5, 0.5) and cfg.crop_scale == (1.0, 1.0)
    source = cfg.sources[0]
    assert isinstance(source, SourceConfig) and source.window == 5 and source.weight == 2.0
    assert isinstance(cfg.color_jitter, ColorJitterConfig) and cfg.color_jitter.hue == 0.2
    assert cfg.color_jitter.brightness == ColorJitterConfig().brightness  # the others keep their defaults
    assert isinstance(cfg.camera_noise, CameraNoise)
    assert (cfg.camera_noise.rotation_deg, cfg.camera_noise.translation, cfg.camera_noise.focal) == (1.5, 0.01, 0.0)
    assert source.split_dir.as_posix() == "data/synth/train"
    assert SourceConfig(name="co3d_val", root="r", dataset="co3d", split="val").split_dir.as_posix() == "r/co3d/val"


@pytest.mark.parametrize("source, message", [
    ({"name": ""}, "a data source needs a name"),
    (_source(max_scenes=0), "source 'synth': max_scenes must be >= 1 or null, got 0"),
    (_source(weight=-1), "source 'synth': weight must be >= 0, got -1.0"),
    (_source(weight=float("nan")), "source 'synth': weight must be >= 0, got nan"),
    (_source(view_selection="best"), "source 'synth': view_selection must be one of ('random', 'window', "
                                     "'nearest'), got 'best'"),
    (_source(window=0), "source 'synth': window must be >= 1 frame, got 0"),
])
def test_a_bad_source_is_named(source, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        DataConfig(sources=[source])


@pytest.mark.parametrize("jitter, message", [
    ({"apply_prob": 1.5}, "color_jitter.apply_prob must be in [0, 1], got 1.5"),
    ({"grayscale_prob": -0.1}, "color_jitter.grayscale_prob must be in [0, 1], got -0.1"),
    ({"shared_prob": 2}, "color_jitter.shared_prob must be in [0, 1], got 2.0"),
    ({"hue": 0.6}, "color_jitter.hue must be in [0, 0.5], got 0.6"),
    ({"brightness": 1.2}, "color_jitter.brightness must be in [0, 1], got 1.2"),
    ({"saturation": -0.5}, "color_jitter.saturation must be in [0, 1], got -0.5"),
])
def test_a_bad_colour_jitter_is_named(jitter, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        DataConfig(color_jitter=jitter)


@pytest.mark.parametrize("kw, message", [
    ({"sources": [_source(), _source()]}, "data.sources: names must be unique, got ['synth', 'synth'] (rename one)"),
    ({"views": [2, 3, 4]}, "data.views must be a number or a [min, max] pair, got [2, 3, 4]"),
    ({"views": 1}, "data.views must be >= 2 (normalization needs a second view), got (1, 1)"),
    ({"aspect": [0, 1]}, "data.aspect (height/width) must be > 0, got (0.0, 1.0)"),
    ({"crop_scale": [0.05, 1]}, "data.crop_scale must be (min, max) with 0.1 <= min <= max <= 1"),
    ({"crop_scale": [0.5, 1.2]}, "data.crop_scale must be (min, max) with 0.1 <= min <= max <= 1"),
    ({"image_width": 100}, "data.image_width must be a positive multiple of patch_size=14, got 100"),
    ({"image_width": 0}, "data.image_width must be a positive multiple of patch_size=14, got 0"),
    ({"views": [2, 8], "max_images_per_batch": 6}, "data.max_images_per_batch=6 is smaller than the largest "
                                                  "number of views 8; raise it or lower views"),
    ({"min_valid_fraction": 1.5}, "data.min_valid_fraction must be in [0, 1], got 1.5"),
    ({"max_attempts": 0}, "data.max_attempts must be >= 1, got 0"),
    ({"scale_reference": "first"}, "data.scale_reference must be 'others' or 'all', got 'first'"),
])
def test_a_bad_data_setting_is_named(kw, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        DataConfig(**kw)


def test_the_edges_of_each_range_are_allowed():
    cfg = DataConfig(views=[2, 8], max_images_per_batch=8, crop_scale=[0.1, 1], min_valid_fraction=0,
                     max_attempts=1, image_width=14, scale_reference="all",
                     color_jitter={"hue": 0.5, "apply_prob": 0, "brightness": 1},
                     sources=[_source(window=1, max_scenes=1, weight=0)])
    assert cfg.views == (2, 8) and cfg.crop_scale == (0.1, 1.0) and cfg.sources[0].weight == 0.0
