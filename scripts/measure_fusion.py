"""Measure the multi-view consistency fusion on a synthetic scene (docs/predict.md#multi-view-consistency-fusion).

The depth maps are the scene's true depth with the errors a depth network makes planted into them:
relative Gaussian noise (--noise), depth edges smeared over --edge pixels (the "flying pixels" between a
foreground object and the background) and a fraction --outliers of pixels with a depth off by 20-50 %.
For each setting it prints the points kept and their mean / median distance to the true surface
(``depthpe.scenes.synth.surface_distance``), without fusion and with it.

    python scripts/measure_fusion.py [--views 8] [--size 120 160] [--seed 11]
"""

from __future__ import annotations

import argparse

import numpy as np

from depthpe.scenes.synth import generate_scene
from depthpe.scenes.synth.clearance import surface_distance
from depthpe.prediction.result import FusionSettings, ImagePrediction, PredictionResult, fuse_points


def corrupt(depth: np.ndarray, rng: np.random.Generator, noise: float, edge: int, outliers: float) -> np.ndarray:
    """(H, W) true depth -> depth with relative noise, smeared edges and outliers (0 stays 0)."""
    import cv2

    d = depth.astype(np.float64)
    valid = d > 0
    filled = np.where(valid, d, d[valid].max())
    k = 2 * edge + 1
    blurred = cv2.blur(filled, (k, k))
    edges = cv2.dilate((cv2.Canny((np.log(filled) * 40).astype(np.uint8), 10, 30) > 0).astype(np.uint8),
                       np.ones((k, k), np.uint8)) > 0
    out = np.where(edges, blurred, d) * (1 + noise * rng.standard_normal(d.shape))
    wild = rng.random(d.shape) < outliers
    out[wild] *= rng.choice([-1, 1], wild.sum()) * rng.uniform(0.2, 0.5, wild.sum()) + 1
    return np.where(valid, out, 0.0).astype(np.float32)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--views", type=int, default=8)
    p.add_argument("--size", type=int, nargs=2, default=(120, 160), metavar=("H", "W"))
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--noise", type=float, default=0.01)
    p.add_argument("--edge", type=int, default=2)
    p.add_argument("--outliers", type=float, default=0.02)
    args = p.parse_args()
    sc = generate_scene(args.seed, views=args.views, height=args.size[0], width=args.size[1])
    rng = np.random.default_rng(args.seed)
    names = [f"v{i}.png" for i in range(args.views)]
    frames = [ImagePrediction(n, corrupt(sc["depth"][i], rng, args.noise, args.edge, args.outliers),
                              np.full(args.size, 2.0, np.float32), sc["images"][i], sc["K"][i], sc["w2c"][i], names)
              for i, n in enumerate(names)]
    result = PredictionResult(frames, tuple(args.size), "cameras", "all", args.views)
    print(f"scene {args.seed}, {args.views} views of {args.size[1]}x{args.size[0]}; noise {args.noise:g}, "
          f"edges smeared over {args.edge} px, outliers {args.outliers:g}; median true depth "
          f"{np.median(sc['depth'][sc['depth'] > 0]):.3f}")
    print("| fusion | points kept | mean distance to the surface | median | 95th percentile |\n|---|---|---|---|---|")
    settings = [None, FusionSettings(0, 0.05)] + [FusionSettings(n, rel) for n in (1, 2) for rel in (0.01, 0.02, 0.05)]
    settings.append(FusionSettings(2, 0.02, 1.0))
    for fusion in settings:
        points, _, _ = fuse_points(result, fusion=fusion)
        dist = surface_distance(sc["scene"], points)
        label = "none" if fusion is None else (f"{fusion.min_views} view(s), {fusion.rel_threshold:g} relative"
                                               + (" (merged, nothing dropped)" if fusion.min_views == 0 else "")
                                               + (f", {fusion.pixel_threshold:g} px" if fusion.pixel_threshold else ""))
        print(f"| {label} | {len(points)} | {dist.mean():.4f} | {np.median(dist):.4f} | "
              f"{np.quantile(dist, 0.95):.4f} |")


if __name__ == "__main__":
    main()
