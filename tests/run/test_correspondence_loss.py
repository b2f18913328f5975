"""``depthpe.run.losses.correspondence_loss``: cross-entropy of attention scores over the patches of
the key view against the true patch, on a hand-built case whose value is computed by hand.

2 x 2 patch grid (K = 4 key patches), two samples, two heads, three queries per sample."""

from __future__ import annotations

import math

import pytest
import torch

from depthpe.run.losses import correspondence_loss


def hand_case():
    logits = torch.zeros(2, 2, 3, 4)
    # sample 0, head 0: query 0 scores log(1, 2, 3, 4), target 3 -> CE = log(10 / 4)
    logits[0, 0, 0] = torch.tensor([1.0, 2.0, 3.0, 4.0]).log()
    # query 1 has no match (-1); query 2: equal scores, target 0 -> CE = log 4 (every head)
    logits[0, :, 1] = torch.tensor([50.0, -7.0, 3.0, 0.0])
    # sample 0, head 1: query 0 puts 3 of 6 units on the target -> CE = log(6 / 3) = log 2
    logits[0, 1, 0] = torch.tensor([1.0, 1.0, 1.0, 3.0]).log()
    target = torch.tensor([[3, -1, 0], [-1, -1, -1]])  # sample 1: no usable query
    return logits, target


def test_hand_built_value():
    logits, target = hand_case()
    sample0 = (math.log(10 / 4) + math.log(4) + math.log(2) + math.log(4)) / 4  # 2 heads x 2 queries
    assert float(correspondence_loss(logits, target)) == pytest.approx((sample0 + 0.0) / 2, rel=1e-6)
    assert float(correspondence_loss(logits[:1], target[:1])) == pytest.approx(sample0, rel=1e-6)


def test_the_right_target_scores_lower_than_a_wrong_one():
    logits, target = hand_case()
    wrong = target.clone()
    wrong[0, 0] = 0
    assert correspondence_loss(logits[:1], target[:1]) < correspondence_loss(logits[:1], wrong[:1])


def test_nothing_usable_is_zero_with_a_graph():
    logits = torch.randn(1, 2, 3, 4, requires_grad=True)
    loss = correspondence_loss(logits, torch.full((1, 3), -1))
    loss.backward()
    assert float(loss) == 0.0 and torch.equal(logits.grad, torch.zeros_like(logits))


def test_shapes_are_checked():
    with pytest.raises(ValueError, match=r"\(B, heads, Q, K\)"):
        correspondence_loss(torch.zeros(2, 3, 4), torch.zeros(2, 3, dtype=torch.long))
    # each half of the check alone: logits of the wrong rank whose target would fit, and a target of
    # the wrong shape for well-formed logits
    with pytest.raises(ValueError, match=r"\(B, heads, Q, K\)"):
        correspondence_loss(torch.zeros(2, 3, 4), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"target \(B, Q\)"):
        correspondence_loss(torch.zeros(2, 3, 4, 5), torch.zeros(2, 5, dtype=torch.long))
