"""The hand-built two-view case of the probe tests (tests/probe/test_probe.py's docstring): two views of
14 x 42 pixels, a plane at depth 2, camera 1 moved by 0.5 along +x, so that patch c of view 0 matches
patch c - 1 of view 1; and a hand-made attention over its tokens."""

from __future__ import annotations

import torch


H, W, GRID, NS = 14, 42, (1, 3), 1  # one special token per view
T = NS + 3
N = 2 * T  # 8 tokens


def two_views(occlude_target_of_last_patch: bool = False):
    """depth (1, 2, H, W), valid, K (1, 2, 3, 3), w2c (1, 2, 4, 4) of the hand-built case."""
    depth = torch.full((1, 2, H, W), 2.0)
    if occlude_target_of_last_patch:  # something at depth 1 around pixel (6, 20) of view 1, where (0, c2) lands
        depth[0, 1, 5:8, 19:23] = 1.0
    K = torch.tensor([[56.0, 0, (W - 1) / 2], [0, 56.0, (H - 1) / 2], [0, 0, 1]]).expand(1, 2, 3, 3)
    w2c = torch.eye(4).repeat(1, 2, 1, 1)
    w2c[0, 1, 0, 3] = -0.5  # camera 1 centred at x = +0.5
    return depth, depth > 0, K, w2c


def hand_probs():
    """(1, 2 heads, N, N): head 0 uniform except that query (view 0, patch 2) puts 0.65 on key
    (view 1, patch 1), its true match, and 0.05 on each other key; head 1 uniform."""
    probs = torch.full((1, 2, N, N), 1 / N)
    query, key = 0 * T + NS + 2, 1 * T + NS + 1
    probs[0, 0, query] = 0.05
    probs[0, 0, query, key] = 0.65
    return probs
