"""Typed command lines of eval, predict and convert: options generated from the config dataclasses
(one place for every default), --config FILE and key=value overrides as for train."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from depthpe.config import ConfigError
from depthpe.scenes.convert.options import ConvertConfig, ConvertOptions
from depthpe.config.inference import EvalConfig, PredictConfig
from depthpe.config.options import REQUIRED, add_options, config_from_args, flag_of
from depthpe.run.schema import ValConfig


def _parse(cls, argv: list[str]):
    parser = argparse.ArgumentParser()
    add_options(parser, cls)
    return config_from_args(cls, parser.parse_args(argv))


def _defaults(cls) -> dict:
    out = {}
    for f in dataclasses.fields(cls):
        out[f.name] = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    return out


@pytest.mark.parametrize("cls, required", [
    (EvalConfig, ["--model", "m", "--data", "d", "--out", "o"]),
    (PredictConfig, ["--model", "m", "--images", "i", "--out", "o"]),
    (ConvertConfig, ["co3d", "--src", "s", "--out", "o"]),
])
def test_no_option_gives_the_dataclass_defaults(cls, required):
    cfg = _parse(cls, required)
    given = {"model", "data", "out", "images", "dataset", "src"}
    for name, default in _defaults(cls).items():
        if name not in given:
            assert getattr(cfg, name) == default, name


def test_every_field_is_an_option_with_its_default_in_the_help():
    for cls in (EvalConfig, PredictConfig, ConvertConfig):
        parser = argparse.ArgumentParser()
        add_options(parser, cls)
        text = " ".join(parser.format_help().split())
        for f in dataclasses.fields(cls):
            assert flag_of(cls, f.name).lower() in text.lower(), (cls.__name__, f.name)
            if f.default is REQUIRED:
                assert "(required)" in text


def test_config_file_then_options_then_overrides(tmp_path):
    path = tmp_path / "eval.yaml"
    path.write_text("model: from_file\ndata: d\nout: o\nviews: 5\npanels: 1\nmax_scenes: 3\n")
    cfg = _parse(EvalConfig, ["--config", str(path), "--views", "6", "panels=0"])
    assert (cfg.model, cfg.views, cfg.panels, cfg.max_scenes) == ("from_file", 6, 0, 3)
    cfg = _parse(EvalConfig, ["--config", str(path), "--scenes", "2", "views=7"])
    assert (cfg.max_scenes, cfg.views) == (2, 7)


def test_missing_and_bad_values_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"^--data is required \(or 'data:' in --config FILE\)$"):
        _parse(EvalConfig, ["--model", "m", "--out", "o"])
    with pytest.raises(ConfigError, match="--views must be at least 2"):
        _parse(EvalConfig, ["--model", "m", "--data", "d", "--out", "o", "--views", "1"])
    with pytest.raises(ConfigError, match="unknown config key 'view'.*did you mean 'views'"):
        _parse(EvalConfig, ["--model", "m", "--data", "d", "--out", "o", "view=3"])
    with pytest.raises(ConfigError, match="--image-width must be a positive multiple of 14"):
        _parse(PredictConfig, ["--model", "m", "--images", "i", "--out", "o", "--image-width", "30"])
    with pytest.raises(ConfigError, match="unknown dataset 'co3x'"):
        _parse(ConvertConfig, ["--src", "s", "--out", "o", "dataset=co3x"])


def test_convert_flags_keep_their_spellings():
    cfg = _parse(ConvertConfig, ["folder", "--src", "s", "--out", "o", "--quiet", "--metric", "--no-check",
                                 "--max-side", "320", "--depth-scale", "5000"])
    assert (cfg.progress, cfg.metric, cfg.check, cfg.max_side, cfg.depth_scale) == (False, True, False, 320, 5000.0)
    assert isinstance(cfg, ConvertOptions)  # what the converters take
    assert ConvertConfig.__dataclass_fields__["workers"].default == 0  # the command: one per core
    assert ConvertOptions.__dataclass_fields__["workers"].default == 1  # the library: in this process


def test_eval_and_validation_share_the_view_protocol():
    shared = {"views", "seed", "manifest"}
    for name in shared:
        assert EvalConfig.__dataclass_fields__[name].default == ValConfig.__dataclass_fields__[name].default
    with pytest.raises(ValueError, match="val.views must be at least 2"):
        ValConfig(views=1)
