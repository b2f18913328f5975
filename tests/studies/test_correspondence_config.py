"""`depthpe study correspondence` settings: each bad value is one ValueError naming the flag, the
rule and the value (the command prints it as one `error:` line)."""

from __future__ import annotations

import re

import pytest

from depthpe.studies.correspondence.config import CorrespondenceConfig


@pytest.mark.parametrize("bad, message", [
    ({"pe": "nope"}, "--pe must be one of"),
    ({"image_width": 100}, "--image-width must be a positive multiple of 14, got 100"),
    ({"views": 1}, "--views must be >= 2, got 1"),
    ({"steps": 0}, "--steps must be >= 1, got 0"),
    ({"batch_size": 0}, "--batch-size must be >= 1, got 0"),
    ({"num_heads": 0}, "--num-heads must be >= 1, got 0"),
    ({"lr": 0.0}, "--lr, --layerscale-init and --depth-tolerance must be > 0 and --depth-weight >= 0, got 0.0"),
    ({"depth_weight": -1.0}, "--depth-weight >= 0, got"),
    ({"anchors": 2}, "--anchors and --anchor-assignment are options of --pe urope, not of 'rope'"),
    ({"pe": "urope", "anchors": 0}, "--anchors must be >= 1, got 0"),
    ({"seeds": []}, "--seeds needs at least one seed"),
    ({"eval_views": [2, 1]}, "--eval-views values must be >= 2, got [1]"),
    ({"eval_rotation_noise": [-1.0]}, "--eval-rotation-noise values must be >= 0, got [-1.0]"),
    ({"eval_translation_noise": [-0.1]}, "--eval-translation-noise values must be >= 0, got [-0.1]"),
    ({"radii": [-1]}, "--radii values must be >= 0, got [-1]"),
    ({"radii": []}, "--radii needs at least one radius"),
    ({"train_scenes": 0}, "--scenes values must be >= 1 (--train-scenes, --eval-scenes), got [0]"),
    ({"data": None}, None),
])
def test_a_bad_setting_is_named(bad, message):
    settings = {"data": "d", "out": "o", **bad}
    if settings["data"] is None:  # required: named with its flag
        del settings["data"]
        message = "--data is required"
    with pytest.raises(ValueError, match=re.escape(message)):
        CorrespondenceConfig(**settings)


def test_the_edges_are_allowed():
    cfg = CorrespondenceConfig(data="d", out="o", pe="urope", anchors=1, views=2, steps=1, radii=[0],
                               eval_views=[2], eval_steps=[0, 1], depth_weight=0.0, train_scenes=1)
    assert cfg.checkpoints() == [0, 1] and cfg.pe_options() == {"num_anchors": 1}
