"""``depthpe.geometry``: target key patches of chosen view pairs, blocks of an attention matrix,
top-1 / within-r hits.

The analytic case: a pure-translation stereo pair. Two views of 28 x 56 pixels (2 x 4 patches of
14 px) look at a fronto-parallel plane at depth 2 with focal length 56 px; camera 1 sits 1.0 to the
right of camera 0, so every point moves by f b / Z = 28 px = two patches to the left in view 1.
Patch (r, c) of view 0 matches patch (r, c - 2) of view 1 (c < 2 falls outside) and patch (r, c) of
view 1 matches (r, c + 2) of view 0.
"""

from __future__ import annotations

import pytest
import torch

from depthpe.geometry import (cyclic_pairs, match_hits, pair_blocks, pair_targets, patch_depths, patch_matches,
                              query_patches, window_masks)

H, W, GRID = 28, 56, (2, 4)


def stereo_pair(baseline: float = 1.0):
    depth = torch.full((1, 2, H, W), 2.0)
    K = torch.tensor([[56.0, 0, (W - 1) / 2], [0, 56.0, (H - 1) / 2], [0, 0, 1]]).expand(1, 2, 3, 3)
    w2c = torch.eye(4).repeat(1, 2, 1, 1)
    w2c[0, 1, 0, 3] = -baseline  # camera 1 centred at x = +baseline
    return depth, depth > 0, K, w2c


def test_stereo_targets_are_the_analytic_shift():
    matches = patch_matches(*stereo_pair(), GRID)
    targets = pair_targets(matches, [(0, 1), (1, 0)])
    forward = [r * 4 + c - 2 if c >= 2 else -1 for r in range(2) for c in range(4)]
    backward = [r * 4 + c + 2 if c < 2 else -1 for r in range(2) for c in range(4)]
    assert targets.tolist() == [forward + backward]
    # only some query patches: the same targets, in the order of the patches given
    some = pair_targets(matches, [(0, 1)], torch.tensor([7, 2]))
    assert some.tolist() == [[forward[7], forward[2]]]


def test_a_wider_baseline_moves_the_targets_further():
    targets = pair_targets(patch_matches(*stereo_pair(baseline=0.5), GRID), [(0, 1)])
    assert targets.tolist() == [[-1, 0, 1, 2, -1, 4, 5, 6]]


def _twin_views(near: float, far: float):
    """Two views with the same camera: view 0 sees a plane at ``near``, view 1 one at ``far``."""
    depth, valid, K, w2c = stereo_pair(baseline=0.0)
    depth = depth.clone()
    depth[0, 0], depth[0, 1] = near, far
    return depth, valid, K, w2c


@pytest.mark.parametrize("near,far,kept", [(10.0, 10.3, True), (0.1, 0.12, False)])
def test_the_occlusion_tolerance_is_relative_to_the_depth(near, far, kept):
    # 3 % off at 10 m is within the 5 % tolerance; 20 % off at 0.1 m is not (both sides of 0.05 absolute)
    matches = patch_matches(*_twin_views(near, far), GRID, depth_tolerance=0.05)
    assert matches.ok[0, 0, :, 1].tolist() == [kept] * 8


@pytest.mark.parametrize("shift,inside", [(7.25, False), (6.75, True)])
def test_a_point_past_the_last_pixel_centre_by_more_than_half_a_pixel_is_outside(shift, inside):
    # camera 1 to the left moves the points right by f b / Z = shift px: the last patch column's
    # centre u = 48.5 lands on u = 55.75 = W - 0.25 (outside) or on u = 55.25 = W - 0.75 (inside)
    matches = patch_matches(*stereo_pair(baseline=-shift * 2.0 / 56.0), GRID)
    assert matches.ok[0, 0, [3, 7], 1].tolist() == [inside, inside]
    # and the first column's centre of view 1 (u = 6.5) lands on u = -0.75 (outside) or -0.25 (inside) of view 0
    assert matches.ok[0, 1, [0, 4], 0].tolist() == [inside, inside]


def test_pair_blocks_cut_query_patches_and_key_patches_out_of_the_full_matrix():
    ns, P = 1, 8
    T = ns + P
    attention = torch.arange(2 * T * 2 * T, dtype=torch.float32).view(1, 1, 2 * T, 2 * T)
    block = pair_blocks(attention, GRID, ns, [(1, 0)], torch.tensor([3]))
    assert block.shape == (1, 1, 1, P)
    query, keys = T + ns + 3, torch.arange(ns, ns + P)
    assert block[0, 0, 0].tolist() == attention[0, 0, query, keys].tolist()


def test_hits_within_radius_and_no_match_never_hits():
    scores = torch.zeros(1, 4, 8)
    scores[0, 0, 5] = scores[0, 1, 0] = scores[0, 2, 1] = scores[0, 3, 0] = 1.0  # best (1, 1), (0, 0), (0, 1), (0, 0)
    target = torch.tensor([[5, 2, -1, 0]])  # (1, 1); (0, 2); none; (0, 0), the first patch
    assert match_hits(scores, target, GRID, 0).tolist() == [[True, False, False, True]]
    assert match_hits(scores, target, GRID, 1).tolist() == [[True, False, False, True]]
    assert match_hits(scores, target, GRID, 2).tolist() == [[True, True, False, True]]


def test_cyclic_pairs_and_query_patches():
    assert cyclic_pairs(2) == [(0, 1), (1, 0)]
    assert cyclic_pairs(3) == [(0, 1), (1, 2), (2, 0)]
    with pytest.raises(ValueError, match="at least 2 views"):
        cyclic_pairs(1)
    assert query_patches(8, None) is None and query_patches(8, 8) is None
    assert query_patches(10, 1, step=2).tolist() == [2]  # one query is allowed
    with pytest.raises(ValueError, match="max_queries must be >= 1"):
        query_patches(10, 0)
    assert query_patches(10, 4, step=0).tolist() == [0, 3, 6, 9]
    assert query_patches(10, 4, step=4).tolist() == [1, 4, 7]  # stride 3, offset 4 mod 3
    covered = set().union(*(query_patches(10, 4, step=s).tolist() for s in range(3)))
    assert covered == set(range(10))


def test_a_patch_depth_is_the_median_of_its_valid_positive_pixels_when_half_of_them_have_one():
    # 4 x 4 pixels in 2 x 2 patches of 2 x 2; invalid, non-positive and non-finite pixels do not count
    depth = torch.tensor([[1.0, 2.0, 5.0, 7.0],
                          [3.0, 9.0, 0.0, 0.0],
                          [4.0, 4.0, 8.0, float("nan")],
                          [4.0, 4.0, -1.0, 6.0]]).view(1, 1, 4, 4)
    valid = torch.ones_like(depth, dtype=torch.bool)
    valid[0, 0, 2, 0] = valid[0, 0, 2, 1] = valid[0, 0, 3, 0] = False  # patch 2 keeps one pixel of four
    med, ok = patch_depths(depth, valid, (2, 2))
    assert ok.tolist() == [[[True, True, False, True]]]
    assert med[0, 0, 0].item() == 2.0  # median of 1, 2, 3, 9: torch takes the lower middle
    assert med[0, 0, 1].item() == 5.0 and med[0, 0, 2].item() == 0.0 and med[0, 0, 3].item() == 6.0
    # at 3 of 4 required, the patches with two usable pixels are left out too
    assert patch_depths(depth, valid, (2, 2), min_valid=0.75)[1].tolist() == [[[True, False, False, False]]]
    for shape in ((1, 1, 4, 5), (1, 1, 5, 4)):
        with pytest.raises(ValueError, match="not a whole number of 2x2 patches"):
            patch_depths(torch.ones(shape), torch.ones(shape, dtype=torch.bool), (2, 2))


def test_windows_are_chebyshev_squares_around_the_target_clipped_at_the_border():
    # a 3 x 4 grid; targets (B=1, S_i=1, P=3, S_j=1, 2): the centre-ish (1, 1), the corner (0, 3), (2, 0)
    target = torch.tensor([[1, 1], [0, 3], [2, 0]]).view(1, 1, 3, 1, 2)
    ok = torch.tensor([True, True, False]).view(1, 1, 3, 1)

    def cells(mask):
        return {(k // 4, k % 4) for k in mask.nonzero()[:, -1].tolist()}

    masks = window_masks(target, ok, (3, 4), 1)
    assert masks.shape == (1, 1, 3, 1, 12)
    assert cells(masks[0, 0, 0, 0]) == {(r, c) for r in range(3) for c in range(3)}
    assert cells(masks[0, 0, 1, 0]) == {(0, 2), (0, 3), (1, 2), (1, 3)}
    assert not masks[0, 0, 2].any()  # no match: no window
    assert cells(window_masks(target, ok, (3, 4), 0)[0, 0, 0, 0]) == {(1, 1)}
