"""``depthpe study cameras-only``: how much of the depth scale the cameras alone predict.

A ridge regression from features of a sample's normalized cameras (docs/conventions.md, scene
normalization: view 0 the identity, translations divided by the mean distance of the other centres)
to the log of the sample's median normalized depth, fitted on training samples and evaluated on
validation samples as a per-sample constant depth. Its AbsRel is set against the constant baselines
of ``depthpe eval`` (``depthpe.metrics.baseline_rows``): a dataset in which the cameras reveal the
depth scale lets it beat the global constant; on geometry-only scenes (``depthpe synth --style
geometry``) it should not (docs/data.md).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from depthpe.config.inference import ViewProtocol
from depthpe.config.options import REQUIRED, add_plain_options, option

DESCRIPTION = """\
Fit a cameras-only depth-scale predictor and compare its AbsRel with the constant baselines.

For every scene of ROOT/DATASET/train (--draws random view subsets of --views views each) and of
ROOT/DATASET/val (one subset per scene, chosen like `depthpe eval --views`), the cameras are
normalized as the model sees them and summarized by FEATURES (spread of the camera distances, how
much the cameras move along the reference view's axis, relative rotation angles, where the optical
axes meet, field of view, principal point, number of views). A ridge regression (--alpha) maps them
to the log median normalized depth; its prediction, used as one constant depth per sample, is
scored with the AbsRel of `depthpe eval`. Printed: the AbsRel of the global constant (median of the
val set, as `depthpe eval`), of the train median, of the best constant on train (AbsRel favours a
constant below the median), of the cameras-only predictor (as fitted, and calibrated by the factor
that is best on train) and of the scene-constant oracle, the ratios, the R^2 of the regression on
val, and each feature's correlation with the target on val. Compare cameras_only_calibrated with
best_train_constant: below it, the cameras tell the depth scale."""

FEATURES = (
    "distance_std", "distance_max", "distance_min", "forward_motion", "rotation_mean_rad",
    "rotation_max_rad", "log_fixation_depth", "fixation_in_front", "log_focal_over_width",
    "principal_offset_x", "principal_offset_y", "log_views",
)


@dataclass
class CamerasOnlySettings:
    """``depthpe study cameras-only``: the scenes of ``data``/``dataset``, ``draws`` subsets of
    ``views`` views per training scene (from ``seed``), a ridge regression with penalty ``alpha``."""

    data: str = option(REQUIRED, metavar="ROOT", help="data root (holds DATASET/train, DATASET/val)")
    dataset: str = option("synth", help="dataset folder under ROOT")
    views: int = option(ViewProtocol.views, help="views per sample, as depthpe eval")
    draws: int = option(4, help="view subsets per training scene")
    alpha: float = option(1.0, help="ridge penalty on standardized features")
    seed: int = option(0, help="seed of the view subsets")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_plain_options(parser, CamerasOnlySettings)


def camera_features(K: np.ndarray, w2c: np.ndarray, image_size: tuple[int, int]) -> np.ndarray:
    """(len(FEATURES),) features of one sample's cameras, already normalized.

    K: (S, 3, 3) pixel intrinsics; w2c: (S, 4, 4) normalized OpenCV world-to-camera (view 0 the
    identity, mean distance of the other centres 1); image_size: (H, W) pixels. The fixation depth
    is where the optical axis of view i passes closest to that of view 0, along view 0's axis
    (median over views i, clipped to [0.05, 100]): an orbit's cameras meet at the object they look at.
    """
    R, t = w2c[:, :3, :3], w2c[:, :3, 3]
    centers = -np.einsum("sji,sj->si", R, t)[1:]
    dist = np.linalg.norm(centers, axis=1)
    cos_rot = np.clip((np.trace(R[1:], axis1=1, axis2=2) - 1) / 2, -1, 1)
    rotation = np.arccos(cos_rot)
    fixation = np.array([_closest_depth_on_axis0(c, r[2]) for c, r in zip(centers, R[1:])])
    H, W = image_size
    return np.array([
        dist.std(), dist.max(), dist.min(), np.mean(np.abs(centers[:, 2]) / np.maximum(dist, 1e-12)),
        rotation.mean(), rotation.max(), np.log(np.clip(np.median(fixation), 0.05, 100.0)),
        np.mean(fixation > 0), np.log(K[:, 0, 0] / W).mean(), (K[:, 0, 2] / W - 0.5).mean(),
        (K[:, 1, 2] / H - 0.5).mean(), math.log(len(w2c)),
    ])


def _closest_depth_on_axis0(center: np.ndarray, axis: np.ndarray) -> float:
    """Depth s along view 0's optical axis (the line s (0, 0, 1)) of its closest approach to the line
    ``center + u axis``; parallel axes give a large depth (100)."""
    e = np.array([0.0, 0.0, 1.0])
    b = float(e @ axis)
    denom = 1.0 - b * b
    if denom < 1e-9:
        return 100.0
    d, w = float(e @ center), float(axis @ center)
    return (d - b * w) / denom


def fit_ridge(X: np.ndarray, y: np.ndarray, alpha: float):
    """Ridge regression on standardized features: returns ``predict(X) -> (N,)``.

    X: (N, F); y: (N,). Closed form ``w = (Z^T Z + alpha I)^-1 Z^T (y - mean y)`` with Z the
    standardized X (constant features get weight 0); written out because it is three lines.
    """
    mu, sd = X.mean(0), X.std(0)
    sd = np.where(sd > 1e-12, sd, np.inf)
    Z = (X - mu) / sd
    w = np.linalg.solve(Z.T @ Z + alpha * np.eye(X.shape[1]), Z.T @ (y - y.mean()))
    y0 = y.mean()
    return lambda Xn: y0 + ((Xn - mu) / sd) @ w


def sample_record(K: np.ndarray, w2c: np.ndarray, depth: np.ndarray, image_size: tuple[int, int]):
    """(features, log median normalized depth, normalized depth) of one sample.

    K: (S, 3, 3) pixels; w2c: (S, 3|4, 4) OpenCV world-to-camera in any unit; depth: (S, h, w)
    z-depth in that unit (0 invalid; may be subsampled); image_size: (H, W) of K's images.
    Normalized with ``depthpe.geometry.normalize_scene`` (the model's unit).
    """
    import torch

    from depthpe.geometry import normalize_scene

    w2c_n, depth_n, _ = normalize_scene(torch.from_numpy(np.asarray(w2c, dtype=np.float64)),
                                        torch.from_numpy(np.asarray(depth, dtype=np.float64)))
    g = depth_n.numpy()
    return camera_features(K, w2c_n.numpy(), image_size), math.log(float(np.median(g[g > 0]))), g


def load_samples(split_dir: Path, views: int, draws: int, seed: int):
    """Features (N, F), log median normalized depth (N,) and the normalized depths of N samples.

    Each scene of ``split_dir`` gives ``draws`` view subsets (``eval_view_indices`` with attempts
    0..draws-1, the first is the subset ``depthpe eval --views`` uses); depth is every other pixel.
    """
    from depthpe.loader.sampling import eval_view_indices
    from depthpe.scenes.format.scene_file import SceneReader, read_index

    records = []
    for entry in read_index(split_dir):
        with SceneReader(split_dir / entry["path"], strict=True) as reader:
            K_all, w2c_all = reader.read_cameras()
            for attempt in range(draws):
                idx = eval_view_indices(reader.num_frames, views, seed, entry["scene_id"], attempt=attempt)
                depth = np.stack([reader.read_depth(i)[::2, ::2] for i in idx])
                records.append(sample_record(K_all[idx], w2c_all[idx], depth, (reader.height, reader.width)))
    return stack_records(records)


def stack_records(records: list[tuple]):
    """``sample_record`` results -> features (N, F), targets (N,), list of N normalized depths."""
    feats, targets, depths = zip(*records)
    return np.array(feats), np.array(targets), list(depths)


def constant_abs_rel(depths: list[np.ndarray], constants) -> float:
    """Mean over samples of the AbsRel of predicting one constant per sample (``constants``: a float
    or one per sample), per image then per sample as ``depthpe eval`` (``metrics.baseline_rows``)."""
    from depthpe.metrics import baseline_rows

    values = np.broadcast_to(np.asarray(constants, dtype=np.float64), (len(depths),))
    per_sample = []
    for g, c in zip(depths, values):
        rows = [r for r in baseline_rows(g, global_constant_value=float(c)) if r["mode"] == "global_constant"]
        per_sample.append(np.mean([r["abs_rel"] for r in rows]))
    return float(np.mean(per_sample))


def scene_constant_abs_rel(depths: list[np.ndarray]) -> float:
    """Mean AbsRel of the scene-constant oracle (each sample's own median) over samples."""
    from depthpe.metrics import baseline_rows

    return float(np.mean([np.mean([r["abs_rel"] for r in baseline_rows(g) if r["mode"] == "scene_constant"])
                          for g in depths]))


def best_factor(depths: list[np.ndarray], predictions: np.ndarray) -> float:
    """The factor k (on a log grid over 0.2..1.6) with the lowest AbsRel of ``k * predictions`` (one
    constant per sample) on ``depths``: AbsRel favours predicting below the median, so a predictor
    without information does best with a constant below it; this calibrates both alike."""
    factors = np.exp(np.linspace(math.log(0.2), math.log(1.6), 22))
    scores = [constant_abs_rel(depths, k * predictions) for k in factors]
    return float(factors[int(np.argmin(scores))])


def pooled_median(depths: list[np.ndarray]) -> float:
    """Median of all valid (> 0) pixels of all samples (the global constant of ``depthpe eval``)."""
    return float(np.median(np.concatenate([g[g > 0] for g in depths])))


def cameras_only_report(root: Path, dataset: str, views: int, draws: int, alpha: float, seed: int) -> dict:
    """Fit on ROOT/DATASET/train, score on ROOT/DATASET/val; returns the AbsRels, R^2 and feature
    correlations (see ``DESCRIPTION``)."""
    train = load_samples(root / dataset / "train", views, draws, seed)
    val = load_samples(root / dataset / "val", views, 1, seed)
    return score_cameras_only(train, val, alpha)


def score_cameras_only(train, val, alpha: float = 1.0) -> dict:
    """The report of ``cameras_only_report`` from ``stack_records`` results of train and val samples."""
    (X_tr, y_tr, d_tr), (X_va, y_va, d_va) = train, val
    predict = fit_ridge(X_tr, y_tr, alpha)
    pred = predict(X_va)
    corr = {name: _corr(X_va[:, j], y_va) for j, name in enumerate(FEATURES)}
    median_tr = pooled_median(d_tr)
    return {
        "train_samples": len(y_tr), "val_samples": len(y_va),
        "global_constant": constant_abs_rel(d_va, pooled_median(d_va)),
        "train_median": constant_abs_rel(d_va, median_tr),
        "best_train_constant": constant_abs_rel(d_va, median_tr * best_factor(d_tr, np.full(len(d_tr), median_tr))),
        "cameras_only": constant_abs_rel(d_va, np.exp(pred)),
        "cameras_only_calibrated": constant_abs_rel(d_va, np.exp(pred) * best_factor(d_tr, np.exp(predict(X_tr)))),
        "scene_constant": scene_constant_abs_rel(d_va),
        "r2_val": 1.0 - float(np.mean((pred - y_va) ** 2) / np.var(y_va)) if np.var(y_va) > 0 else math.nan,
        "correlations": corr,
    }


def _corr(x: np.ndarray, y: np.ndarray) -> float:
    if x.std() < 1e-12 or y.std() < 1e-12:
        return 0.0
    return float(np.corrcoef(x, y)[0, 1])


def format_report(r: dict) -> str:
    """Markdown table of ``cameras_only_report`` with ratios to the global constant."""
    g = r["global_constant"]
    lines = [f"samples: {r['train_samples']} train, {r['val_samples']} val; R^2 on val {r['r2_val']:.3f}",
             "| predictor (one depth per sample) | AbsRel | / global constant |", "|---|---|---|"]
    for key in ("global_constant", "train_median", "best_train_constant", "cameras_only",
                "cameras_only_calibrated", "scene_constant"):
        lines.append(f"| {key} | {r[key]:.4f} | {r[key] / g:.3f} |")
    lines.append("correlation with log median depth (val): " + ", ".join(
        f"{k} {v:+.2f}" for k, v in r["correlations"].items()))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """``depthpe study cameras-only``: print the report; bad options or a data root without scenes are
    one ``ConfigError`` line."""
    from depthpe.config import ConfigError
    from depthpe.scenes.format.scene_file import SceneFileError

    if args.views < 2 or args.draws < 1 or args.alpha < 0:
        raise ConfigError("need --views >= 2, --draws >= 1 and --alpha >= 0")
    try:
        report = cameras_only_report(Path(args.data), args.dataset, args.views, args.draws, args.alpha, args.seed)
    except SceneFileError as err:
        raise ConfigError(str(err)) from None
    print(format_report(report))
    return 0
