"""Correspondence lift: attention mass on the true correspondences against uniform attention.

For a usable match (query patch p of view i, view j; ``depthpe.geometry.patch_matches``) and a radius
r, the *mass* is the attention weight the query token puts on the key patches of view j within r
patches of the true target, and the *uniform mass* is what uniform attention over all N keys of the
sample would put there (number of those key patches / N). Summed over every match of every sample,
per global-attention layer and head,

    lift = sum(mass) / sum(uniform mass)

(1 = no better than uniform; the table's ``mass`` column is the mean mass per match). Two controls
use the same matches: ``same_position_lift``, the lift of the window around the query's *own*
grid position in view j (what a 2D-RoPE-like bias towards equal positions earns), and ``view_lift``,
the mass on all patches of view j against uniform (whether the query looks at view j at all).

For URoPE the matches are also binned by the z-depth of the point in the key camera j, each to the
depth anchor nearest in log-depth: ``anchor_rows`` gives the lift per head and anchor bin, and
whether the head group of each bin's own anchor has the highest lift (heads ``[g H/G, (g+1) H/G)``
use anchor g, URoPE's head-wise assignment).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import torch

from ..geometry import PatchMatches, patch_rows_cols, window_masks

__all__ = ["LiftAccumulator", "anchor_bins", "MIN_BIN_PAIRS"]

MIN_BIN_PAIRS = 20  # an anchor bin with fewer matches is left out of the "does its head win" count


def anchor_bins(depth: torch.Tensor, ok: torch.Tensor, anchors: Sequence[float]) -> torch.Tensor:
    """One-hot (..., G) float64: the anchor nearest in log-depth to each depth (...), zeros where
    ``ok`` (same shape as depth) is False. anchors: G positive depths, in depth's unit."""
    a = torch.tensor(list(anchors), dtype=torch.float64, device=depth.device)
    nearest = (depth.double().clamp(min=1e-12).log()[..., None] - a.log()).abs().argmin(dim=-1)
    onehot = torch.nn.functional.one_hot(nearest, len(a)).double()
    return onehot * ok[..., None]


@dataclass
class _LayerSums:
    """Sums of one layer over matches: mass (R, H), uniform (R,), same (R, H), same_uniform (R,),
    view (H,), view_uniform, pairs, bin_mass (R, H, G), bin_uniform (R, G), bin_pairs (G,)."""

    mass: torch.Tensor
    uniform: torch.Tensor
    same: torch.Tensor
    same_uniform: torch.Tensor
    view: torch.Tensor
    bin_mass: torch.Tensor
    bin_uniform: torch.Tensor
    bin_pairs: torch.Tensor
    view_uniform: float = 0.0
    pairs: int = 0
    groups: set = field(default_factory=set)  # anchor groups of the encoding seen (URoPE's G)

    @classmethod
    def zeros(cls, radii: int, heads: int, bins: int) -> "_LayerSums":
        z = lambda *shape: torch.zeros(*shape, dtype=torch.float64)  # noqa: E731
        return cls(z(radii, heads), z(radii), z(radii, heads), z(radii), z(heads), z(radii, heads, bins),
                   z(radii, bins), z(bins))


class LiftAccumulator:
    """Correspondence lift of one dataset, summed over samples (module docstring).

    ``start(matches, num_special)`` before a sample's forward pass, then ``add(layer, probs)`` from
    every global-attention layer (``capture.capture_global_attention``); ``lift_rows``,
    ``layer_rows``, ``anchor_rows`` and ``scalars`` read the result. anchors: URoPE's depth anchors
    (normalized scene unit) for the per-depth analysis, None for other encodings.
    """

    def __init__(self, radii: Sequence[int] = (0, 1), anchors: Sequence[float] | None = None):
        if not radii or any(r < 0 for r in radii):
            raise ValueError(f"radii must be a non-empty list of integers >= 0, got {list(radii)}")
        self.radii = [int(r) for r in radii]
        self.anchors = list(anchors) if anchors else None
        self.layers: dict[int, _LayerSums] = {}
        self.samples = 0
        self._sample = None

    def start(self, matches: PatchMatches, num_special: int) -> None:
        """Prepare the windows of one sample's matches; its tokens are, per view, ``num_special``
        special tokens then the h*w patches (the aggregator's layout)."""
        rows, cols = patch_rows_cols(matches.grid, matches.target.device)
        own = torch.stack([rows, cols], -1)[None, None, :, None].expand_as(matches.target)
        bins = None if self.anchors is None else anchor_bins(matches.depth, matches.ok, self.anchors)
        self._sample = {
            "ok": matches.ok.double(), "num_special": int(num_special), "bins": bins,
            "windows": [window_masks(matches.target, matches.ok, matches.grid, r).double() for r in self.radii],
            "same": [window_masks(own, matches.ok, matches.grid, r).double() for r in self.radii],
        }
        self.samples += 1

    def add(self, layer: int, probs: torch.Tensor, groups: int | None = None) -> None:
        """Add one layer's attention weights probs (B, heads, N, N) of the current sample (rows:
        queries, columns: keys, N = S * (num_special + h*w) view-major). groups: the number of head
        groups with their own anchor (URoPE), None otherwise."""
        s = self._sample
        if s is None:
            raise RuntimeError("LiftAccumulator.add before start: call start(matches, num_special) first")
        B, H, N, _ = probs.shape
        S, P = s["ok"].shape[1], s["ok"].shape[2]
        T = s["num_special"] + P
        if N != S * T:
            raise ValueError(f"attention over {N} tokens, but the matches are for {S} views x {T} tokens")
        ns = s["num_special"]
        patch = probs.double().view(B, H, S, T, S, T)[:, :, :, ns:, :, ns:]  # (B, H, S_i, P, S_j, P)
        G = len(self.anchors) if self.anchors else 0
        sums = self.layers.setdefault(layer, _LayerSums.zeros(len(self.radii), H, G))
        for n, (window, same) in enumerate(zip(s["windows"], s["same"])):
            pair_mass = torch.einsum("bhipjq,bipjq->bhipj", patch, window)
            sums.mass[n] += pair_mass.sum(dim=(0, 2, 3, 4))
            sums.uniform[n] += window.sum() / N
            sums.same[n] += torch.einsum("bhipjq,bipjq->h", patch, same)
            sums.same_uniform[n] += same.sum() / N
            if s["bins"] is not None:
                sums.bin_mass[n] += torch.einsum("bhipj,bipjg->hg", pair_mass, s["bins"])
                sums.bin_uniform[n] += torch.einsum("bipjq,bipjg->g", window, s["bins"]) / N
        sums.view += torch.einsum("bhipjq,bipj->h", patch, s["ok"])
        sums.view_uniform += float(s["ok"].sum()) * P / N
        sums.pairs += int(s["ok"].sum())
        if s["bins"] is not None:
            sums.bin_pairs += s["bins"].sum(dim=(0, 1, 2, 3))
        if groups is not None:
            sums.groups.add(int(groups))

    # -- results ---------------------------------------------------------------------------------
    def lift_rows(self) -> list[dict]:
        """One row per (layer, head, radius): pairs (matches), mass (mean attention mass per match on
        the window), lift, same_position_lift, view_lift (NaN without matches)."""
        rows = []
        for layer, sums in sorted(self.layers.items()):
            for n, r in enumerate(self.radii):
                for h in range(sums.mass.shape[1]):
                    rows.append({"layer": layer, "head": h, "radius": r, "pairs": sums.pairs,
                                 "mass": _ratio(sums.mass[n, h], sums.pairs),
                                 "lift": _ratio(sums.mass[n, h], sums.uniform[n]),
                                 "same_position_lift": _ratio(sums.same[n, h], sums.same_uniform[n]),
                                 "view_lift": _ratio(sums.view[h], sums.view_uniform)})
        return rows

    def layer_rows(self) -> list[dict]:
        """One row per (layer, radius): lift averaged over heads (``lift``; the uniform mass is the
        same for every head, so this is the lift of the average head), the best head and its lift,
        the controls averaged over heads."""
        out = []
        for layer, sums in sorted(self.layers.items()):
            for n, r in enumerate(self.radii):
                lifts = [_ratio(sums.mass[n, h], sums.uniform[n]) for h in range(sums.mass.shape[1])]
                best = max(range(len(lifts)), key=lambda h: -math.inf if math.isnan(lifts[h]) else lifts[h])
                out.append({"layer": layer, "radius": r, "pairs": sums.pairs, "lift": _mean(lifts),
                            "best_head": best, "best_head_lift": lifts[best],
                            "same_position_lift": _ratio(sums.same[n].mean(), sums.same_uniform[n]),
                            "view_lift": _ratio(sums.view.mean(), sums.view_uniform)})
        return out

    def anchor_rows(self, min_pairs: int = MIN_BIN_PAIRS) -> list[dict]:
        """URoPE only (else []): one row per (layer, radius, anchor bin) with the bin's anchor and
        matches, the lift of every head group on it (``group_lift``, a list over groups), the group
        with the highest lift (``winner``) and whether it is the bin's own group (``own_wins``; None
        when the bin has fewer than ``min_pairs`` matches). Empty when the encoding's number of head
        groups is not the number of anchors (the head-wise assignment is then unknown)."""
        if not self.anchors or any(sums.groups != {len(self.anchors)} for sums in self.layers.values()):
            return []
        G = len(self.anchors)
        out = []
        for layer, sums in sorted(self.layers.items()):
            H = sums.mass.shape[1]
            for n, r in enumerate(self.radii):
                head_lift = sums.bin_mass[n] / sums.bin_uniform[n].clamp(min=1e-300)  # (H, G bins)
                group_lift = head_lift.view(G, H // G, G).mean(dim=1)  # (G groups, G bins)
                for b, anchor in enumerate(self.anchors):
                    pairs = int(sums.bin_pairs[b])
                    lifts = [float(x) if pairs else math.nan for x in group_lift[:, b]]
                    winner = int(group_lift[:, b].argmax()) if pairs else None
                    out.append({"layer": layer, "radius": r, "anchor": anchor, "bin": b, "pairs": pairs,
                                "group_lift": lifts, "winner": winner,
                                "own_wins": None if pairs < max(min_pairs, 1) else winner == b})
        return out

    def scalars(self) -> dict[str, float]:
        """Flat numbers for a validation line: ``lift_r{r}`` and ``same_position_lift_r{r}`` (over
        layers and heads), ``lift_r{r}_layer{i}`` (over heads), ``pairs`` (matches per layer) and,
        for URoPE, ``anchor_wins_r{r}`` (fraction of (layer, bin) where the bin's own head group wins)."""
        rows = self.layer_rows()
        out: dict[str, float] = {}
        for r in self.radii:
            mine = [row for row in rows if row["radius"] == r]
            out[f"lift_r{r}"] = _mean([row["lift"] for row in mine])
            out[f"same_position_lift_r{r}"] = _mean([row["same_position_lift"] for row in mine])
            out.update({f"lift_r{r}_layer{row['layer']}": row["lift"] for row in mine})
            wins = [row["own_wins"] for row in self.anchor_rows() if row["radius"] == r and row["own_wins"] is not None]
            if wins:
                out[f"anchor_wins_r{r}"] = sum(wins) / len(wins)
        out["pairs"] = float(max((s.pairs for s in self.layers.values()), default=0))
        return out


def _ratio(num, den) -> float:
    num, den = float(num), float(den)
    return num / den if den > 0 else math.nan


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else math.nan
