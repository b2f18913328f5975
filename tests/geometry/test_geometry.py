import math

import pytest
import torch

from depthpe import geometry as G


def random_rotation(n, generator, dtype=torch.float64):
    q, r = torch.linalg.qr(torch.randn(n, 3, 3, generator=generator, dtype=dtype))
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
    det = torch.linalg.det(q)
    q[det < 0, :, 0] *= -1
    return q


def random_w2c(n, generator, dtype=torch.float64, spread=3.0):
    R = random_rotation(n, generator, dtype)
    t = spread * torch.randn(n, 3, 1, generator=generator, dtype=dtype)
    return torch.cat([R, t], dim=-1)


def random_K(n, generator, dtype=torch.float64, H=48, W=64):
    f = 40 + 20 * torch.rand(n, generator=generator, dtype=dtype)
    K = torch.zeros(n, 3, 3, dtype=dtype)
    K[:, 0, 0], K[:, 1, 1] = f, f * 1.1
    K[:, 0, 2] = W / 2 + torch.randn(n, generator=generator, dtype=dtype)
    K[:, 1, 2] = H / 2 + torch.randn(n, generator=generator, dtype=dtype)
    K[:, 2, 2] = 1
    return K


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(0)


def test_invert_w2c_matches_linalg_inv(gen):
    w2c = G.to_4x4(random_w2c(5, gen))
    torch.testing.assert_close(G.invert_w2c(w2c), torch.linalg.inv(w2c), atol=1e-12, rtol=0)
    w34 = random_w2c(5, gen)
    assert G.invert_w2c(w34).shape == (5, 3, 4)
    torch.testing.assert_close(G.to_4x4(G.invert_w2c(w34)) @ G.to_4x4(w34), torch.eye(4).double().expand(5, 4, 4))


def test_invert_intrinsics_matches_linalg_inv(gen):
    K = random_K(4, gen)
    torch.testing.assert_close(G.invert_intrinsics(K), torch.linalg.inv(K), atol=1e-12, rtol=0)


def test_3x4_4x4_round_trip(gen):
    w = random_w2c(3, gen)
    assert torch.equal(G.to_4x4(w)[..., :3, :], w)
    assert G.to_4x4(w)[..., 3, :].tolist() == [[0, 0, 0, 1]] * 3
    with pytest.raises(ValueError, match="extrinsics must have shape"):
        G.to_4x4(torch.zeros(3, 3))


def test_normalize_intrinsics_prope_convention():
    K = torch.tensor([[100.0, 0, 31.5], [0, 120.0, 23.5], [0, 0, 1]], dtype=torch.float64)
    Kn = G.normalize_intrinsics(K, (48, 64))
    expected = torch.tensor([[100 / 64, 0, 31.5 / 64 - 0.5], [0, 120 / 48, 23.5 / 48 - 0.5], [0, 0, 1]], dtype=torch.float64)
    torch.testing.assert_close(Kn, expected)


def test_project_unproject_round_trip(gen):
    H, W = 12, 16
    K = random_K(2, gen, H=H, W=W)
    w2c = random_w2c(2, gen)
    depth = 1 + 4 * torch.rand(2, H, W, generator=gen, dtype=torch.float64)
    pts = G.unproject_depth(depth, K, w2c)  # (2, H, W, 3) world
    uv, z = G.project_points(pts.reshape(2, -1, 3), K, w2c)
    grid = G.pixel_grid(H, W, dtype=torch.float64).reshape(-1, 2)
    torch.testing.assert_close(uv, grid.expand(2, -1, -1), atol=1e-9, rtol=0)
    torch.testing.assert_close(z, depth.reshape(2, -1), atol=1e-12, rtol=0)
    cam = G.unproject_depth(depth, K)
    torch.testing.assert_close(cam[..., 2], depth)


def test_check_rotation_rejects_non_orthonormal(gen):
    w2c = random_w2c(3, gen)
    G.check_rotation(w2c)
    bad = w2c.clone()
    bad[1, :3, :3] *= 1.5
    with pytest.raises(ValueError, match=r"index \(1,\) is not a rotation"):
        G.check_rotation(bad)
    reflect = w2c.clone()
    reflect[2, 0, :3] *= -1
    with pytest.raises(ValueError, match="det"):
        G.check_rotation(reflect)
    nan = w2c.clone()
    nan[0, 0, 3] = math.nan
    with pytest.raises(ValueError, match="NaN"):
        G.check_rotation(nan)


def test_normalize_scene_invariant_to_similarity(gen):
    S, H, W = 5, 6, 8
    w2c = G.to_4x4(random_w2c(S, gen))
    depth = 1 + torch.rand(S, H, W, generator=gen, dtype=torch.float64)
    n1, d1, s1 = G.normalize_scene(w2c, depth)
    # New world: X' = s (R X + t)  =>  w2c' = w2c with t scaled, composed with the inverse transform.
    Rg = random_rotation(1, gen)[0]
    tg = torch.randn(3, generator=gen, dtype=torch.float64)
    sg = 3.7
    A = torch.eye(4, dtype=torch.float64)
    A[:3, :3], A[:3, 3] = Rg, tg  # world -> world'
    w2c2 = w2c @ torch.linalg.inv(A)
    w2c2[:, :3, 3] *= sg
    n2, d2, s2 = G.normalize_scene(w2c2, depth * sg)
    torch.testing.assert_close(n1, n2, atol=1e-10, rtol=0)
    torch.testing.assert_close(d1, d2, atol=1e-10, rtol=0)
    assert float(s2) == pytest.approx(sg * float(s1), rel=1e-10)


def test_normalize_scene_definition(gen):
    w2c = random_w2c(4, gen)
    depth = torch.rand(4, 3, 3, generator=gen, dtype=torch.float64)
    depth[0, 0, 0] = 0
    n, d, s = G.normalize_scene(w2c, depth)
    torch.testing.assert_close(n[0], torch.eye(4, dtype=torch.float64))
    c = G.camera_centers(n)
    assert (c[1:] - c[0]).norm(dim=-1).mean().item() == pytest.approx(1.0, rel=1e-12)
    c_orig = G.camera_centers(w2c)
    assert float(s) == pytest.approx((c_orig[1:] - c_orig[0]).norm(dim=-1).mean().item(), rel=1e-12)
    assert d[0, 0, 0] == 0
    torch.testing.assert_close(d, depth / s)
    G.check_rotation(n)  # still rigid


def test_normalize_scene_batched_and_float32(gen):
    w2c = random_w2c(6, gen).reshape(2, 3, 3, 4).float()
    n, _, s = G.normalize_scene(w2c)
    assert n.shape == (2, 3, 4, 4) and n.dtype == torch.float32 and s.shape == (2,)
    for b in range(2):
        nb, _, sb = G.normalize_scene(w2c[b])
        torch.testing.assert_close(n[b], nb)
        torch.testing.assert_close(s[b], sb)


def test_normalize_scene_degenerate_raises(gen):
    w2c = random_w2c(1, gen).expand(3, 3, 4).clone()
    w2c[1, :3, :3] = random_rotation(1, gen)[0]  # rotate in place: same centre? no: keep centre
    w2c[1, :3, 3] = -(w2c[1, :3, :3] @ G.camera_centers(w2c[0]))
    with pytest.raises(G.DegenerateSceneError, match="no scale"):
        G.normalize_scene(w2c)
    n, _, s = G.normalize_scene(w2c, scale=2.0)
    assert float(s) == 2.0
    with pytest.raises(G.DegenerateSceneError, match="at least 2 views"):
        G.normalize_scene(w2c[:1])
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="scale must be positive and finite"):
            G.normalize_scene(w2c, scale=bad)


def test_intrinsics_crop_resize_reprojection():
    # A 3D point projects to pixel p; after crop (l, t) and resize by (sx, sy), its pixel must be
    # sx * (p_x - l + 0.5) - 0.5 (pixel-centre convention), which is what the updated K gives; a
    # skewed K keeps the identity (its skew scales with x).
    K = torch.tensor([[50.0, 1.5, 30.2], [0, 55.0, 20.7], [0, 0, 1]], dtype=torch.float64)
    X = torch.tensor([[0.3, -0.2, 2.5]], dtype=torch.float64)
    uv, _ = G.project_points(X, K)
    l, t, sx, sy = 7, 3, 0.5, 0.75
    K2 = G.resize_intrinsics(G.crop_intrinsics(K, l, t), sx, sy)
    uv2, _ = G.project_points(X, K2)
    expected = torch.stack([sx * (uv[:, 0] - l + 0.5) - 0.5, sy * (uv[:, 1] - t + 0.5) - 0.5], -1)
    torch.testing.assert_close(uv2, expected, atol=1e-12, rtol=0)


def test_scale_reference_all_includes_the_reference_camera():
    from depthpe.geometry import mean_center_distance, normalize_scene

    w2c = torch.eye(4, dtype=torch.float64).repeat(1, 4, 1, 1)
    w2c[0, 1:, 0, 3] = torch.tensor([-1.0, -2.0, -3.0])  # centres at x = 1, 2, 3
    assert float(mean_center_distance(w2c)) == pytest.approx(2.0)
    assert float(mean_center_distance(w2c, "all")) == pytest.approx(6.0 / 4)  # (0 + 1 + 2 + 3) / 4
    depth = torch.full((1, 4, 2, 2), 3.0, dtype=torch.float64)
    _, d_others, s_others = normalize_scene(w2c, depth)
    _, d_all, s_all = normalize_scene(w2c, depth, scale_reference="all")
    assert float(s_all) == pytest.approx(float(s_others) * 3 / 4)  # unit changes by S / (S - 1)
    assert torch.allclose(d_all, d_others * 4 / 3)
    # three views without a batch dimension: (0 + 1 + 2) / 3 against (1 + 2) / 2
    assert float(mean_center_distance(w2c[0, :3], "all")) == pytest.approx(1.0)
    assert float(mean_center_distance(w2c[0, :3])) == pytest.approx(1.5)
    with pytest.raises(ValueError, match="scale_reference"):
        mean_center_distance(w2c, "mean")


def _random_cameras(S: int, seed: int = 0):
    """(K (S, 3, 3), w2c (S, 4, 4)) float64: random rotations and centres."""
    gen = torch.Generator().manual_seed(seed)
    axes = torch.nn.functional.normalize(torch.randn(S, 3, generator=gen, dtype=torch.float64), dim=-1)
    R = G.axis_angle_rotation(axes, torch.rand(S, generator=gen, dtype=torch.float64) * 3)
    c = torch.randn(S, 3, generator=gen, dtype=torch.float64)
    w2c = torch.eye(4, dtype=torch.float64).repeat(S, 1, 1)
    w2c[:, :3, :3], w2c[:, :3, 3] = R, -(R @ c[..., None])[..., 0]
    K = torch.tensor([[120.0, 0, 40], [0, 110.0, 30], [0, 0, 1]], dtype=torch.float64).repeat(S, 1, 1)
    return K, w2c


def _angle_deg(Ra: torch.Tensor, Rb: torch.Tensor) -> torch.Tensor:
    rel = Ra @ Rb.transpose(-1, -2)
    return torch.rad2deg(torch.arccos(((rel.diagonal(dim1=-2, dim2=-1).sum(-1) - 1) / 2).clamp(-1, 1)))


def test_axis_angle_rotation_is_a_rotation_by_that_angle():
    axis = torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64)
    R = G.axis_angle_rotation(axis, torch.tensor([math.pi / 2], dtype=torch.float64))
    assert torch.allclose(R[0] @ torch.tensor([1.0, 0, 0], dtype=torch.float64),
                          torch.tensor([0.0, 1, 0], dtype=torch.float64), atol=1e-12)


@pytest.mark.parametrize("views", [2, 5])
def test_perturbed_cameras_err_by_exactly_the_levels_and_the_reference_keeps_its_pose(views):
    K, w2c = _random_cameras(views)
    K2, w2 = G.perturb_cameras(K, w2c, rotation_deg=3.0, translation=0.2, focal=0.1,
                                      generator=torch.Generator().manual_seed(7))
    assert torch.equal(w2[0], w2c[0])  # the reference, exactly
    others = torch.full((views - 1,), 1.0, dtype=torch.float64)
    assert torch.allclose(_angle_deg(w2[1:, :3, :3], w2c[1:, :3, :3]), 3.0 * others)
    moved = (G.camera_centers(w2) - G.camera_centers(w2c)).norm(dim=-1)
    baseline = G.mean_center_distance(w2c)
    assert torch.allclose(moved[1:] / baseline, 0.2 * others)  # two views have a baseline too
    factors = K2[:, 0, 0] / K[:, 0, 0]
    assert torch.allclose((factors - 1).abs(), torch.full((views,), 0.1, dtype=torch.float64))
    assert torch.allclose(K2[:, 1, 1] / K[:, 1, 1], factors) and torch.equal(K2[:, :2, 2], K[:, :2, 2])
    G.check_rotation(w2)  # still rigid


def test_perturbed_batches_err_by_the_levels_in_every_sample():
    # (B, S) cameras: every sample's views turn by the angle and move by its own baseline's fraction
    cams = [_random_cameras(3, seed) for seed in (1, 2)]
    K, w2c = torch.stack([c[0] for c in cams]), torch.stack([c[1] for c in cams])
    _, w2 = G.perturb_cameras(K, w2c, rotation_deg=2.0, translation=0.3, generator=torch.Generator().manual_seed(3))
    assert torch.equal(w2[:, 0], w2c[:, 0])
    assert torch.allclose(_angle_deg(w2[:, 1:, :3, :3], w2c[:, 1:, :3, :3]), torch.full((2, 2), 2.0, dtype=torch.float64))
    moved = (G.camera_centers(w2) - G.camera_centers(w2c)).norm(dim=-1)[:, 1:]
    assert torch.allclose(moved / G.mean_center_distance(w2c)[:, None], torch.full((2, 2), 0.3, dtype=torch.float64))


def test_focal_noise_scales_some_views_up_and_some_down():
    K, w2c = _random_cameras(8)
    K2, _ = G.perturb_cameras(K, w2c, focal=0.1, generator=torch.Generator().manual_seed(0))
    factors = (K2[:, 0, 0] / K[:, 0, 0]).tolist()
    assert {round(f, 9) for f in factors} == {0.9, 1.1}, factors


def test_perturbation_is_seeded_and_zero_levels_return_the_inputs():
    K, w2c = _random_cameras(4)
    draw = lambda seed: G.perturb_cameras(K, w2c, rotation_deg=1.0, translation=0.1,  # noqa: E731
                                                 generator=torch.Generator().manual_seed(seed))
    assert all(torch.equal(a, b) for a, b in zip(draw(1), draw(1)))
    assert not torch.equal(draw(1)[1], draw(2)[1])
    same_K, same_w2c = G.perturb_cameras(K, w2c, generator=torch.Generator().manual_seed(1))
    assert same_K is K and same_w2c is w2c
    # 3x4 in, 3x4 out, float32 kept
    K3, w3 = G.perturb_cameras(K.float(), w2c[:, :3].float(), focal=0.05, generator=torch.Generator().manual_seed(0))
    assert w3.shape == (4, 3, 4) and w3.dtype == torch.float32 and K3.dtype == torch.float32
