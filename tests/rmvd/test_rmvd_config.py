"""`depthpe rmvd` settings: each bad value is one ValueError naming the flag and the value."""

from __future__ import annotations

import re

import pytest

from depthpe.rmvd.config import RmvdConfig


@pytest.mark.parametrize("bad, message", [
    ({"samples": []}, "--samples is required: one or more sample-list JSON files or folders"),
    ({"settings": ["known_poses", "known_poses"]}, "--setting must be one or more different values of"),
    ({"settings": ["poses"]}, "got ['poses']"),
    ({"ordering": "best"}, "--ordering must be one of"),
    ({"max_source_views": -1}, "--max-source-views must be >= 0, got -1"),
    ({"input_size": "native"}, "--input-size must be one of"),
    ({"image_width": 100}, "--image-width must be a positive multiple of 14, got 100"),
    ({"image_width": 0}, "--image-width must be a positive multiple of 14, got 0"),
    ({"dtype": "fp16"}, "--dtype must be one of ['fp32', 'bf16'], got 'fp16'"),
    ({"burn_in": -1}, "--burn-in must be >= 0, got -1"),
])
def test_a_bad_setting_is_named(bad, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        RmvdConfig(**{"samples": ["lists"], "model": "m", "out": "o", **bad})


def test_the_edges_are_allowed():
    cfg = RmvdConfig(samples=["lists"], model="m", out="o", max_source_views=0, settings=["intrinsics_only"],
                     burn_in=0, image_width=14)
    assert cfg.max_source_views == 0 and cfg.burn_in == 0
