"""``model.global_pe`` in run configs: a preset name or a {qk, vo} pair, one-line errors, round trip."""

from __future__ import annotations

import pytest
import yaml

from depthpe.config import ConfigError
from depthpe.run.loading import dump_run_config, load_run_config
from depthpe.run.schema import build_run_config


def test_pair_override_round_trips_through_config_yaml():
    cfg = load_run_config("quickstart", ["model.global_pe={qk: KRtAdd2d, vo: KRtAdd2d}",
                                         "model.pe_options={softmax: blockwise}", "model.plucker=true"])
    mc = cfg.model_config()
    assert mc.global_pe == {"qk": "KRtAdd2d", "vo": "KRtAdd2d"} and mc.plucker
    assert build_run_config([yaml.safe_load(dump_run_config(cfg))]) == cfg
    # A preset given later replaces a pair from an earlier layer, and back.
    assert load_run_config("grid/qk-p2d_vo-KR2d", ["model.global_pe=prope"]).model.global_pe == "prope"
    back = load_run_config("quickstart_gta", ["model.global_pe={qk: none, vo: p}"]).model.global_pe
    assert back == {"qk": "none", "vo": "p"}


@pytest.mark.parametrize("override,fragment", [
    ("model.global_pe={qk: KRt, vo: p2d}", "pair {qk: KRt, vo: p2d} is not accepted"),
    ("model.global_pe={qk: p2d}", "exactly the keys qk and vo"),
    ("model.global_pe={qk: urope, vo: p2d}", "is not accepted"),
    ("model.global_pe=prop", "unknown encoding 'prop' (did you mean 'prope'?"),
])
def test_bad_encodings_are_one_line_errors_naming_the_valid_pairs(override, fragment):
    with pytest.raises(ConfigError) as err:
        load_run_config("quickstart", [override])
    message = str(err.value)
    assert fragment in message and "\n" not in message
    assert "valid pairs" in message or "or a pair {qk: NAME, vo: NAME}" in message
