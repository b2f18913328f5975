"""Validation of scene files: schema, values, cameras and multi-view geometric consistency.

``check_scene(path)`` returns a ``SceneReport``; ``check_root(root)`` walks every ``index.json`` under
a root (docs/scene-format.md). The geometric test validates converters and cameras: for
overlapping view pairs (i, j), valid depth of view i is unprojected, moved into view j and projected;
where it lands on valid depth of j, the relative disagreement ``|z_proj - d_j| / d_j`` is measured.
``d_j`` is read by bilinear interpolation of *inverse* depth over the four neighbouring pixels (exact
for planar surfaces, since 1/z is affine in pixel coordinates on a plane); samples whose four
neighbours are not all valid are not used. The scene's figure is the median over all pairs' samples;
occluded points are a minority in overlapping views, so the median measures the cameras and depth,
not the occlusions. ``median_scale`` (median of d_j / z_proj) catches unit errors such as mm vs m.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..geometry import project_points, unproject_depth
from .scene_file import SceneFileError, SceneReader, read_index

__all__ = ["SceneReport", "pair_disagreement", "check_scene", "find_split_dirs", "check_root"]


@dataclass
class SceneReport:
    """Result of checking one scene. ``problems`` non-empty means the scene fails."""

    path: str
    dataset: str = ""
    split: str = ""
    scene_id: str = ""
    num_frames: int = 0
    height: int = 0
    width: int = 0
    valid_fraction: float = math.nan
    pairs_used: int = 0
    median_rel_error: float = math.nan
    median_scale: float = math.nan
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _bilinear_inverse_depth(depth: torch.Tensor, uv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample depth (H, W) at pixel coords uv (N, 2) by bilinear interpolation of 1/depth.

    Returns (depth (N,), ok (N,) bool); ok is False where any of the four neighbours is invalid or
    the point is outside the image.
    """
    H, W = depth.shape
    u, v = uv[:, 0], uv[:, 1]
    u0, v0 = torch.floor(u), torch.floor(v)
    inside = (u0 >= 0) & (v0 >= 0) & (u0 + 1 <= W - 1) & (v0 + 1 <= H - 1)
    u0c = u0.clamp(0, W - 2).long()
    v0c = v0.clamp(0, H - 2).long()
    du, dv = (u - u0).clamp(0, 1), (v - v0).clamp(0, 1)
    d00 = depth[v0c, u0c]
    d01 = depth[v0c, u0c + 1]
    d10 = depth[v0c + 1, u0c]
    d11 = depth[v0c + 1, u0c + 1]
    ok = inside & (d00 > 0) & (d01 > 0) & (d10 > 0) & (d11 > 0)
    inv = lambda d: 1.0 / d.clamp(min=1e-12)  # noqa: E731
    inv_d = (
        inv(d00) * (1 - du) * (1 - dv)
        + inv(d01) * du * (1 - dv)
        + inv(d10) * (1 - du) * dv
        + inv(d11) * du * dv
    )
    return 1.0 / inv_d, ok


def pair_disagreement(
    depth_i: np.ndarray,
    K_i: np.ndarray,
    w2c_i: np.ndarray,
    depth_j: np.ndarray,
    K_j: np.ndarray,
    w2c_j: np.ndarray,
    *,
    max_points: int = 4096,
    valid_i: np.ndarray | None = None,
    valid_j: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Reproject valid depth of view i into view j.

    depth_*: (H, W) z-depth (0 invalid); K_*: (3, 3) pixels; w2c_*: (3, 4) OpenCV world-to-camera;
    valid_*: optional (H, W) bool masks beyond depth > 0. At most ``max_points`` valid pixels of i
    are used (a regular stride). Returns ``(rel_error (M,), ratio d_j / z_proj (M,), overlap)``
    where ``overlap`` is the fraction of used points of i that land on valid depth of j.
    """
    di = torch.from_numpy(np.asarray(depth_i, dtype=np.float64))
    dj = torch.from_numpy(np.asarray(depth_j, dtype=np.float64))
    mask_i = di > 0
    if valid_i is not None:
        mask_i &= torch.from_numpy(np.asarray(valid_i, dtype=bool))
    if valid_j is not None:
        dj = torch.where(torch.from_numpy(np.asarray(valid_j, dtype=bool)), dj, torch.zeros_like(dj))
    idx = torch.nonzero(mask_i.reshape(-1)).squeeze(1)
    if idx.numel() == 0:
        return np.zeros(0), np.zeros(0), 0.0
    stride = max(1, idx.numel() // max_points)
    idx = idx[::stride]
    pts = unproject_depth(
        di, torch.from_numpy(np.asarray(K_i, np.float64)), torch.from_numpy(np.asarray(w2c_i, np.float64))
    ).reshape(-1, 3)[idx]
    uv, z = project_points(
        pts, torch.from_numpy(np.asarray(K_j, np.float64)), torch.from_numpy(np.asarray(w2c_j, np.float64))
    )
    sampled, ok = _bilinear_inverse_depth(dj, uv)
    ok &= z > 1e-9
    overlap = float(ok.double().mean())
    rel = ((z[ok] - sampled[ok]).abs() / sampled[ok]).numpy()
    ratio = (sampled[ok] / z[ok]).numpy()
    return rel, ratio, overlap


def _select_pairs(K: np.ndarray, w2c: np.ndarray, max_pairs: int, seed: int) -> list[tuple[int, int]]:
    """Candidate view pairs: all ordered pairs for small scenes, else consecutive + random pairs."""
    n = len(w2c)
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    if len(pairs) <= max_pairs:
        return pairs
    rng = np.random.default_rng(seed)
    chosen = {(i, i + 1) for i in range(n - 1)}
    chosen = set(list(chosen)[: max_pairs // 2])
    order = rng.permutation(len(pairs))
    for k in order:
        if len(chosen) >= max_pairs:
            break
        chosen.add(pairs[k])
    return sorted(chosen)


def check_scene(
    path: str | Path,
    *,
    max_rel_error: float = 0.05,
    min_valid_fraction: float = 0.01,
    min_overlap: float = 0.1,
    max_pairs: int = 24,
    max_points: int = 4096,
    rotation_atol: float = 1e-3,
    allow_no_overlap: bool = False,
) -> SceneReport:
    """Check one scene file; never raises for a bad file (the problem is recorded in the report).

    Fails (``problems``) on: unreadable or malformed file, non-finite K/w2c/depth, rotations that are
    not orthonormal with det +1 (``rotation_atol``), non-positive focal lengths, mean fraction of
    valid depth below ``min_valid_fraction``, median reprojection disagreement above
    ``max_rel_error``, undecodable images, and no overlapping view pair at all (overlap >=
    ``min_overlap``): with wrong cameras or depth units the reprojected points leave the image, so
    "no overlap" is how most conversion errors look. ``allow_no_overlap`` turns that into a warning
    for datasets whose views are truly disjoint.
    """
    report = SceneReport(path=str(path))
    reader = SceneReader(path)
    try:
        attrs = reader.attrs
        report.dataset, report.split = str(attrs["dataset"]), str(attrs["split"])
        report.scene_id = str(attrs["scene_id"])
        report.num_frames, report.height, report.width = attrs["num_frames"], attrs["height"], attrs["width"]
        K, w2c = reader.read_cameras()
        if not _check_cameras(K, w2c, rotation_atol, report.problems):
            return report
        depths, valids = _read_depths(reader, report)
        for i in sorted({0, report.num_frames - 1}):
            reader.read_image(i)  # decodes; raises SceneFileError if broken
        report.valid_fraction = float(np.mean([v.mean() for v in valids]))
        if report.valid_fraction < min_valid_fraction:
            report.problems.append(
                f"only {100 * report.valid_fraction:.2f}% valid depth (minimum {100 * min_valid_fraction:.2f}%)"
            )
        if report.problems:
            return report
        errors, ratios = _pair_errors(depths, valids, K, w2c, seed=report.num_frames, max_pairs=max_pairs,
                                      max_points=max_points, min_overlap=min_overlap)
        report.pairs_used = len(errors)
        _judge_consistency(report, errors, ratios, max_rel_error, allow_no_overlap)
    except SceneFileError as err:
        report.problems.append(str(err).replace(f"{path}: ", ""))
    except (OSError, KeyError, ValueError) as err:
        report.problems.append(f"unreadable: {err}")
    finally:
        reader.close()
    return report


def _check_cameras(K: np.ndarray, w2c: np.ndarray, rotation_atol: float, problems: list[str]) -> bool:
    """Append camera problems (non-orthonormal rotations, non-positive focal lengths) to ``problems``;
    returns False, after appending one problem, if K or w2c hold non-finite values (nothing else is
    checked then)."""
    if not (np.isfinite(K).all() and np.isfinite(w2c).all()):
        problems.append("non-finite values in K or w2c")
        return False
    R = w2c[:, :3, :3]
    ortho = np.abs(R @ R.transpose(0, 2, 1) - np.eye(3)).max(axis=(1, 2))
    det = np.linalg.det(R)
    bad_rot = np.nonzero((ortho > rotation_atol) | (np.abs(det - 1) > rotation_atol))[0]
    if len(bad_rot):
        problems.append(
            f"{len(bad_rot)} frame(s) with non-orthonormal rotation (first: frame {bad_rot[0]}, "
            f"|RR^T-I|={ortho[bad_rot[0]]:.2g}, det={det[bad_rot[0]]:.4g})"
        )
    bad_f = np.nonzero((K[:, 0, 0] <= 0) | (K[:, 1, 1] <= 0))[0]
    if len(bad_f):
        problems.append(f"{len(bad_f)} frame(s) with non-positive focal length")
    return True


def _read_depths(reader: SceneReader, report: SceneReport) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Every frame's depth and validity mask (depth > 0 and the stored ``valid`` mask, if any); a
    problem is appended to ``report`` if the stored depth holds non-finite values."""
    depths, valids = [], []
    raw_nonfinite = 0
    f = reader._open()
    for i in range(report.num_frames):
        raw = f["depth"][i]
        raw_nonfinite += int((~np.isfinite(raw)).sum())
        d = reader.read_depth(i)
        v = d > 0
        if reader.has_valid():
            v &= f["valid"][i].astype(bool)
        depths.append(d)
        valids.append(v)
    if raw_nonfinite:
        report.problems.append(f"{raw_nonfinite} non-finite depth values (must be stored as 0)")
    return depths, valids


def _pair_errors(depths, valids, K, w2c, *, seed: int, max_pairs: int, max_points: int,
                 min_overlap: float) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Relative disagreements and d_j / z_proj ratios of the selected view pairs whose overlap is at
    least ``min_overlap`` (one array per such pair)."""
    errors, ratios = [], []
    for i, j in _select_pairs(K, w2c, max_pairs, seed=seed):
        rel, ratio, overlap = pair_disagreement(
            depths[i], K[i], w2c[i], depths[j], K[j], w2c[j],
            max_points=max_points, valid_i=valids[i], valid_j=valids[j],
        )
        if overlap >= min_overlap and len(rel):
            errors.append(rel)
            ratios.append(ratio)
    return errors, ratios


def _judge_consistency(report: SceneReport, errors: list[np.ndarray], ratios: list[np.ndarray],
                       max_rel_error: float, allow_no_overlap: bool) -> None:
    """Record the medians of the pairs' disagreements and scales in ``report``, and the problem (or
    warning) for too large a disagreement, no overlapping pair, or a single view."""
    if not errors and report.num_frames > 1:
        message = (
            "no overlapping view pair: reprojected depth never lands on valid depth of another "
            "view (wrong w2c direction, axes, K or depth units?)"
        )
        (report.warnings if allow_no_overlap else report.problems).append(message)
        return
    if not errors:
        report.warnings.append("single view: geometric consistency not measured")
        return
    report.median_rel_error = float(np.median(np.concatenate(errors)))
    report.median_scale = float(np.median(np.concatenate(ratios)))
    if report.median_rel_error > max_rel_error:
        report.problems.append(
            f"median reprojection disagreement {100 * report.median_rel_error:.2f}% > "
            f"{100 * max_rel_error:.2f}% (median scale d_j/z_proj = {report.median_scale:.3f}); "
            "check the w2c/c2w direction, axis conventions, K layout and depth units"
        )


def find_split_dirs(root: str | Path) -> list[Path]:
    """Folders under ``root`` (root included) that hold an ``index.json``, sorted."""
    root = Path(root)
    return sorted({p.parent for p in root.rglob("index.json")})


def check_root(root: str | Path, *, limit: int | None = None, progress: bool = True, **kwargs):
    """Check every scene listed by every index under ``root``.

    Returns ``(reports, index_problems)``: one ``SceneReport`` per listed scene (at most ``limit``
    per split) and a list of index-level problems (a file listed but missing shows up as a failed
    scene; an ``.h5`` file present but not listed is reported as an index problem).
    """
    from tqdm.auto import tqdm

    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"{root} does not exist")
    split_dirs = find_split_dirs(root)
    index_problems: list[str] = []
    jobs: list[Path] = []
    for split_dir in split_dirs:
        try:
            entries = read_index(split_dir)
        except SceneFileError as err:
            index_problems.append(str(err))
            continue
        listed = {e["path"] for e in entries}
        unlisted = sorted(p.name for p in split_dir.glob("*.h5") if p.name not in listed)
        if unlisted:
            index_problems.append(
                f"{split_dir}: {len(unlisted)} .h5 file(s) not listed in index.json (e.g. {unlisted[0]})"
            )
        jobs.extend(split_dir / e["path"] for e in entries[:limit])
    if not split_dirs:
        index_problems.append(f"{root}: no index.json found (expected ROOT/<dataset>/<split>/index.json)")
    reports = [
        check_scene(p, **kwargs)
        for p in tqdm(jobs, desc="checking scenes", unit="scene", disable=not progress)
    ]
    return reports, index_problems
