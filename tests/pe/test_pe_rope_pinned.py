"""VGGT's 2D RoPE pinned to hand-computed values (not compared with itself).

Head dim 8: channels [0, 4) rotate with the token's y position, [4, 8) with its x position; in each
half channel c pairs with c + 2 at frequency 100^(-c/2) (c = 0: 1, c = 1: 0.1); the rotation is
+theta: e_c -> cos * e_c + sin * e_{c+2}. Patch (row r, column c) sits at (y, x) = (r + 1, c + 1);
special tokens sit at (0, 0), so they pass unchanged. A flipped rotation sign or swapped y/x halves
fails these tests.
"""

from __future__ import annotations

import math

import pytest
import torch

from depthpe.pe import prepare_encoding

GRID, NS = (2, 3), 1  # 2 rows x 3 columns, one special token per view
T = NS + GRID[0] * GRID[1]


def unit_inputs(channel: int, views: int = 2) -> torch.Tensor:
    """(1, 1, views*T, 8) float64 with every token equal to the unit vector e_channel."""
    x = torch.zeros(1, 1, views * T, 8, dtype=torch.float64)
    x[..., channel] = 1.0
    return x


def expected(channel: int, views: int = 2) -> torch.Tensor:
    """Written out: token t of a view is the special token (t = 0) or patch (r, c) = divmod(t-1, 3)."""
    rows = []
    for _ in range(views):
        for t in range(T):
            y, x = (0, 0) if t < NS else (divmod(t - NS, GRID[1])[0] + 1, divmod(t - NS, GRID[1])[1] + 1)
            pos = y if channel < 4 else x
            freq = 1.0 if channel % 2 == 0 else 0.1
            out = [0.0] * 8
            out[channel] = math.cos(pos * freq)
            out[channel + 2] = math.sin(pos * freq)
            rows.append(out)
    return torch.tensor(rows, dtype=torch.float64).view(1, 1, views * T, 8)


def rope_transforms():
    """VGGT's RoPE as used by frame attention (``rope``) and as the pair transform ``vggt2d``."""
    geom = dict(image_size=(28, 42), grid=GRID, num_special=NS, patch_offset=1)
    K = torch.tensor([[40.0, 0, 20], [0, 40.0, 14], [0, 0, 1]], dtype=torch.float64).expand(1, 2, 3, 3)
    w2c = torch.eye(4, dtype=torch.float64).expand(1, 2, 4, 4)
    return {
        "rope": prepare_encoding("rope", num_views=2, **geom).transform_q,
        "vggt2d+p2d": prepare_encoding({"qk": "vggt2d", "vo": "p2d"}, K=K, w2c=w2c, **geom).transform_k,
    }


@pytest.mark.parametrize("which", ["rope", "vggt2d+p2d"])
@pytest.mark.parametrize("channel", [0, 1, 4, 5])
def test_unit_vectors_rotate_into_the_expected_channels(which, channel):
    got = rope_transforms()[which](unit_inputs(channel))
    torch.testing.assert_close(got, expected(channel), rtol=0, atol=1e-15)


def test_literal_values_at_one_patch():
    """Patch (row 1, column 2) = token 6: (y, x) = (2, 3)."""
    rope = rope_transforms()["rope"]
    e0, e4, e5 = (rope(unit_inputs(c))[0, 0, 6] for c in (0, 4, 5))
    assert e0[0].item() == pytest.approx(-0.4161468365471424, abs=1e-15)  # cos 2
    assert e0[2].item() == pytest.approx(0.9092974268256817, abs=1e-15)  # sin 2 (y half, +theta)
    assert e4[4].item() == pytest.approx(-0.9899924966004454, abs=1e-15)  # cos 3 (x half)
    assert e4[6].item() == pytest.approx(0.1411200080598672, abs=1e-15)  # sin 3
    assert e5[7].item() == pytest.approx(0.29552020666133955, abs=1e-15)  # sin 0.3
    special = rope(unit_inputs(4))[0, 0, T]  # the special token of view 1
    assert torch.equal(special, unit_inputs(4)[0, 0, 0])
