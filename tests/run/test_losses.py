"""Tests for depthpe.run.losses: hand-computed L1 / multi-scale gradient / confidence terms, robustness."""

import math

import pytest
import torch

from depthpe.run.losses import depth_loss, gradient_term


def _example():
    # residual r = pred - gt = [[1, 1, -2], [0, 2, 1]]; pixel (0, 2) is invalid.
    gt = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]).view(1, 1, 2, 3)
    pred = torch.tensor([[2.0, 3.0, 1.0], [4.0, 7.0, 7.0]]).view(1, 1, 2, 3)
    valid = torch.tensor([[True, True, False], [True, True, True]]).view(1, 1, 2, 3)
    return pred, gt, valid


def test_l1_and_gradient_by_hand_with_masking():
    pred, gt, valid = _example()
    # L1 over the 5 valid pixels: (1 + 1 + 0 + 2 + 1) / 5.
    # Masked residual D = [[1, 1, 0], [0, 2, 1]]. Stride 1, x pairs with both pixels valid:
    # row 0: |1-1| = 0 (pair (0,1)-(0,2) excluded); row 1: |2-0| + |1-2| = 3.
    # y pairs: col 0: |0-1| = 1, col 1: |2-1| = 1, col 2 excluded.  L_0 = (3 + 2) / 5 = 1.
    # Stride 2 keeps pixels (0,0), (0,2): only (0,0) valid, no pair -> L_1 = 0; strides 4, 8: 0.
    out = depth_loss(pred, gt, valid, gradient_scales=2)
    assert out["l1"].item() == pytest.approx(1.0)
    assert out["grad"].item() == pytest.approx((1.0 + 0.0) / 2)
    assert out["total"].item() == pytest.approx(1.0 + 0.5)
    assert "conf" not in out
    out4 = depth_loss(pred, gt, valid)  # default 4 scales
    assert out4["grad"].item() == pytest.approx(1.0 / 4)
    # weights
    out_w = depth_loss(pred, gt, valid, gradient_weight=2.0, l1_weight=0.5)
    assert out_w["total"].item() == pytest.approx(0.5 * 1.0 + 2.0 * 0.25)


def test_gradient_strides_by_hand():
    # One row, all valid, residual [0, 1, 2, 0, 4].
    gt = torch.ones(1, 1, 1, 5)
    pred = gt + torch.tensor([0.0, 1.0, 2.0, 0.0, 4.0]).view(1, 1, 1, 5)
    valid = torch.ones(1, 1, 1, 5, dtype=torch.bool)
    # stride 1: (1+1+2+4)/5; stride 2 -> [0, 2, 4]: (2+2)/3; stride 4 -> [0, 4]: 4/2; stride 8 -> [0]: 0/1.
    expected = (8 / 5 + 4 / 3 + 4 / 2 + 0.0) / 4
    assert gradient_term(pred, gt, valid, scales=4).item() == pytest.approx(expected)


def _naive_grad(pred, gt, valid, scales):
    """Loop reference of the VGGT gradient loss over (N, H, W) lists."""
    total = 0.0
    for k in range(scales):
        step = 2**k
        num, count = 0.0, 0
        for n in range(pred.shape[0]):
            p, g, m = pred[n, ::step, ::step], gt[n, ::step, ::step], valid[n, ::step, ::step]
            h, w = p.shape
            d = [[float(p[i, j] - g[i, j]) if m[i, j] else 0.0 for j in range(w)] for i in range(h)]
            count += int(m.sum())
            for i in range(h):
                for j in range(w):
                    if j + 1 < w and m[i, j] and m[i, j + 1]:
                        num += abs(d[i][j + 1] - d[i][j])
                    if i + 1 < h and m[i, j] and m[i + 1, j]:
                        num += abs(d[i + 1][j] - d[i][j])
        total += num / max(count, 1)
    return total / scales


def test_gradient_matches_loop_reference_on_random_batch():
    g = torch.Generator().manual_seed(0)
    pred = torch.rand(2, 3, 9, 11, generator=g, dtype=torch.float64) * 3
    gt = torch.rand(2, 3, 9, 11, generator=g, dtype=torch.float64) * 3
    valid = torch.rand(2, 3, 9, 11, generator=g) > 0.3
    ours = gradient_term(pred, gt, valid, scales=4).item()
    # per sample (its 3 views together), then the mean over the 2 samples
    ref = sum(_naive_grad(pred[b], gt[b], valid[b], 4) for b in range(2)) / 2
    assert ours == pytest.approx(ref, rel=1e-12)


def test_loss_is_a_mean_of_per_sample_losses_so_any_split_agrees():
    """DDP / gradient accumulation average the losses of equal parts of a global batch; with the
    per-sample reduction that equals the loss of the whole batch even when valid counts differ."""
    g = torch.Generator().manual_seed(1)
    pred = torch.rand(4, 2, 16, 16, generator=g, dtype=torch.float64) * 2
    gt = torch.rand(4, 2, 16, 16, generator=g, dtype=torch.float64) * 2
    conf = 1 + torch.rand(4, 2, 16, 16, generator=g, dtype=torch.float64)
    valid = torch.rand(4, 2, 16, 16, generator=g) > 0.2
    valid[2:] &= torch.rand(2, 2, 16, 16, generator=g) > 0.9  # second half: far fewer valid pixels
    valid[3] = False  # a sample without any valid pixel contributes 0 and still counts
    kw = dict(conf_weight=1.0, outlier_quantile=None)  # depth_loss computes in float32
    whole = depth_loss(pred, gt, valid, conf, **kw)
    halves = [depth_loss(pred[i:i + 2], gt[i:i + 2], valid[i:i + 2], conf[i:i + 2], **kw) for i in (0, 2)]
    singles = [depth_loss(pred[i:i + 1], gt[i:i + 1], valid[i:i + 1], conf[i:i + 1], **kw) for i in range(4)]
    for key in ("total", "l1", "grad", "conf"):
        assert whole[key].item() == pytest.approx((halves[0][key] + halves[1][key]).item() / 2, rel=1e-6), key
        assert whole[key].item() == pytest.approx(sum(s[key] for s in singles).item() / 4, rel=1e-6), key
    assert singles[3]["total"].item() == 0.0
    # the per-batch pixel mean (VGGT's normalizer) would not agree: the halves have different counts
    r = (pred - gt).abs()
    pixel_mean = r[valid].mean().item()
    assert abs(pixel_mean - whole["l1"].item()) > 1e-3
    # a 2-D map is one sample
    assert depth_loss(pred[0, 0], gt[0, 0], valid[0, 0])["l1"].item() == pytest.approx(
        r[0, 0][valid[0, 0]].mean().item(), rel=1e-6)


def test_zero_valid_gives_finite_zero_and_backward_works():
    pred = torch.full((2, 2, 4, 4), float("nan"), requires_grad=True)  # even NaN must not leak
    gt = torch.zeros(2, 2, 4, 4)
    valid = torch.zeros(2, 2, 4, 4, dtype=torch.bool)
    conf = torch.ones(2, 2, 4, 4, requires_grad=True)
    out = depth_loss(pred, gt, valid, conf, conf_weight=1.0)
    for key in ("total", "l1", "grad", "conf"):
        assert torch.isfinite(out[key]) and out[key].item() == 0.0, key
    out["total"].backward()
    assert torch.equal(pred.grad, torch.zeros_like(pred))
    assert torch.isfinite(conf.grad).all()


def test_gradient_flows_and_ignores_invalid_nan():
    pred, gt, valid = _example()
    pred = pred.clone()
    pred[0, 0, 0, 2] = float("nan")  # invalid pixel
    gt = gt.clone()
    gt[0, 0, 0, 2] = float("inf")
    pred.requires_grad_(True)
    out = depth_loss(pred, gt, valid, gradient_weight=0.0)
    assert torch.isfinite(out["total"])
    out["total"].backward()
    # d l1 / d pred = sign(r) / 5 on valid pixels, 0 elsewhere.
    expected = torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]).view(1, 1, 2, 3) / 5
    assert torch.allclose(pred.grad, expected)
    pred.grad = None
    depth_loss(pred, gt, valid)["total"].backward()
    assert torch.isfinite(pred.grad).all() and pred.grad[valid].abs().sum() > 0
    assert pred.grad[0, 0, 0, 2] == 0


def test_conf_term_by_hand():
    pred, gt, valid = _example()
    conf = torch.tensor([[1.0, 2.0, 5.0], [3.0, 1.5, 4.0]]).view(1, 1, 2, 3)
    r = [1, 1, None, 0, 2, 1]
    c = [1.0, 2.0, 5.0, 3.0, 1.5, 4.0]
    terms = [ci * ri - 0.2 * math.log(ci) for ri, ci in zip(r, c) if ri is not None]
    expected_conf = sum(terms) / 5
    out = depth_loss(pred, gt, valid, conf, conf_weight=0.5)
    assert out["conf"].item() == pytest.approx(expected_conf)
    assert out["total"].item() == pytest.approx(1.0 + 0.25 + 0.5 * expected_conf)
    out_a = depth_loss(pred, gt, valid, conf, conf_weight=1.0, conf_alpha=0.0)
    assert out_a["conf"].item() == pytest.approx((1 * 1 + 2 * 1 + 3 * 0 + 1.5 * 2 + 4 * 1) / 5)
    with pytest.raises(ValueError, match="conf"):
        depth_loss(pred, gt, valid, conf_weight=1.0)


def test_outlier_quantile_matches_vggt_rule():
    # residuals 1..2000: k = round(0.98 * 1999) + 1 = 1960 -> keep residuals < 1960 -> mean of 1..1959.
    res = torch.arange(1, 2001, dtype=torch.float64).view(1, 1, 40, 50)
    gt = torch.zeros_like(res) + 1.0
    valid = torch.ones_like(res, dtype=torch.bool)
    out = depth_loss(gt + res, gt, valid, outlier_quantile=0.98, gradient_weight=0.0)
    assert out["l1"].item() == pytest.approx(980.0)
    assert depth_loss(gt + res, gt, valid)["l1"].item() == pytest.approx(1000.5)
    # q = 1 is allowed (keeps everything below the largest value)
    assert depth_loss(gt + res, gt, valid, outlier_quantile=1.0, gradient_weight=0.0)["l1"].item() == (
        pytest.approx(1000.0))


def test_outlier_quantile_filters_only_when_more_than_1000_values_remain():
    # VGGT's min_elements = 1000. At q = 1 the filter drops the largest value: with 1001 values 1000
    # would remain (not more than 1000: nothing dropped), with 1002 values 1001 remain (dropped).
    for n, expected in ((1000, 500.5), (1001, 501.0), (1002, 501.0)):
        res = torch.arange(1, n + 1, dtype=torch.float64).view(1, 1, 1, n)
        gt = torch.ones_like(res)
        valid = torch.ones_like(res, dtype=torch.bool)
        l1 = depth_loss(gt + res, gt, valid, outlier_quantile=1.0, gradient_weight=0.0)["l1"].item()
        assert l1 == pytest.approx(expected), n
    # 1050 values: q = 0.98 keeps 1028 (filtered), q = 0.9 would keep 944 (nothing dropped)
    res = torch.arange(1, 1051, dtype=torch.float64).view(1, 1, 1, 1050)
    gt, valid = torch.ones_like(res), torch.ones_like(res, dtype=torch.bool)
    assert depth_loss(gt + res, gt, valid, outlier_quantile=0.98, gradient_weight=0.0)["l1"].item() == (
        pytest.approx(514.5))
    assert depth_loss(gt + res, gt, valid, outlier_quantile=0.9, gradient_weight=0.0)["l1"].item() == (
        pytest.approx(525.5))


def test_outlier_quantile_on_a_sample_without_valid_pixels_gives_zero_with_a_graph():
    pred = torch.randn(2, 1, 4, 4, requires_grad=True)
    valid = torch.zeros(2, 1, 4, 4, dtype=torch.bool)
    valid[0] = True
    out = depth_loss(pred, torch.zeros(2, 1, 4, 4), valid, outlier_quantile=0.98, gradient_weight=0.0)
    assert torch.isfinite(out["l1"])
    assert out["l1"].item() == pytest.approx(pred[0].detach().abs().mean().item() / 2)
    out["total"].backward()
    assert torch.equal(pred.grad[1], torch.zeros_like(pred.grad[1]))


def test_bad_inputs_raise_clear_errors():
    pred, gt, valid = _example()
    with pytest.raises(TypeError, match="bool"):
        depth_loss(pred, gt, valid.float())
    with pytest.raises(ValueError, match="shape"):
        depth_loss(pred, gt[..., :2], valid)
    with pytest.raises(ValueError, match="gradient_scales must be >= 1"):
        depth_loss(pred, gt, valid, gradient_scales=0)
    with pytest.raises(ValueError, match="outlier_quantile"):
        depth_loss(pred, gt, valid, outlier_quantile=0.0)
    # one scale is the smallest allowed: the stride-1 term alone
    assert depth_loss(pred, gt, valid, gradient_scales=1)["grad"].item() == pytest.approx(
        gradient_term(pred, gt, valid, scales=1).item())
