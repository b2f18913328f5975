"""URoPE's head-wise anchor assignment in the probe's anchor table (``LiftAccumulator.anchor_rows``):
with H heads and G anchors, heads [g H/G, (g+1) H/G) form group g. The hand-built two-view case of
test_probe.py with 4 heads and 2 anchors: every match (depth 2) falls in anchor 0's bin (1.5)."""

from __future__ import annotations

import pytest
import torch

from depthpe.geometry import patch_matches
from depthpe.probe.lift import LiftAccumulator
from tests.helpers.probe import GRID, N, NS, hand_probs, two_views

PEAKED, UNIFORM = 2.05, 1.0  # r = 0 lifts of hand_probs' head 0 and head 1 (test_probe.py)


def _four_heads(peaked: list[int]) -> torch.Tensor:
    """(1, 4, N, N): the heads in ``peaked`` attend like hand_probs' head 0 (the correspondence of one
    match), the others uniformly."""
    probs = torch.full((1, 4, N, N), 1 / N)
    probs[0, peaked] = hand_probs()[0, 0]
    return probs


def _rows(peaked: list[int]) -> list[dict]:
    acc = LiftAccumulator(radii=(0,), anchors=[1.5, 6.0])
    acc.start(patch_matches(*two_views(), GRID), NS)
    acc.add(0, _four_heads(peaked), groups=2)
    return acc.anchor_rows(min_pairs=1)


def test_group_lift_averages_the_groups_consecutive_heads():
    own, empty = _rows(peaked=[0, 1])  # group 0 = heads 0 and 1
    assert own["pairs"] == 4 and empty["pairs"] == 0
    assert own["group_lift"] == pytest.approx([PEAKED, UNIFORM])
    assert own["winner"] == 0 and own["own_wins"] is True


def test_a_bin_won_by_another_group_is_not_an_own_win():
    own, _ = _rows(peaked=[2, 3])  # group 1 = heads 2 and 3 has the correspondence of bin 0's matches
    assert own["group_lift"] == pytest.approx([UNIFORM, PEAKED])
    assert own["winner"] == 1 and own["own_wins"] is False


def test_one_head_of_a_group_counts_half():
    own, _ = _rows(peaked=[1])
    assert own["group_lift"] == pytest.approx([(PEAKED + UNIFORM) / 2, UNIFORM])
