"""Every command's options come from its config dataclass: the parser's options are exactly the
dataclass's fields (plus --config FILE, key=value and --debug), a command line with only the
required options gives the dataclass's defaults, and the help still lists every option name the
command had before its options were generated."""

from __future__ import annotations

import dataclasses

import pytest

from depthpe.analysis.settings import CompareConfig, PlotConfig
from depthpe.cli import COMMANDS
from depthpe.config.inference import EvalConfig, PredictConfig
from depthpe.config.options import config_from_args
from depthpe.scenes.convert.options import ConvertConfig
from depthpe.scenes.format.check_config import CheckConfig, IndexConfig
from depthpe.scenes.synth_config import SynthConfig
from depthpe.demo.config import DemoConfig
from depthpe.hub.push_config import PushConfig
from depthpe.rmvd.config import RmvdConfig
from depthpe.view.config import ViewConfig
from tests.helpers.parsers import command_parser, field_default

# command -> (config dataclass, the shortest valid command line, the option names it had before)
CASES = {
    "eval": (EvalConfig, ["--model", "m", "--data", "d", "--out", "o"],
             "--cpu --data --datasets --debug --dtype --image-width --manifest --min-valid-fraction --model "
             "--num-workers --out --panels --restart --revision --scenes --seed --split --views --worst"),
    "predict": (PredictConfig, ["--model", "m", "--images", "i", "--out", "o"],
                "--cameras --conf-threshold --debug --device --dtype --image-width --images --max-views --model "
                "--out --revision --fusion-views --fusion-rel --fusion-pixels --filtered-depth --export "
                "--colmap-format --nerfstudio-depth-unit"),
    "convert": (ConvertConfig, ["co3d", "--src", "s", "--out", "o"],
                "--cameras --check --no-check --depth-compression --depth-dtype --depth-scale --frame-stride "
                "--jpeg-quality --limit --max-side --metric --min-frames --min-valid-fraction --out --quiet "
                "--split-csv --split-seed --src --val-scenes --workers"),
    "check": (CheckConfig, ["data"],
              "--allow-no-overlap --json --limit --max-rel-error --min-overlap --min-valid-fraction "
              "--occlusion-margin --pairs --points --quiet --show --workers"),
    "synth": (SynthConfig, ["--out", "o"],
              "--height --out --quiet --seed --shift --style --train-scenes --val-scenes --views --width --workers"),
    "index": (IndexConfig, ["data"], "--dry-run --quiet --workers"),
    "push": (PushConfig, ["runs/x", "--repo-id", "user/x"],
             "--deadline --eval --license --private --repo-id --retries --retry-delay --revision --tag --timeout "
             "--demo-app"),
    "compare": (CompareConfig, ["runs/a"],
                "--allow-different-manifests --bootstrap --dataset --debug --group-by --out --reference --seed"),
    "plot": (PlotConfig, ["runs/a", "--out", "o"], "--debug --group-by --metrics --out --rows"),
    "rmvd": (RmvdConfig, ["--predictions", "p", "--out", "o", "--samples", "s.json"],
             "--max-source-views --ordering --out --predictions --samples --setting"),
    "demo": (DemoConfig, ["--model", "m"], "--debug --device --host --max-images --max-mb --model --port --revision"),
    "view": (ViewConfig, ["pred"],
             "--conf-threshold --data --debug --device --dtype --host --image-width --max-points --model --port "
             "--revision --save --scene --seed --split --views"),
}
SHARED = {"help", "config", "overrides", "debug"}  # not settings: argparse's, the config machinery's, --debug


def _parser(name: str):
    return command_parser(COMMANDS, name, f"depthpe {name}")


def test_every_command_with_settings_is_covered():
    # train: its run config; bench, probe, study: groups (bench NAME, study NAME: tests/commands/test_bench_configs.py)
    assert set(CASES) == set(COMMANDS) - {"train", "bench", "probe", "study"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_options_are_the_config_fields_with_their_defaults(name):
    cls, required, _ = CASES[name]
    parser = _parser(name)
    dests = {a.dest for a in parser._actions} - SHARED - {"_run"}
    assert dests == {f.name for f in dataclasses.fields(cls)}, name
    cfg = config_from_args(cls, parser.parse_args(required))
    given = {a.dest for a in parser._actions for s in a.option_strings if s in required} | {
        a.dest for a in parser._actions if not a.option_strings and a.dest not in SHARED}
    for field in dataclasses.fields(cls):
        if field.name not in given:
            assert getattr(cfg, field.name) == field_default(field), (name, field.name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_help_lists_the_option_names_the_command_always_had(name):
    parser = _parser(name)
    flags = {s for a in parser._actions for s in a.option_strings}
    text = parser.format_help()
    for old in CASES[name][2].split():
        assert old in flags and old in text, (name, old)


def test_config_file_options_and_overrides_for_the_generated_commands(tmp_path):
    path = tmp_path / "check.yaml"
    path.write_text("root: from_file\nmax_rel_error: 0.2\nmax_pairs: 3\n")
    args = _parser("check").parse_args(["--config", str(path), "--pairs", "5", "min_overlap=0.3", "--quiet"])
    cfg = config_from_args(CheckConfig, args)
    assert (cfg.root, cfg.max_rel_error, cfg.max_pairs, cfg.min_overlap, cfg.progress) == ("from_file", 0.2, 5, 0.3,
                                                                                           False)
    assert cfg.thresholds()["max_pairs"] == 5
    synth = config_from_args(SynthConfig, _parser("synth").parse_args(["--out", "o", "--shift", "fov", "--shift",
                                                                       "path"]))
    assert synth.shift == ["fov", "path"]  # repeated, not the last one only
    compare = config_from_args(CompareConfig, _parser("compare").parse_args(["a", "b", "bootstrap=7"]))
    assert (compare.inputs, compare.bootstrap) == (["a", "b"], 7)


def test_check_scene_defaults_are_the_command_defaults():
    import inspect

    from depthpe.scenes.format.check import check_scene

    params = inspect.signature(check_scene).parameters
    for field in dataclasses.fields(CheckConfig):
        if field.name in params:
            assert params[field.name].default == field.default, field.name
