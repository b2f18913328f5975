"""No secret from the environment reaches a published file (reliability IV item 7): ``${oc.env:VAR}``
is refused in every run-config key but the local paths, so its value cannot land in config.yaml, the
hparams, train.log or the model card."""

import pytest

from depthpe.config import ConfigError
from depthpe.run import RunConfig, dump_run_config


def test_env_interpolation_in_a_published_key_is_refused(monkeypatch):
    monkeypatch.setenv("DEPTHPE_SECRET", "hf_abcdef")
    for key in ("hub.repo_id", "model.init_from", "train.report_to.0"):
        with pytest.raises(ConfigError, match=rf"{key}: \$\{{oc.env:...\}} is only allowed in output_dir") as err:
            RunConfig.from_dict({}, overrides=(f"{key}=prefix-${{oc.env:DEPTHPE_SECRET}}",))
        assert "hf_abcdef" not in str(err.value)


def test_env_interpolation_in_a_local_path_still_works(monkeypatch, tmp_path):
    monkeypatch.setenv("DEPTHPE_DATA", str(tmp_path))
    cfg = RunConfig.from_dict({"output_dir": "${oc.env:DEPTHPE_DATA}/run",
                               "data": {"sources": [{"name": "a", "root": "${oc.env:DEPTHPE_DATA}"}]}})
    assert cfg.output_dir == f"{tmp_path}/run" and cfg.data.sources[0].root == str(tmp_path)
    assert "oc.env" not in dump_run_config(cfg)
