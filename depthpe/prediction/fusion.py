"""Multi-view consistency fusion of predicted depth maps (the classic MVS fusion check), pure torch.

A pixel ``p`` of view ``i`` with depth ``d_i(p) > 0`` is lifted to the world point ``X`` and projected
into a source view ``j``: pixel ``q`` (continuous), depth ``z``. View ``j`` *agrees* when

* ``q`` lies inside view ``j`` (its nearest pixel) and ``d_j`` there (nearest, so that depth edges are
  not blended) is > 0;
* ``|z - d_j(q)| <= rel_threshold * d_j(q)`` (relative depth agreement), and
* optionally, the source's own point ``X_j`` (pixel ``q`` lifted with ``d_j(q)``) projected back into
  view ``i`` lands within ``pixel_threshold`` pixels of ``p`` (the reprojection round trip).

A pixel is kept when at least ``min_views`` source views agree; its fused point is the mean of ``X``
and the ``X_j`` of the agreeing views (the merge of MVSNet-style fusion; every kept pixel still gives
one point). The agreeing views and where ``p`` lands in them (``q``) form the point's track.

Conventions (docs/conventions.md): depth is z-depth, K OpenCV pixel intrinsics (pixel centres at
integer coordinates), w2c OpenCV world-to-camera (3, 4). Everything is computed in float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..geometry import pixel_grid, project_points, unproject_depth

__all__ = ["SourceCheck", "ViewFusion", "check_source", "fuse_view", "consistency_masks"]

#: Default relative depth agreement (1 %, as in MVSNet's and COLMAP's fusion defaults).
DEFAULT_REL_THRESHOLD = 0.01


@dataclass
class SourceCheck:
    """One source view checked against a reference view (all (H, W) over the reference's pixels):
    ``ok`` bool agreement, ``uv`` (H, W, 2) float64 where the pixel projects into the source
    (OpenCV pixels), ``points`` (H, W, 3) float64 the source's own world point there."""

    ok: np.ndarray
    uv: np.ndarray
    points: np.ndarray


@dataclass
class ViewFusion:
    """The fusion of one reference view: ``count`` (H, W) int agreeing source views, ``keep`` (H, W)
    bool (depth > 0 and count >= min_views), ``points`` (H, W, 3) float64 fused world points,
    ``sources`` the indices of the source views checked, ``checks`` their ``SourceCheck``."""

    count: np.ndarray
    keep: np.ndarray
    points: np.ndarray
    sources: list
    checks: list


def _t(a) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a, np.float64))


def check_source(depth_ref, K_ref, w2c_ref, depth_src, K_src, w2c_src, rel_threshold: float = DEFAULT_REL_THRESHOLD,
                 pixel_threshold: float | None = None) -> SourceCheck:
    """Does the source view agree with each pixel of the reference view? (module docstring).

    depth_*: (H, W) and (H', W') z-depth (0 = invalid); K_*: (3, 3); w2c_*: (3, 4) OpenCV. Returns a
    ``SourceCheck`` over the reference's (H, W) pixels."""
    d_ref, d_src = _t(depth_ref), _t(depth_src)
    H, W = d_ref.shape
    Hs, Ws = d_src.shape
    X = unproject_depth(d_ref, _t(K_ref), _t(w2c_ref)).reshape(-1, 3)
    uv, z = project_points(X, _t(K_src), _t(w2c_src))
    col, row = uv[:, 0].round().long(), uv[:, 1].round().long()
    inside = (z > 0) & (col >= 0) & (col < Ws) & (row >= 0) & (row < Hs)
    sampled = torch.zeros_like(z)
    sampled[inside] = d_src[row[inside], col[inside]]
    ok = inside & (sampled > 0) & (d_ref.reshape(-1) > 0)
    ok &= (z - sampled).abs() <= rel_threshold * sampled
    rays = torch.cat([uv, torch.ones_like(z)[:, None]], dim=1) @ torch.linalg.inv(_t(K_src)).T
    R, t = _t(w2c_src)[:, :3], _t(w2c_src)[:, 3]
    X_src = (rays * sampled[:, None] - t) @ R  # R^T (x_cam - t), row vectors
    if pixel_threshold is not None:
        back, _ = project_points(X_src, _t(K_ref), _t(w2c_ref))
        grid = pixel_grid(H, W, dtype=torch.float64).reshape(-1, 2)
        ok &= (back - grid).norm(dim=1) <= pixel_threshold
    return SourceCheck(ok.reshape(H, W).numpy(), uv.reshape(H, W, 2).numpy(), X_src.reshape(H, W, 3).numpy())


def fuse_view(i: int, depth, K, w2c, sources, min_views: int = 1, rel_threshold: float = DEFAULT_REL_THRESHOLD,
              pixel_threshold: float | None = None) -> ViewFusion:
    """Fuse reference view ``i`` against ``sources`` (indices of other views). depth: sequence of
    (H, W) z-depth maps; K: (V, 3, 3); w2c: (V, 3, 4). ``min_views`` 0 keeps every pixel with
    depth > 0 (its point is still merged with the agreeing views)."""
    d = np.asarray(depth[i], np.float64)
    X = unproject_depth(_t(d), _t(K[i]), _t(w2c[i])).numpy()
    sources = [j for j in sources if j != i]
    checks = [check_source(d, K[i], w2c[i], depth[j], K[j], w2c[j], rel_threshold, pixel_threshold) for j in sources]
    count = np.zeros(d.shape, np.int64)
    total = X.copy()
    for c in checks:
        count += c.ok
        total += np.where(c.ok[..., None], c.points, 0.0)
    keep = (d > 0) & (count >= min_views)
    return ViewFusion(count, keep, total / (1 + count)[..., None], sources, checks)


def consistency_masks(depth, K, w2c, sources=None, min_views: int = 1, rel_threshold: float = DEFAULT_REL_THRESHOLD,
                      pixel_threshold: float | None = None) -> list[np.ndarray]:
    """(H, W) bool keep-mask of every view (``fuse_view``). sources: per view the indices of its
    source views (None: all other views)."""
    V = len(depth)
    sources = sources or [list(range(V))] * V
    return [fuse_view(i, depth, K, w2c, sources[i], min_views, rel_threshold, pixel_threshold).keep for i in range(V)]
