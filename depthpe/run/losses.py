"""Depth training loss: L1 + VGGT's multi-scale gradient loss (+ optional confidence term).

All terms work in the normalized depth unit (docs/conventions.md; the model predicts depth divided by the
sample's mean camera distance; the targets are normalized the same way). Inputs are
``(B, ..., H, W)``, normally ``(B, S, H, W)``: the first dimension indexes the B samples of the
batch (a 2-D ``(H, W)`` input is one sample).

Reduction: every term is a mean over the valid pixels **of each sample**, then a plain mean over the
B samples (a sample without valid pixels contributes 0 and still counts in B). A batch's loss is thus
the average of per-sample losses, so splitting a global batch into equal per-process (or
per-micro-batch) batches and averaging their losses, as DDP and gradient accumulation do, gives
exactly the loss of the whole batch, whatever the number of valid pixels in each part.

Formulas for one sample (``V`` = its valid pixels over all its views, ``n = |V|``,
``r_p = |pred_p - gt_p|``):

* ``l1   = sum_{p in V} r_p / max(n, 1)``
* ``grad = (1 / K) * sum_{k=0}^{K-1} L_k`` with stride ``2^k`` (K = ``gradient_scales``, default 4:
  strides 1, 2, 4, 8). At scale k every tensor is plainly subsampled ``x[..., ::2^k, ::2^k]``
  (no pooling), ``D = valid * (pred - gt)`` is the masked residual and

  ``L_k = ( sum |D[.., :, 1:] - D[.., :, :-1]| * m_x  +  sum |D[.., 1:, :] - D[.., :-1, :]| * m_y )
  / max(n_k, 1)``

  where ``m_x`` / ``m_y`` keep only pairs of horizontally / vertically adjacent pixels that are both
  valid and ``n_k`` is the number of valid pixels of the sample at that scale.
* ``conf = sum_{p in V} (c_p * r_p - alpha * log c_p) / max(n, 1)`` (VGGT's aleatoric term;
  ``c = 1 + exp(.)`` >= 1 from the depth head; it can be negative, which is expected).
* ``total = l1_weight * l1 + gradient_weight * grad + conf_weight * conf`` (each term already
  averaged over the B samples).

Choices among / deviations from VGGT (VGGT's ``training/loss.py``):

* The DPPE recipe is plain L1 + gradient loss, so the confidence term is off by default
  (``conf_weight=0``). VGGT's own objective is ``conf + l1 + grad``, i.e. ``conf_weight=1``.
* VGGT normalizes by the valid pixels of the whole (per-GPU) batch; here each sample is normalized
  by its own valid pixels (see Reduction), which makes the loss independent of how the global batch
  is split over processes. With equal valid counts per sample the two agree.
* VGGT drops the worst 2 % of per-pixel L1 and conf values (98 % quantile filter). Off by default
  here (the DPPE recipe does not mention it); ``outlier_quantile=0.98`` reproduces its rule (same
  "nearest" quantile, applied only when more than 1000 values exist and more than 1000 remain), but
  per sample instead of per batch; VGGT's random subsampling above 1e8 values is not reproduced.
* VGGT zeroes all terms when a batch has fewer than 100 valid pixels; here any valid pixel counts
  and a batch without valid pixels gives exactly 0 for every term (with a graph, so ``backward``
  works). VGGT also clamps per-pixel values to 100; we do not (targets are finite by contract).
* Invalid pixels never touch the loss, even if ``pred`` or ``gt`` hold NaN/inf there (``where``,
  not multiplication, is used for masking).

Correspondence loss (``correspondence_loss``, docs/correspondence.md): for a query patch of view i
whose true patch t in view j is known (``depthpe.geometry.pair_targets``), the cross-entropy
of the attention scores s of that query over the h*w key patches of view j,
``CE = logsumexp_k s_k - s_t`` (a softmax restricted to view j's patches: the attention the query
gives view j, renormalized), per head. Same reduction as the depth terms: the mean over the heads
and usable queries of each sample, then over the B samples (a sample without a usable query gives 0).
"""

from __future__ import annotations

import torch

__all__ = ["depth_loss", "l1_term", "gradient_term", "confidence_term", "correspondence_loss"]

_MIN_KEEP = 1000  # VGGT's min_elements for the quantile filter
_CONF_EPS = 1e-6  # floor for log(conf); conf from the model is >= 1, so this only guards misuse


def depth_loss(
    pred: torch.Tensor,
    gt: torch.Tensor,
    valid: torch.Tensor,
    conf: torch.Tensor | None = None,
    *,
    l1_weight: float = 1.0,
    gradient_weight: float = 1.0,
    gradient_scales: int = 4,
    conf_weight: float = 0.0,
    conf_alpha: float = 0.2,
    outlier_quantile: float | None = None,
) -> dict[str, torch.Tensor]:
    """Depth loss of the DPPE recipe (L1 + VGGT multi-scale gradient), terms returned separately.

    Args:
        pred: (B, S, H, W) (or any (B, ..., H, W), or (H, W) for one sample) predicted depth,
            normalized unit; dimension 0 indexes samples (see the module docstring's Reduction).
        gt: same shape, target depth in the same unit (0 where invalid).
        valid: same shape, bool mask of pixels that carry a target.
        conf: optional same-shape confidence (>= 1, VGGT's ``1 + exp``); required if
            ``conf_weight > 0``, ignored otherwise.
        l1_weight, gradient_weight, conf_weight: weights of the terms in ``total``.
            ``gradient_weight=0`` skips computing the gradient term (it is then reported as 0).
        gradient_scales: number of scales K of the gradient loss (strides 1, 2, ..., 2^(K-1)).
        conf_alpha: weight of ``-log c`` in the confidence term (VGGT: 0.2).
        outlier_quantile: None (default) or e.g. 0.98 to drop per-pixel L1/conf values at or above
            that quantile, as VGGT does (see the module docstring).

    Returns:
        dict of 0-dim float32 tensors: ``total``, ``l1``, ``grad`` and, when ``conf_weight > 0``,
        ``conf``, each the mean over samples of the per-sample term. Exact formulas are in the
        module docstring.
    """
    _check_inputs(pred, gt, valid, conf)
    if gradient_scales < 1:
        raise ValueError(f"gradient_scales must be >= 1, got {gradient_scales}; set gradient_weight=0 to disable")
    if conf_weight > 0 and conf is None:
        raise ValueError("conf_weight > 0 needs the confidence map: pass conf=outputs['conf']")
    pred = pred.float()
    gt = gt.float()

    out = {"l1": l1_term(pred, gt, valid, outlier_quantile=outlier_quantile)}
    if gradient_weight != 0:
        out["grad"] = gradient_term(pred, gt, valid, scales=gradient_scales)
    else:
        out["grad"] = torch.zeros((), device=pred.device)
    total = l1_weight * out["l1"] + gradient_weight * out["grad"]
    if conf_weight > 0:
        out["conf"] = confidence_term(
            pred, gt, valid, conf.float(), alpha=conf_alpha, outlier_quantile=outlier_quantile
        )
        total = total + conf_weight * out["conf"]
    out["total"] = total
    return out


def l1_term(
    pred: torch.Tensor, gt: torch.Tensor, valid: torch.Tensor, *, outlier_quantile: float | None = None
) -> torch.Tensor:
    """Mean over samples of the mean |pred - gt| over each sample's valid pixels (0 for a sample
    without valid pixels, with graph).

    Shapes (B, ..., H, W) or (H, W); ``valid`` bool. See the module docstring for the optional
    quantile filter.
    """
    residual = (_fill_invalid(pred, valid, 0.0) - _fill_invalid(gt, valid, 0.0)).abs()
    return _masked_mean(residual, valid, outlier_quantile)


def gradient_term(pred: torch.Tensor, gt: torch.Tensor, valid: torch.Tensor, *, scales: int = 4) -> torch.Tensor:
    """VGGT's multi-scale gradient loss on the masked residual, averaged over ``scales`` scales and
    then over samples.

    Shapes (B, ..., H, W) or (H, W); ``valid`` bool. Scale k subsamples with stride 2^k; each scale
    is normalized by the sample's own number of valid pixels at that scale (0 if none). Formula:
    module docstring.
    """
    pred, gt, valid = _as_samples(pred), _as_samples(gt), _as_samples(valid)
    zero = torch.zeros((), dtype=pred.dtype, device=pred.device)
    residual = _fill_invalid(pred, valid, 0.0) - _fill_invalid(gt, valid, 0.0)  # D = valid * (pred - gt)
    total = torch.zeros(pred.shape[0], dtype=pred.dtype, device=pred.device)
    for k in range(scales):
        step = 2**k
        d = residual[..., ::step, ::step]
        m = valid[..., ::step, ::step]
        pair_x = m[..., :, 1:] & m[..., :, :-1]
        pair_y = m[..., 1:, :] & m[..., :-1, :]
        gx = torch.where(pair_x, (d[..., :, 1:] - d[..., :, :-1]).abs(), zero)
        gy = torch.where(pair_y, (d[..., 1:, :] - d[..., :-1, :]).abs(), zero)
        total = total + (_per_sample_sum(gx) + _per_sample_sum(gy)) / _per_sample_sum(m).clamp_min(1)
    return (total / scales).mean()


def confidence_term(
    pred: torch.Tensor,
    gt: torch.Tensor,
    valid: torch.Tensor,
    conf: torch.Tensor,
    *,
    alpha: float = 0.2,
    outlier_quantile: float | None = None,
) -> torch.Tensor:
    """VGGT's confidence-weighted term: mean over samples of the mean over the sample's valid pixels
    of ``c*|pred-gt| - alpha*log(c)``.

    Shapes (B, ..., H, W) or (H, W); ``conf`` is expected >= 1 (log uses ``max(c, 1e-6)``). A sample
    without valid pixels contributes 0.
    """
    c = _fill_invalid(conf, valid, 1.0).clamp_min(_CONF_EPS)
    residual = (_fill_invalid(pred, valid, 0.0) - _fill_invalid(gt, valid, 0.0)).abs()
    per_pixel = _fill_invalid(c * residual - alpha * torch.log(c), valid, 0.0)
    return _masked_mean(per_pixel, valid, outlier_quantile)


def correspondence_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of attention scores against the true key patch (module docstring), 0-dim float32.

    logits: (B, heads, Q, K) scores of Q queries over the K key patches of their key view (the
    pre-softmax q.k / sqrt(d) of the encoded attention, or any log-weights: the loss only sees their
    softmax over the K keys); target: (B, Q) long, the true key index in [0, K), -1 = no usable
    match (left out). Mean over heads and usable queries per sample, then over samples; 0 with a
    graph when nothing is usable.
    """
    if logits.ndim != 4 or target.shape != (logits.shape[0], logits.shape[2]):
        raise ValueError(f"logits must be (B, heads, Q, K) and target (B, Q), got {tuple(logits.shape)} and "
                         f"{tuple(target.shape)}")
    logits = logits.float()
    usable = target >= 0  # (B, Q)
    picked = logits.gather(-1, target.clamp(min=0)[:, None, :, None].expand(-1, logits.shape[1], -1, 1))[..., 0]
    ce = torch.where(usable[:, None], logits.logsumexp(dim=-1) - picked, torch.zeros((), device=logits.device))
    per_sample = ce.sum(dim=(1, 2)) / (usable.sum(dim=1) * logits.shape[1]).clamp_min(1)
    return per_sample.mean()


def _fill_invalid(x: torch.Tensor, valid: torch.Tensor, fill: float) -> torch.Tensor:
    """x where valid, else ``fill``. Masking the *inputs* (not products) keeps NaN/inf at invalid
    pixels out of both the value and the gradient (a NaN behind ``where`` would still poison backward)."""
    return torch.where(valid, x, torch.full((), fill, dtype=x.dtype, device=x.device))


def _as_samples(x: torch.Tensor) -> torch.Tensor:
    """(B, ..., H, W) unchanged; a 2-D (H, W) map becomes one sample (1, H, W)."""
    return x.unsqueeze(0) if x.ndim == 2 else x


def _per_sample_sum(x: torch.Tensor) -> torch.Tensor:
    """(B, ...) -> (B,) sums (bool counts as 0/1)."""
    return x.reshape(x.shape[0], -1).sum(dim=1)


def _masked_mean(values: torch.Tensor, valid: torch.Tensor, outlier_quantile: float | None) -> torch.Tensor:
    """Mean over samples of sum(values[valid]) / max(#valid, 1) per sample, optionally after VGGT's
    quantile filter within each sample (values are 0 off-mask). (B, ..., H, W) or (H, W) -> 0-dim."""
    values, valid = _as_samples(values), _as_samples(valid)
    if outlier_quantile is None:
        return (_per_sample_sum(values) / _per_sample_sum(valid).clamp_min(1)).mean()
    if not 0.0 < outlier_quantile <= 1.0:
        raise ValueError(f"outlier_quantile must be in (0, 1] or None, got {outlier_quantile}")
    return torch.stack([_quantile_filtered_mean(v[m], v, outlier_quantile) for v, m in zip(values, valid)]).mean()


def _quantile_filtered_mean(selected: torch.Tensor, values: torch.Tensor, outlier_quantile: float) -> torch.Tensor:
    """Mean of ``selected`` (one sample's valid values) after VGGT's quantile filter; 0 (with the
    graph of ``values``) when nothing is selected."""
    n = selected.numel()
    if n > _MIN_KEEP:
        k = round(outlier_quantile * (n - 1)) + 1  # VGGT's "nearest" rule, 1-based for kthvalue
        threshold = selected.detach().kthvalue(k).values
        keep = selected < threshold
        if int(keep.sum()) > _MIN_KEEP:
            selected = selected[keep]
    if selected.numel() == 0:
        return values.sum() * 0.0
    return selected.mean()


def _check_inputs(pred, gt, valid, conf) -> None:
    if pred.ndim < 2:
        raise ValueError(f"pred must be (..., H, W), got shape {tuple(pred.shape)}")
    for name, t in (("gt", gt), ("valid", valid), ("conf", conf)):
        if t is not None and t.shape != pred.shape:
            raise ValueError(
                f"{name} has shape {tuple(t.shape)} but pred has {tuple(pred.shape)}; "
                "resize the target to the prediction's resolution (nearest for depth and masks)"
            )
    if valid.dtype != torch.bool:
        raise TypeError(f"valid must be a bool tensor, got {valid.dtype}; use valid = gt > 0 or .bool()")
