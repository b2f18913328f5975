"""The typed run config: loading, overrides, base chains, round trips, and the one-line errors of
`depthpe train` for bad configurations (checked before anything is built)."""

import re
from pathlib import Path

import pytest
import yaml

from depthpe.cli import main
from depthpe.config import ConfigError
from depthpe.run import RunConfig, dump_run_config, load_run_config
from depthpe.run.loading import SHIPPED_CONFIGS, shipped_config_names
from tests.helpers.bad_configs import BAD_CONFIGS
from tests.helpers.training import run_config


def test_overrides_types_interpolation_and_list_indices(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("output_dir: runs/a\nmodel: {preset: tiny}\ndata:\n  sources: [{name: synth, root: data}]\n"
                    "val:\n  sources: [{name: synth, root: '${data.sources.0.root}', split: val}]\n")
    cfg = load_run_config(path, ["train.steps=7", "optim.lr=2e-4", "model.global_pe=none", "data.sources.0.root=/x"])
    assert cfg.train.steps == 7 and isinstance(cfg.train.steps, int)
    assert cfg.optim.lr == 2e-4 and cfg.model_config().global_pe == "none"
    assert cfg.data.sources[0].root == "/x" and cfg.val.sources[0].root == "/x"  # interpolated after overrides
    assert cfg.model.embed_dim == 128  # unset model fields come from the preset


def test_a_dotted_override_below_a_preset_filled_mapping_sets_one_key():
    # model.pe_options is unset until the preset fills it; OmegaConf used to fail with a raw
    # AttributeError ("'str' object has no attribute 'get'") on a key below it.
    cfg = load_run_config("quickstart", ["model.global_pe=urope", "model.pe_options.num_anchors=1",
                                         "model.pe_options.anchor_assignment=channels"])
    assert cfg.model.pe_options == {"num_anchors": 1, "anchor_assignment": "channels"}
    assert cfg.model.embed_dim == 128 and cfg.model.global_pe == "urope"  # the rest still from the preset
    assert load_run_config("quickstart", ["model.global_pe=urope"]).model.pe_options == {}
    with pytest.raises(ConfigError, match="unknown config key 'model.nosuch'"):
        load_run_config("quickstart", ["model.nosuch.x=1"])


def test_resolved_config_round_trips_and_keeps_explicit_fields(tmp_path):
    cfg = load_run_config("quickstart", ["model.embed_dim=64", "train.report_to=[]"])
    text = dump_run_config(cfg)
    (tmp_path / "config.yaml").write_text(text)
    again = load_run_config(tmp_path / "config.yaml")
    assert again == cfg and again.model.embed_dim == 64 and again.train.report_to == []
    assert yaml.safe_load(text)["model"]["num_blocks"] == 4  # every field is written out


def test_base_chain_merges_and_circular_chain_is_refused(tmp_path):
    (tmp_path / "a.yaml").write_text("output_dir: a\nmodel: {preset: tiny, global_pe: rope}\ntrain: {steps: 3}\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\nmodel: {global_pe: prope}\n")
    cfg = load_run_config(tmp_path / "b.yaml")
    assert cfg.model.global_pe == "prope" and cfg.model.preset == "tiny" and cfg.train.steps == 3
    (tmp_path / "c.yaml").write_text("base: c.yaml\n")
    with pytest.raises(ConfigError, match="circular"):
        load_run_config(tmp_path / "c.yaml")


def test_a_missing_base_file_and_a_top_level_that_is_no_mapping_are_named(tmp_path):
    (tmp_path / "child.yaml").write_text("base: parent.yaml\ntrain: {steps: 3}\n")
    with pytest.raises(ConfigError, match=re.escape(f"config file {tmp_path / 'parent.yaml'} not found (pass a path "
                                                    "or the name of a shipped config)")):
        load_run_config(tmp_path / "child.yaml")
    (tmp_path / "list.yaml").write_text("- train\n- steps\n")
    with pytest.raises(ConfigError, match=re.escape(f"{tmp_path / 'list.yaml'}: the top level must be a mapping of "
                                                    "sections (e.g. 'train: {steps: 10}')")):
        load_run_config(tmp_path / "list.yaml")


def test_a_misspelled_key_of_a_list_entry_in_a_file_names_the_entry(tmp_path):
    """OmegaConf names a key of a list entry without its path; the error finds it in the file."""
    path = tmp_path / "c.yaml"
    path.write_text("model: {preset: tiny}\ndata:\n  sources:\n    - {name: a, root: data}\n"
                    "    - {name: b, rooot: data, weight: 2}\n")
    with pytest.raises(ConfigError, match=re.escape("unknown config key 'data.sources.1.rooot' (did you mean "
                                                    "'data.sources.1.root'?)")):
        load_run_config(path)
    path.write_text("model: {preset: tiny}\ndata:\n  sources:\n    - {name: a, rooot: data}\n"
                    "    - {name: b, rooot: data}\n")
    with pytest.raises(ConfigError, match=re.escape("unknown config key 'rooot' (did you mean 'root'?)")):
        load_run_config(path)  # in two entries: no single path to name


def test_every_shipped_config_loads_with_the_encoding_its_name_says():
    names = shipped_config_names()
    assert len(names) >= 12 and (SHIPPED_CONFIGS / "quickstart.yaml").is_file()
    for name in names:
        cfg = load_run_config(name)
        expected = name.split("_", 1)[1] if "_" in name else "prope"
        if not expected.startswith("rope"):
            assert cfg.model.global_pe == expected, name
        assert cfg.data.sources, name
    repo_configs = Path(__file__).resolve().parents[2] / "configs"
    assert load_run_config(repo_configs / "quickstart.yaml") == load_run_config("quickstart")


def test_from_dict_reports_unknown_keys_with_a_suggestion():
    with pytest.raises(ConfigError, match=r"unknown config key 'train.stepz' \(did you mean 'train.steps'\?\)"):
        RunConfig.from_dict({"train": {"stepz": 1}})
    with pytest.raises(ConfigError, match="data.sources.0.nme"):
        RunConfig.from_dict({"data": {"sources": [{"name": "a"}]}}, ("data.sources.0.nme=b",))


@pytest.fixture
def nothing_is_built(monkeypatch):
    """Fail loudly if a command gets as far as building an Accelerator or a model."""
    import accelerate

    from depthpe.model import DepthModel

    def refuse(*args, **kwargs):
        raise AssertionError("built something before the config was checked")

    monkeypatch.setattr(accelerate.Accelerator, "__init__", refuse)
    monkeypatch.setattr(DepthModel, "__init__", refuse)




@pytest.fixture(scope="module")
def bad_config_setup(synth_root, tmp_path_factory):
    """A config file, a finished tiny run (for the resume cases), a file and a malformed YAML."""
    from depthpe.run.trainer import train

    tmp = tmp_path_factory.mktemp("bad")
    done = tmp / "done"
    train(run_config(synth_root, done, train={"steps": 2, "checkpoint_every": 1}))
    (tmp / "a_file").write_text("not a folder")
    (tmp / "malformed.yaml").write_text("train: {steps: [1, 2\n")
    config = tmp / "run.yaml"
    config.write_text(dump_run_config(run_config(synth_root, tmp / "new_run")))
    return {"@config": str(config), "@missing": str(tmp / "missing"), "@file": str(tmp / "a_file"),
            "@malformed": str(tmp / "malformed.yaml"), "@ckpt": str(done / "checkpoints" / "step_0000001"),
            "@new_run": tmp / "new_run"}


@pytest.mark.parametrize("args, fragment", BAD_CONFIGS, ids=[" ".join(a) for a, _ in BAD_CONFIGS])
def test_bad_config_gives_one_error_line_and_status_2(args, fragment, bad_config_setup, nothing_is_built, capsys):
    args = [bad_config_setup.get(a, a) for a in args]
    for i, a in enumerate(args):
        for key, value in bad_config_setup.items():
            if isinstance(value, str) and key in a:
                args[i] = a.replace(key, value)
    if "--config" not in args:
        args = ["--config", bad_config_setup["@config"], *args]
    assert main(["train", *args]) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], captured.err
    assert not bad_config_setup["@new_run"].exists()  # no run folder was created


def test_wandb_without_credentials_is_refused_before_anything_is_built(bad_config_setup, nothing_is_built,
                                                                    monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    assert main(["train", "--config", bad_config_setup["@config"], "train.report_to=[wandb]"]) == 2
    assert "W&B has no credentials here" in capsys.readouterr().err
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert main(["train", "--config", bad_config_setup["@config"], "train.report_to=[wandb]", "--print-config"]) == 0


def test_debug_shows_the_traceback_and_print_config_prints_the_resolved_config(capsys):
    with pytest.raises(ConfigError):
        main(["train", "--config", "quickstart", "--debug", "train.stepz=1"])
    assert main(["train", "--config", "quickstart", "--print-config", "train.steps=5"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["train"]["steps"] == 5 and printed["model"]["global_pe"] == "prope"
    # overrides may also follow options such as --resume
    assert main(["train", "--config", "quickstart", "train.steps=5", "--resume", "latest", "optim.lr=2e-4",
                 "--print-config"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["train"]["steps"] == 5 and printed["optim"]["lr"] == 2e-4


def test_module_entry_points_take_the_same_arguments():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "depthpe.train", "--config", "quickstart", "--print-config",
                           "train.steps=9"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and yaml.safe_load(done.stdout)["train"]["steps"] == 9
    done = subprocess.run([sys.executable, "-m", "depthpe.eval", "--model", "x", "--data", "/nonexistent", "--out", "o"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.strip().startswith("error: --model x does not exist")


def test_the_model_section_lists_exactly_the_model_configs_fields_with_their_types():
    import dataclasses
    import typing

    from omegaconf import MISSING

    from depthpe.model.config import DepthModelConfig
    from depthpe.run.schema import ModelSection

    section, model = dataclasses.fields(ModelSection), dataclasses.fields(DepthModelConfig)
    assert [f.name for f in section] == ["preset", "init_from"] + [f.name for f in model]
    hints, model_hints = typing.get_type_hints(ModelSection), typing.get_type_hints(DepthModelConfig)
    assert all(hints[f.name] == model_hints[f.name] for f in model)
    assert all(f.default == MISSING for f in section[2:])


def test_the_encoding_name_is_validated_in_one_place():
    """Only depthpe.pe.spec.encoding_pair decides what an unknown encoding is; the model config and
    the run config pass its message on."""
    from pathlib import Path

    import depthpe

    root = Path(depthpe.__file__).parent
    sites = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py") if "unknown encoding" in p.read_text())
    assert sites == ["pe/spec.py"]
