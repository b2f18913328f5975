"""NaN attention scores in the correspondence study make its scores undefined, not numbers (issue 42 item 4)."""

import math

import torch

from depthpe.probe.lift import LiftAccumulator
from depthpe.studies.correspondence.evaluation import _layer_rows, hit_counts


def test_nan_attention_scores_make_the_correspondence_scores_undefined():
    scores = torch.zeros(2, 3, 4)
    scores[:, :, 1] = 1.0  # every query's best key patch is 1
    target = torch.tensor([[1, 1, -1], [1, 1, 1]])
    scores[1, 2, 0] = math.nan  # one matched query of sample 1 has a NaN score
    counts = hit_counts(scores, target, (2, 2))
    assert counts[0].tolist() == [2.0, 2.0, 2.0] and math.isnan(counts[1, 0]) and counts[1, 2] == 3
    row = _layer_rows(LiftAccumulator([0]), {0: [counts]})[0]
    assert math.isnan(row["top1"]) and math.isnan(row["within1"]) and row["matches"] == 5
    assert row["scene_top1"][0] == 1.0 and math.isnan(row["scene_top1"][1])
