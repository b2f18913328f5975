"""Validation of scene files: schema, values, cameras and multi-view geometric consistency.

``check_scene(path)`` returns a ``SceneReport``; ``check_root(root)`` walks every ``index.json`` under
a root (docs/scene-format.md). The geometric test validates converters and cameras: for view pairs
(i, j), valid depth of view i is unprojected, moved into view j and projected. Where it lands, the
four neighbouring depths of j decide (``pair_disagreement``): a point behind a clearly nearer
surface (``occlusion_margin``, 10 %) is *occluded*, hidden from j and not an error; a point on a
smooth valid surface of j is *co-visible* and its relative disagreement ``|z_proj - d_j| / d_j`` is
measured, ``d_j`` read by bilinear interpolation of inverse depth (exact on planes); points on a
depth edge of j are ambiguous and not used. The scene's figure is the median over the co-visible
points of the overlapping pairs, and the occluded fraction is reported separately.
``median_scale`` (median of d_j / z_proj) hints at unit errors. When the data disagree, the known
convention bugs (c2w stored as w2c, OpenGL axes, depth units off by 1000, range stored as z) are
tried; one that fits clearly better fails the scene and is named.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import torch

from ...geometry import mean_center_distance, project_points, scale_is_degenerate, unproject_depth
from depthpe.scenes.format.limits import MIN_SCALE_RATIO
from ..parallel import ordered_map
from .scene_file import SceneFileError, SceneReader, read_index
from .check_config import CheckThresholds
from .limits import ROTATION_ATOL, camera_problems, frame_size_problem
from depthpe.scenes.threads import one_thread, use_one_thread

_DEFAULTS = CheckThresholds()  # the defaults of check_scene and pair_disagreement: depthpe check's

__all__ = ["SceneReport", "PairStats", "pair_disagreement", "check_scene", "camera_motion_problem", "find_split_dirs",
           "check_root"]

# Scenes per worker process at the least: a spawned worker imports torch (2-3 s), about the time
# of checking 8 small scenes, so fewer scenes than that are not worth a worker of their own.
SCENES_PER_WORKER = 8

# A reprojected point counts as in front of view j when its depth there exceeds this fraction of
# view i's median depth (relative, so the test is the same in mm, m or km).
_NEAR_PLANE = 1e-6


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
    occluded_fraction: float = math.nan
    covisible_fraction: float = math.nan
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _sample_neighbours(depth: torch.Tensor, uv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sample depth (H, W) at pixel coords uv (N, 2) from its four neighbouring pixels.

    Returns ``(interp (N,), neighbours (N, 4), inside (N,) bool)``: ``interp`` is the bilinear
    interpolation of 1/depth (exact on planes; meaningful only where all four neighbours are valid),
    ``neighbours`` the four depths (0 = invalid), ``inside`` whether all four lie in the image.
    """
    H, W = depth.shape
    u, v = uv[:, 0], uv[:, 1]
    u0, v0 = torch.floor(u), torch.floor(v)
    inside = (u0 >= 0) & (v0 >= 0) & (u0 + 1 <= W - 1) & (v0 + 1 <= H - 1)
    u0c = u0.clamp(0, W - 2).long()
    v0c = v0.clamp(0, H - 2).long()
    du, dv = (u - u0).clamp(0, 1), (v - v0).clamp(0, 1)
    nb = torch.stack([depth[v0c, u0c], depth[v0c, u0c + 1], depth[v0c + 1, u0c], depth[v0c + 1, u0c + 1]], 1)
    weights = torch.stack([(1 - du) * (1 - dv), du * (1 - dv), (1 - du) * dv, du * dv], 1)
    inverse = torch.where(nb > 0, 1.0 / nb, torch.zeros_like(nb))  # no absolute floor: any depth unit works
    interp = 1.0 / (weights * inverse).sum(1)
    return interp, torch.where(inside[:, None], nb, torch.zeros_like(nb)), inside


@dataclass
class PairStats:
    """Reprojection of view i's valid depth into view j (``pair_disagreement``).

    ``rel`` / ``ratio``: relative disagreement ``|z_proj - d_j| / d_j`` and ``d_j / z_proj`` of the
    co-visible points; ``used``: points of i reprojected; ``covisible``: points landing on a smooth
    valid surface of j that is not clearly nearer; ``occluded``: points landing behind a clearly
    nearer surface of j (hidden from j: not an error). The rest left j's image, landed on invalid
    depth or on a depth edge of j (ambiguous, not used).
    """

    rel: np.ndarray
    ratio: np.ndarray
    used: int = 0
    covisible: int = 0
    occluded: int = 0

    @property
    def overlap(self) -> float:
        """Fraction of the used points that are co-visible in j."""
        return self.covisible / self.used if self.used else 0.0


def pair_disagreement(
    depth_i: np.ndarray,
    K_i: np.ndarray,
    w2c_i: np.ndarray,
    depth_j: np.ndarray,
    K_j: np.ndarray,
    w2c_j: np.ndarray,
    *,
    max_points: int = _DEFAULTS.max_points,
    valid_i: np.ndarray | None = None,
    valid_j: np.ndarray | None = None,
    occlusion_margin: float = _DEFAULTS.occlusion_margin,
) -> PairStats:
    """Reproject valid depth of view i into view j, occlusion-aware.

    depth_*: (H, W) z-depth (0 invalid); K_*: (3, 3) pixels; w2c_*: (3, 4) OpenCV world-to-camera;
    valid_*: optional (H, W) bool masks beyond depth > 0. At most ``max_points`` valid pixels of i
    are used (a regular stride). A point whose projected depth ``z`` exceeds the nearest of the four
    neighbouring depths of j by more than ``occlusion_margin`` (relative) is occluded: j sees a
    clearly nearer surface there. A point is co-visible when it is not occluded, lies in front of j
    and its four neighbours are valid and agree within ``occlusion_margin`` (no depth edge).
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
        return PairStats(np.zeros(0), np.zeros(0))
    idx = idx[:: max(1, idx.numel() // max_points)]
    near = _NEAR_PLANE * float(di.reshape(-1)[idx].median())  # relative to the scene's depth: any unit
    pts = unproject_depth(
        di, torch.from_numpy(np.asarray(K_i, np.float64)), torch.from_numpy(np.asarray(w2c_i, np.float64))
    ).reshape(-1, 3)[idx]
    uv, z = project_points(
        pts, torch.from_numpy(np.asarray(K_j, np.float64)), torch.from_numpy(np.asarray(w2c_j, np.float64)),
        eps=near,
    )
    interp, nb, inside = _sample_neighbours(dj, uv)
    ahead = inside & (z > near)
    nearest = torch.where(nb > 0, nb, torch.full_like(nb, math.inf)).min(1).values
    occluded = ahead & (nb > 0).any(1) & (z > nearest * (1 + occlusion_margin))
    smooth = (nb > 0).all(1) & (nb.max(1).values <= nb.min(1).values * (1 + occlusion_margin))
    cov = ahead & smooth & ~occluded
    rel = ((z[cov] - interp[cov]).abs() / interp[cov]).numpy()
    ratio = (interp[cov] / z[cov]).numpy()
    return PairStats(rel, ratio, used=int(idx.numel()), covisible=int(cov.sum()), occluded=int(occluded.sum()))


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
    max_rel_error: float = _DEFAULTS.max_rel_error,
    min_valid_fraction: float = _DEFAULTS.min_valid_fraction,
    min_overlap: float = _DEFAULTS.min_overlap,
    max_pairs: int = _DEFAULTS.max_pairs,
    max_points: int = _DEFAULTS.max_points,
    rotation_atol: float = ROTATION_ATOL,
    allow_no_overlap: bool = _DEFAULTS.allow_no_overlap,
    expected: dict | None = None,
    occlusion_margin: float = _DEFAULTS.occlusion_margin,
    diagnose: bool = True,
    min_scale_ratio: float = MIN_SCALE_RATIO,
) -> SceneReport:
    """Check one scene file; never raises for a bad file (the problem is recorded in the report).

    Fails (``problems``) on: unreadable or malformed file, a shape beyond the format's limits
    (``validation.MAX_FRAMES`` / ``MAX_FRAME_SIDE``, checked before anything is read), frames too
    small to use (``limits.frame_size_problem``, the rule training applies too; nothing else is
    judged then), invalid
    cameras (``validation.camera_problems``: non-finite, non-positive focal length, rotation not
    orthonormal with det +1 within ``rotation_atol``, principal point far outside the image),
    non-finite or negative stored depth, any frame whose image is truncated or cannot be decoded
    (every frame is decoded), mean fraction of valid depth below ``min_valid_fraction``, median
    reprojection disagreement of the co-visible points above ``max_rel_error`` (points behind a
    surface of the other view nearer by more than ``occlusion_margin`` are occluded, counted in
    ``occluded_fraction`` and not judged), a known convention bug that explains the data clearly
    better than the stored reading (``diagnose``; c2w for w2c, OpenGL axes, depth units off by
    1000, range for z), cameras that do not move (``camera_motion_problem``: the mean distance of
    the camera centres to frame 0's at most ``min_scale_ratio`` times the median valid depth, the
    test training and evaluation apply to their samples; judged last, when nothing else failed),
    no overlapping view pair at all (co-visible fraction >=
    ``min_overlap``): with wrong cameras or depth units the reprojected points leave the image, so
    "no overlap" is how most conversion errors look (``allow_no_overlap`` turns that into a
    warning for datasets whose views are truly disjoint), and, given the scene's index entry
    ``expected``, a frame count or size that differs from it.
    Memory: one frame at a time, plus the depth of the frames of the examined view pairs.
    """
    report = SceneReport(path=str(path))
    reader = SceneReader(path)
    try:
        _read_header(report, reader.attrs)
        _compare_with_index(report, expected)
        too_small = frame_size_problem(report.height, report.width)
        if too_small:
            report.problems.append(too_small)
            return report
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
        _check_geometry(report, pairs, depths, valids, K, w2c, max_rel_error=max_rel_error,
                        allow_no_overlap=allow_no_overlap, diagnose=diagnose, max_points=max_points,
                        min_overlap=min_overlap, occlusion_margin=occlusion_margin)
        motion = camera_motion_problem(w2c, [d[valids[k]] for k, d in depths.items()], min_scale_ratio)
        if motion and not report.problems:  # a named convention bug (depth units) explains it better
            report.problems.append(motion)
    except SceneFileError as err:
        report.problems.append(str(err).replace(f"{path}: ", ""))
    except (OSError, KeyError, ValueError) as err:
        report.problems.append(f"unreadable: {err}")
    finally:
        reader.close()
    return report


def camera_motion_problem(w2c: np.ndarray, valid_depths: list[np.ndarray],
                          min_scale_ratio: float = MIN_SCALE_RATIO) -> str | None:
    """Why a scene's cameras give it no scale, or None. w2c: (N, 3, 4) OpenCV world-to-camera;
    valid_depths: 1-d arrays of valid depth of some of its frames. The scene's baseline is the mean
    distance of the camera centres to frame 0's (``geometry.mean_center_distance``); it fails when
    it is rounding noise of the positions (``geometry.scale_is_degenerate``) or at most
    ``min_scale_ratio`` times the median valid depth. Both tests are relative, so the verdict is the
    same in any unit. A single frame has no baseline to test (None)."""
    if len(w2c) < 2:
        return None
    w2c_t = torch.from_numpy(np.asarray(w2c, np.float64))
    baseline = mean_center_distance(w2c_t)
    values = np.concatenate([np.asarray(v, np.float64).reshape(-1) for v in valid_depths] or [np.zeros(0)])
    median = float(np.median(values)) if values.size else math.nan
    if not bool(scale_is_degenerate(baseline, w2c_t)) and not float(baseline) <= min_scale_ratio * median:
        return None
    return (f"the cameras do not move: their centres lie {float(baseline):.3g} from frame 0's on average, "
            f"at most {min_scale_ratio:g} x the median depth {median:.3g}, so the scene has no scale and "
            "training and evaluation skip its samples (a pure rotation, or translations not stored in w2c?)")


def _read_header(report: SceneReport, attrs: dict) -> None:
    """Copy the scene's identity and size from its file attributes into ``report``."""
    report.dataset, report.split = str(attrs["dataset"]), str(attrs["split"])
    report.scene_id = str(attrs["scene_id"])
    report.num_frames, report.height, report.width = attrs["num_frames"], attrs["height"], attrs["width"]


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


@dataclass
class _Measure:
    """Reprojection statistics of a scene's examined pairs: ``errors`` / ``ratios`` hold one array per
    overlapping pair (co-visible fraction >= min_overlap); counts are summed over all pairs."""

    errors: list = field(default_factory=list)
    ratios: list = field(default_factory=list)
    used: int = 0
    covisible: int = 0
    occluded: int = 0

    @property
    def median(self) -> float:
        """Median disagreement over the co-visible points of the overlapping pairs (NaN if none)."""
        return float(np.median(np.concatenate(self.errors))) if self.errors else math.nan


def _measure(pairs, depths, valids, K, w2c, *, max_points: int, min_overlap: float,
             occlusion_margin: float) -> _Measure:
    """Reproject every pair of ``pairs``; ``depths`` / ``valids`` map frame -> (H, W)."""
    m = _Measure()
    for i, j in pairs:
        st = pair_disagreement(
            depths[i], K[i], w2c[i], depths[j], K[j], w2c[j],
            max_points=max_points, valid_i=valids[i], valid_j=valids[j], occlusion_margin=occlusion_margin,
        )
        m.used, m.covisible, m.occluded = m.used + st.used, m.covisible + st.covisible, m.occluded + st.occluded
        if st.overlap >= min_overlap and len(st.rel):
            m.errors.append(st.rel)
            m.ratios.append(st.ratio)
    return m


def _range_to_z(depth: np.ndarray, K: np.ndarray) -> np.ndarray:
    """z-depth of a map that holds the distance along each pixel's ray (range): d / |K^-1 [u, v, 1]|."""
    H, W = depth.shape
    v, u = np.mgrid[0:H, 0:W].astype(np.float64)
    rays = np.stack([u, v, np.ones_like(u)], -1) @ np.linalg.inv(K).T
    return (depth / np.linalg.norm(rays, axis=-1)).astype(np.float32)


def _alternatives(depths: dict, K: np.ndarray, w2c: np.ndarray):
    """Yield ``(reading, depths, w2c)`` for the convention bugs the check can name: each is the data
    re-read as if it had been stored with that mistake."""
    R, t = w2c[:, :, :3], w2c[:, :, 3:]
    Rt = R.transpose(0, 2, 1)
    yield "w2c holds camera-to-world (c2w) matrices", depths, np.concatenate([Rt, -Rt @ t], axis=2)
    yield ("the camera axes are OpenGL/Blender (y up, z backward), not OpenCV", depths,
           np.diag([1.0, -1.0, -1.0]) @ w2c)
    yield ("depth is 1000x the cameras' unit (mm depth with m cameras?)",
           {k: d / 1000 for k, d in depths.items()}, w2c)
    yield ("depth is 1/1000 of the cameras' unit (m depth with mm cameras?)",
           {k: d * 1000 for k, d in depths.items()}, w2c)
    yield ("depth holds the distance along the ray (range), not z-depth",
           {k: _range_to_z(d, K[k]) for k, d in depths.items()}, w2c)


def _diagnose(stored: _Measure, depths: dict, K: np.ndarray, w2c: np.ndarray, measure,
              max_rel_error: float) -> str | None:
    """Name the convention bug that explains the data clearly better than the stored reading, or
    None. Clearly better: at least half as many co-visible points and a median disagreement under
    half the stored one, or, where the stored reading has no overlapping pair, under a fifth of
    ``max_rel_error`` (a bug's correct reading fits to the data's noise; a wrong one by chance
    rarely does). ``measure(depths, w2c) -> _Measure``."""
    best = None
    limit = 0.5 * stored.median if stored.errors else 0.2 * max_rel_error
    for reading, alt_depths, alt_w2c in _alternatives(depths, K, w2c):
        alt = measure(alt_depths, alt_w2c)
        enough = alt.errors and alt.covisible >= 0.5 * stored.covisible
        if enough and alt.median < limit and (best is None or alt.median < best[1]):
            best = (reading, alt.median)
    if best is None:
        return None
    as_stored = f"{100 * stored.median:.2f}%" if stored.errors else "no overlapping pair"
    return (f"the data fit much better if {best[0]}: median reprojection disagreement {as_stored} "
            f"as stored, {100 * best[1]:.2f}% read that way")


def _check_geometry(report: SceneReport, pairs, depths, valids, K, w2c, *, max_rel_error: float,
                    allow_no_overlap: bool, diagnose: bool, **opts) -> None:
    """Measure the reprojection consistency of ``pairs`` into ``report``; when the stored reading
    disagrees (no overlapping pair, or a median above a fifth of ``max_rel_error``) and ``diagnose``,
    try the known convention bugs (``_alternatives``) and fail the scene if one fits clearly better."""
    measure = lambda d, w: _measure(pairs, d, valids, K, w, **opts)  # noqa: E731
    stored = measure(depths, w2c)
    report.pairs_used = len(stored.errors)
    if stored.used:
        report.occluded_fraction = stored.occluded / stored.used
        report.covisible_fraction = stored.covisible / stored.used
    hint = None
    if diagnose and len(pairs) and (not stored.errors or stored.median > 0.2 * max_rel_error):
        hint = _diagnose(stored, depths, K, w2c, measure, max_rel_error)
    _judge_consistency(report, stored, hint, max_rel_error, allow_no_overlap)


def _judge_consistency(report: SceneReport, stored: _Measure, hint: str | None,
                       max_rel_error: float, allow_no_overlap: bool) -> None:
    """Record the medians of the co-visible points' disagreements and scales in ``report``, and the
    problem (or warning) for too large a disagreement, no overlapping pair, a convention bug
    ``hint`` or a single view."""
    if not stored.errors and report.num_frames > 1:
        occluded = f"{100 * report.occluded_fraction:.1f}%" if stored.used else "none"
        message = (
            "no overlapping view pair: reprojected depth never lands on co-visible valid depth of another "
            f"view (occluded: {occluded}; wrong w2c direction, axes, K or depth units?)"
        )
        if hint:
            report.problems.append(f"{message}; {hint}")
        else:
            (report.warnings if allow_no_overlap else report.problems).append(message)
        return
    if not stored.errors:
        report.warnings.append("single view: geometric consistency not measured")
        return
    report.median_rel_error = stored.median
    report.median_scale = float(np.median(np.concatenate(stored.ratios)))
    if report.median_rel_error > max_rel_error:
        report.problems.append(
            f"median reprojection disagreement {100 * report.median_rel_error:.2f}% > "
            f"{100 * max_rel_error:.2f}% on co-visible points (median scale d_j/z_proj = "
            f"{report.median_scale:.3f}); " + (hint or "check the w2c/c2w direction, axis conventions, "
                                                       "K layout and depth units")
        )
    elif hint:
        report.problems.append(hint)


def find_split_dirs(root: str | Path) -> list[Path]:
    """Folders under ``root`` (root included) that hold an ``index.json``, sorted."""
    root = Path(root)
    return sorted({p.parent for p in root.rglob("index.json")})


def check_root(root: str | Path, *, limit: int | None = None, progress: bool = True, workers: int = 1, **kwargs):
    """Check every scene listed by every index under ``root``.

    Returns ``(reports, index_problems)``: one ``SceneReport`` per listed scene (at most ``limit``
    per split), in index order, and a list of index-level problems (an index that ``read_index``
    refuses, e.g. a path outside its split folder or a scene listed twice, and an ``.h5`` file
    present but not listed; a file listed but missing shows up as a failed scene). Each scene is
    compared with its index entry. A failure while checking one scene (even ``MemoryError``) fails
    that scene only. Scenes are checked with one torch and one OpenCV thread (``workers.one_thread``:
    more only cost at these sizes). ``workers`` > 1 checks them in that many spawned processes
    (``parallel.ordered_map``; at most one per ``SCENES_PER_WORKER`` scenes, as starting one costs
    about as much as checking that many); the reports are the same.
    """
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"{root} does not exist")
    jobs, index_problems = _listed_scenes(root, limit)
    with one_thread():
        reports = ordered_map(partial(_check_contained, kwargs=kwargs), jobs, workers=workers, progress=progress,
                              desc="checking scenes", unit="scene", initializer=use_one_thread,
                              min_per_worker=SCENES_PER_WORKER, describe=lambda job: f"scene file {job[0]}")
    return reports, index_problems


def _listed_scenes(root: Path, limit: int | None) -> tuple[list[tuple[Path, dict]], list[str]]:
    """``([(scene file, index entry)], index_problems)`` of every index under ``root`` (at most
    ``limit`` scenes per split); see ``check_root``."""
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
    return jobs, index_problems


def _check_contained(job: tuple[Path, dict], kwargs: dict) -> SceneReport:
    """``check_scene(path, expected=entry, **kwargs)`` of ``job = (path, entry)``; any exception it
    raises (a bug, or memory running out on a huge but legal scene) becomes a failed report of that scene."""
    path, entry = job
    try:
        return check_scene(path, expected=entry, **kwargs)
    except Exception as err:  # noqa: BLE001 - one scene must never stop the check of the others
        report = SceneReport(path=str(path), scene_id=str(entry.get("scene_id", "")))
        report.problems.append(f"check failed: {type(err).__name__}: {err}")
        return report
