"""Every ``depthpe bench NAME``'s options come from its settings dataclass (``add_plain_options``):
the parser's options are exactly the dataclass's fields, a command line with only the required
options parses to the dataclass's defaults, the help still lists every option the benchmark had
before its options were generated, and ``--config`` / ``key=value`` are the benchmarked run's
(``BenchedRun``), not a YAML file of the benchmark's own settings."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from depthpe.bench.attention import AttentionSettings
from depthpe.studies.geometry.cameras_only import CamerasOnlySettings
from depthpe.bench.convert import ConvertSettings
from depthpe.bench.data import DataSettings
from depthpe.bench.data_scale import DataScaleSettings
from depthpe.bench.gpu_check import GpuCheckSettings
from depthpe.bench.memory import MemorySettings
from depthpe.bench.model import ModelSettings
from depthpe.bench.rehearsal import RehearsalSettings
from depthpe.bench.settings import BenchedRun
from depthpe.bench.synth import SynthSettings
from depthpe.bench.train import TrainSettings
from depthpe.commands.bench import BENCHMARKS, STUDY_ALIASES
from depthpe.commands.study import STUDIES
from depthpe.config.options import REQUIRED, add_plain_options, option
from tests.helpers.parsers import command_parser, field_default

# benchmark -> (settings dataclass, the shortest valid command line, the options its help had before)
CASES = {
    "synth": (SynthSettings, [], "--height --scenes --seed --target-s --views --width --workers"),
    "convert": (ConvertSettings, [], "--dataset --height --max-side --scenes --seed --views --width --workers"),
    "attention": (AttentionSettings, [], "--batch --clock --device --dtype --head-dim --heads --json --methods "
                  "--no-memory --repeats --special --threads --tokens-per-view --views"),
    "train": (TrainSettings, [], "--compile --config --device --json --num-workers --steps --warmup"),
    "data": (DataSettings, [], "--batches --config --depth-codecs --depth-compression --format --frame-size "
             "--frames --image-width --profile --raw --scene-dir --scenes --views --workers"),
    "gpu-check": (GpuCheckSettings, ["--out", "o"], "--device --gpu-tflops --out --part-timeout --scale --tiny"),
    "memory": (MemorySettings, [], "--aspect --batch --checkpointing --config --ddp --fit --image-width --json "
               "--measure --precision --quiet --target --threads --views"),
    "model": (ModelSettings, [], "--batch --compile --config --device --height --json --repeats --threads "
              "--views --warmup --width"),
    "cameras-only": (CamerasOnlySettings, ["--data", "d"], "--alpha --data --dataset --draws --seed --views"),
    "data-scale": (DataScaleSettings, [], "--batches --check-scenes --out --scenes --seed --seed-scenes --size "
                   "--val-scenes --views --workers"),
    "rehearsal": (RehearsalSettings, ["--config", "c", "--out", "o"], "--config --hub-endpoint --hub-repo-id "
                  "--hub-token --image-width --out --stage-timeout --threads --views"),
}
# benchmarks with no benchmarked run: their settings are one config dataclass with --config FILE and
# key=value of its own (``add_options``, as `depthpe eval`)
# name -> (settings class, its required options, its positional arguments, a field set by the config file)
OWN_CONFIG = {"correspondence": ("depthpe.studies.correspondence.config.CorrespondenceConfig", ["--data", "d", "--out", "o"],
                                 [], "steps"),
              "camera-noise": ("depthpe.studies.camera_noise.runner.CameraNoiseSweepConfig", ["--data", "d", "--out", "o"],
                               ["m"], "noise_seed")}
HIDDEN = {"attention": {"--_memory-child"}, "memory": {"--_measure-child"}}  # flags of their own child processes


def _parser(name: str):
    """The parser of a benchmark (``depthpe bench NAME``) or of a study that was one (``depthpe study NAME``)."""
    if name in STUDY_ALIASES:
        return command_parser(STUDIES, name, f"depthpe study {name}")
    return command_parser(BENCHMARKS, name, f"depthpe bench {name}")


def test_every_benchmark_is_covered():
    covered = set(BENCHMARKS) | set(STUDY_ALIASES)
    assert set(CASES) | set(OWN_CONFIG) == covered and not set(CASES) & set(OWN_CONFIG)


def test_a_study_that_was_a_benchmark_still_runs_as_one_and_names_its_new_command(tmp_path, capsys):
    from depthpe.cli import main

    status = main(["bench", "cameras-only", "--data", str(tmp_path / "missing")])
    err = capsys.readouterr().err
    assert "`depthpe study cameras-only`" in err
    assert status == main(["study", "cameras-only", "--data", str(tmp_path / "missing")]) == 2


@pytest.mark.parametrize("name", sorted(OWN_CONFIG))
def test_a_benchmark_with_its_own_config_takes_its_fields_and_its_config_file(name, tmp_path):
    import importlib

    from depthpe.config.options import config_from_args

    path, required, positional, from_file = OWN_CONFIG[name]
    module, _, cls_name = path.rpartition(".")
    cls = getattr(importlib.import_module(module), cls_name)
    parser = _parser(name)
    dests = {a.dest for a in parser._actions} - {"help", "config", "overrides", "debug", "_run"}
    assert dests == {f.name for f in dataclasses.fields(cls)}
    (tmp_path / "c.yaml").write_text(f"{from_file}: 7\n")
    cfg = config_from_args(cls, parser.parse_args([*required, "--config", str(tmp_path / "c.yaml"), *positional,
                                                   "views=3"]))
    assert (getattr(cfg, from_file), cfg.views, cfg.data) == (7, 3, "d")


@pytest.mark.parametrize("name", sorted(CASES))
def test_options_are_the_settings_fields_with_their_defaults(name):
    cls, required, _ = CASES[name]
    parser = _parser(name)
    assert {a.dest for a in parser._actions} - {"help", "_run"} == {f.name for f in dataclasses.fields(cls)}
    args = parser.parse_args(required)
    given = {a.dest for a in parser._actions for s in a.option_strings if s in required}
    for field in dataclasses.fields(cls):
        if field.name not in given:
            assert getattr(args, field.name) == field_default(field), (name, field.name)
    for action in parser._actions:  # a required field is a required option, nothing else is
        field = {f.name: f for f in dataclasses.fields(cls)}.get(action.dest)
        if field is not None and action.option_strings:
            assert action.required == (field.default is REQUIRED), (name, field.name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_help_lists_the_options_the_benchmark_always_had(name):
    parser = _parser(name)
    flags = {s for a in parser._actions for s in a.option_strings}
    text = parser.format_help()
    for old in CASES[name][2].split():
        assert old in flags and old in text, (name, old)
    for hidden in HIDDEN.get(name, ()):
        assert hidden in flags and hidden not in text, (name, hidden)


@pytest.mark.parametrize("name", sorted(CASES))
def test_config_and_key_value_are_the_benchmarked_run(name):
    cls, required, _ = CASES[name]
    if not issubclass(cls, BenchedRun):  # no run config: neither --config nor key=value items
        assert "--config" not in {s for a in _parser(name)._actions for s in a.option_strings}
        with pytest.raises(SystemExit):
            _parser(name).parse_args([*required, "a.b=1"])
        return
    args = _parser(name).parse_args(["--config", "vggt1b_rope", *required[2:], "model.global_pe=prope",
                                     "data.image_width=56"])
    assert (args.config, args.overrides) == ("vggt1b_rope", ["model.global_pe=prope", "data.image_width=56"])


@dataclasses.dataclass
class _Example:
    out: str = option(REQUIRED, help="where")
    size: tuple[int, int] = option((3, 4), metavar=("H", "W"), help="frame size")
    views: list[int] = option(default_factory=lambda: [8], nargs="+", help="views")
    raw: bool = option(False, store_true=True, help="also raw")
    child: bool = option(False, flag="--_child", store_true=True, hidden=True, help="a child process")
    items: list[str] = option(default_factory=list, positional=True, metavar="items", help="more")


def test_plain_options_kinds():
    parser = argparse.ArgumentParser()
    add_plain_options(parser, _Example)
    args = parser.parse_args(["--out", "o", "--size", "5", "6", "--views", "2", "3", "--raw", "--_child", "x=1"])
    assert vars(args) == {"out": "o", "size": [5, 6], "views": [2, 3], "raw": True, "child": True, "items": ["x=1"]}
    assert vars(parser.parse_args(["--out", "o"])) == {"out": "o", "size": (3, 4), "views": [8], "raw": False,
                                                       "child": False, "items": []}
    for bad in (["--size", "5"], ["--out", "o", "--views"], ["--out", "o", "--no-raw"], []):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)
    text = " ".join(parser.format_help().split())
    assert "--size H W frame size (default: 3 4)" in text and "where (required)" in text
    assert "--_child" not in text and "--config" not in text
