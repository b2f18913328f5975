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
from .validation import ROTATION_ATOL, camera_problems

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
    rotation_atol: float = ROTATION_ATOL,
    allow_no_overlap: bool = False,
    expected: dict | None = None,
) -> SceneReport:
    """Check one scene file; never raises for a bad file (the problem is recorded in the report).

    Fails (``problems``) on: unreadable or malformed file, a shape beyond the format's limits
    (``validation.MAX_FRAMES`` / ``MAX_FRAME_SIDE``, checked before anything is read), invalid
    cameras (``validation.camera_problems``: non-finite, non-positive focal length, rotation not
    orthonormal with det +1 within ``rotation_atol``, principal point far outside the image),
    non-finite or negative stored depth, any frame whose image is truncated or cannot be decoded
    (every frame is decoded), mean fraction of valid depth below ``min_valid_fraction``, median
    reprojection disagreement above ``max_rel_error``, no overlapping view pair at all (overlap >=
    ``min_overlap``): with wrong cameras or depth units the reprojected points leave the image, so
    "no overlap" is how most conversion errors look (``allow_no_overlap`` turns that into a
    warning for datasets whose views are truly disjoint), and, given the scene's index entry
    ``expected``, a frame count or size that differs from it.
    Memory: one frame at a time, plus the depth of the frames of the examined view pairs.
    """
    report = SceneReport(path=str(path))
    reader = SceneReader(path)
    try:
        attrs = reader.attrs
        report.dataset, report.split = str(attrs["dataset"]), str(attrs["split"])
        report.scene_id = str(attrs["scene_id"])
        report.num_frames, report.height, report.width = attrs["num_frames"], attrs["height"], attrs["width"]
        _compare_with_index(report, expected)
        K, w2c = reader.read_cameras()
        report.problems += camera_problems(K, w2c, report.height, report.width, rotation_atol)
        if not (np.isfinite(K).all() and np.isfinite(w2c).all()):
            return report
        pairs = _select_pairs(K, w2c, max_pairs, seed=report.num_frames)
        depths, valids = _scan_depths(reader, report, {k for pair in pairs for k in pair})
        _decode_images(reader, report)
        if report.valid_fraction < min_valid_fraction:
            report.problems.append(
                f"only {100 * report.valid_fraction:.2f}% valid depth (minimum {100 * min_valid_fraction:.2f}%)"
            )
        if report.problems:
            return report
        errors, ratios = _pair_errors(pairs, depths, valids, K, w2c, max_points=max_points, min_overlap=min_overlap)
        report.pairs_used = len(errors)
        _judge_consistency(report, errors, ratios, max_rel_error, allow_no_overlap)
    except SceneFileError as err:
        report.problems.append(str(err).replace(f"{path}: ", ""))
    except (OSError, KeyError, ValueError) as err:
        report.problems.append(f"unreadable: {err}")
    finally:
        reader.close()
    return report


def _compare_with_index(report: SceneReport, expected: dict | None) -> None:
    """Append a problem for each of num_frames, height, width where the index entry ``expected``
    disagrees with the file."""
    for key in ("num_frames", "height", "width") if expected else ():
        if key in expected and expected[key] != getattr(report, key):
            report.problems.append(
                f"index.json says {key}={expected[key]!r} but the file has {getattr(report, key)}; "
                "rewrite the index (reconvert, or write_index with the entries of write_scene)"
            )


def _scan_depths(reader: SceneReader, report: SceneReport, keep: set[int]) -> tuple[dict, dict]:
    """Read every frame's depth once, one at a time: set ``report.valid_fraction`` (mean over frames
    of the fraction of depth > 0 within the stored ``valid`` mask) and append problems for
    non-finite or negative stored values. Returns ``(depths, valids)``: {frame: (H, W)} for the
    frames in ``keep`` only."""
    depths, valids, fractions = {}, {}, []
    nonfinite = negative = negative_frames = 0
    for i in range(report.num_frames):
        raw = reader.read_raw_depth(i)
        finite = np.isfinite(raw)
        nonfinite += int((~finite).sum())
        neg = int((raw < 0).sum())
        negative, negative_frames = negative + neg, negative_frames + (neg > 0)
        d = np.where(finite & (raw > 0), raw, np.float32(0))
        v = d > 0
        stored = reader.read_valid(i)
        if stored is not None:
            v &= stored
        fractions.append(v.mean())
        if i in keep:
            depths[i], valids[i] = d, v
    report.valid_fraction = float(np.mean(fractions))
    if nonfinite:
        report.problems.append(f"{nonfinite} non-finite depth values (must be stored as 0)")
    if negative:
        report.problems.append(
            f"{negative} negative depth values in {negative_frames} frame(s) (invalid depth must be stored as 0; "
            "readers treat negative depth as invalid)"
        )
    return depths, valids


def _decode_images(reader: SceneReader, report: SceneReport) -> None:
    """Decode the image of every frame; append one problem naming the count and the first failure."""
    failed = []
    for i in range(report.num_frames):
        try:
            reader.read_image(i)
        except SceneFileError as err:
            failed.append(str(err).replace(f"{reader.path}: ", ""))
    if failed:
        report.problems.append(
            f"{len(failed)} frame(s) with a truncated or undecodable image (first: {failed[0]})"
        )


def _pair_errors(pairs, depths, valids, K, w2c, *, max_points: int,
                 min_overlap: float) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Relative disagreements and d_j / z_proj ratios of the view ``pairs`` whose overlap is at
    least ``min_overlap`` (one array per such pair); ``depths`` / ``valids`` map frame -> (H, W)."""
    errors, ratios = [], []
    for i, j in pairs:
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
    per split) and a list of index-level problems (an index that ``read_index`` refuses, e.g. a path
    outside its split folder or a scene listed twice, and an ``.h5`` file present but not listed; a
    file listed but missing shows up as a failed scene). Each scene is compared with its index
    entry. A failure while checking one scene (even ``MemoryError``) fails that scene only.
    """
    from tqdm.auto import tqdm

    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"{root} does not exist")
    split_dirs = find_split_dirs(root)
    index_problems: list[str] = []
    jobs: list[tuple[Path, dict]] = []
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
        jobs.extend((split_dir / e["path"], e) for e in entries[:limit])
    if not split_dirs:
        index_problems.append(f"{root}: no index.json found (expected ROOT/<dataset>/<split>/index.json)")
    reports = [
        _check_contained(path, entry, kwargs)
        for path, entry in tqdm(jobs, desc="checking scenes", unit="scene", disable=not progress)
    ]
    return reports, index_problems


def _check_contained(path: Path, entry: dict, kwargs: dict) -> SceneReport:
    """``check_scene(path, expected=entry, **kwargs)``; any exception it raises (a bug, or memory
    running out on a huge but legal scene) becomes a failed report of that scene."""
    try:
        return check_scene(path, expected=entry, **kwargs)
    except Exception as err:  # noqa: BLE001 - one scene must never stop the check of the others
        report = SceneReport(path=str(path), scene_id=str(entry.get("scene_id", "")))
        report.problems.append(f"check failed: {type(err).__name__}: {err}")
        return report
