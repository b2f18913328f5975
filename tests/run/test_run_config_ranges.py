"""The run config refuses numbers that make no sense before anything is built (reliability IV item 12):
inf/nan anywhere, a vanishing crop, a licence that is not a Hub licence id."""

import pytest

from depthpe.config import ConfigError
from depthpe.hub.card import licence_problem
from depthpe.run import RunConfig


@pytest.mark.parametrize("key, value", [
    ("optim.lr", "inf"), ("optim.weight_decay", "inf"), ("loss.l1_weight", "inf"), ("loss.conf_alpha", "nan"),
    ("hub.request_timeout", "inf"), ("optim.betas", "[0.9, .inf]"),
])
def test_inf_and_nan_are_refused_with_the_key(key, value):
    # a section's own range check may see the value first (nan >= 0 is false): either names key and value
    with pytest.raises(ConfigError, match=rf"{key}[.0-9]* must .*(inf|nan)") as err:
        RunConfig.from_dict({}, overrides=(f"{key}={value}",))
    assert "\n" not in str(err.value)


def test_a_source_weight_of_inf_names_its_index():
    sources = [{"name": "a", "root": "/x"}, {"name": "b", "root": "/y", "weight": float("inf")}]
    with pytest.raises(ConfigError, match=r"data.sources.1.weight must be a finite number"):
        RunConfig.from_dict({"data": {"sources": sources}})


def test_a_vanishing_crop_scale_is_refused():
    with pytest.raises(ConfigError, match=r"data.crop_scale must be \(min, max\) with 0.1 <= min <= max <= 1"):
        RunConfig.from_dict({}, overrides=("data.crop_scale=[1e-4, 1e-4]",))
    assert RunConfig.from_dict({}, overrides=("data.crop_scale=[0.1, 1.0]",)).data.crop_scale == (0.1, 1.0)


@pytest.mark.parametrize("licence, hint", [("Apache License 2.0", None), ("Apache-2.0", "apache-2.0"), ("", None)])
def test_a_licence_that_is_not_a_hub_id_is_refused(licence, hint):
    with pytest.raises(ConfigError, match="hub.license: .* is not a Hub licence id"):
        RunConfig.from_dict({"hub": {"license": licence}})
    assert (hint in licence_problem(licence)) if hint else "did you mean" not in licence_problem(licence)
    for good in ("apache-2.0", "cc-by-nc-4.0", "other", "openrail++"):
        assert licence_problem(good) is None
