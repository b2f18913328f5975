"""The camera-PE test helpers (tests/helpers/pe.py) are what they say."""

import torch

from tests.helpers.pe import DT, prope_rope_matrix, random_rotations


def test_random_rotations_are_proper():
    R = random_rotations(5, torch.Generator().manual_seed(0))
    assert torch.allclose(R @ R.mT, torch.eye(3, dtype=DT).expand(5, 3, 3), atol=1e-12)
    assert torch.allclose(torch.det(R), torch.ones(5, dtype=DT), atol=1e-12)


def test_prope_rope_matrix_is_orthogonal_and_identity_at_origin():
    M = prope_rope_matrix(2.0, 1.0, 48)
    assert torch.allclose(M @ M.T, torch.eye(24, dtype=DT), atol=1e-12)
    assert torch.equal(prope_rope_matrix(0.0, 0.0, 48), torch.eye(24, dtype=DT))
