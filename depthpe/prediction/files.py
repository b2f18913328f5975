"""Files written by ``depthpe predict`` (docs/predict.md), and readers for the depth PNGs.

Per image ``<stem>`` (the image name without extension, '/' replaced by '__', made a safe file name;
images whose stems would coincide get ``-`` + 8 hex digits of their name's hash; prediction.json
records each image's ``stem``):

* ``<stem>_depth.png``: 16-bit depth, ``depth = png_value * scale`` with ``scale`` in
  ``<stem>_depth.json`` (``{"scale", "unit", "invalid": 0}``); scale = max depth / 65535, so the
  quantisation error is at most scale / 2;
* ``<stem>_depth.npy``: (H, W) float32 depth, exactly as predicted;
* ``<stem>_conf.npy``: (H, W) float32 confidence;
* ``<stem>_depth_color.png``: colour-mapped depth with a colour bar;
* ``<stem>_image.png``: the RGB input as the model saw it (cropped and resized; ``depthpe view``
  colours the points and camera frustums with it);
* ``<stem>_depth_filtered.png/.json/.npy`` (on request): the depth of the pixels kept in points.ply
  (confidence threshold and multi-view consistency), 0 elsewhere.

Plus ``points.ply`` (one coloured point cloud of all images, world coordinates of the cameras,
float32 x, y, z and uint8 red, green, blue; written when depth is in the cameras' unit, or for a
single image) and ``prediction.json`` (input size, unit, views per
prediction, and per image its K, w2c, the views it was predicted with and its files).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import numpy as np

from ..files import atomic_target, atomic_write_bytes, safe_component
from .result import FusionSettings, fuse_result

__all__ = ["file_stem", "file_stems", "write_depth_png", "read_depth_png", "write_ply", "read_ply", "write_prediction",
           "write_images", "fusable", "depth_png16"]

PNG_MAX = 65535


def file_stem(name: str) -> str:
    """Output stem of an image name: extension dropped, '/' replaced by '__', then made one safe
    file-name component (``depthpe.files.safe_component``: ordinary names are kept as they are)."""
    try:
        plain = Path(name).with_suffix("").as_posix()
    except ValueError:  # "..", "" and other names without a stem
        plain = str(name)
    return safe_component(plain.replace("/", "__"))


def file_stems(names: list[str]) -> list[str]:
    """Unique output stems of the images of one prediction, in order: ``file_stem`` of each, and for
    names that would share one (``a/img_0.jpg`` and ``a__img_0.jpg``) that stem + ``-`` + 8 hex digits
    of the SHA-256 of the full name, so that no image's files overwrite another's."""
    stems = [file_stem(n) for n in names]
    counts = Counter(stems)
    out = [f"{s}-{hashlib.sha256(n.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}" if counts[s] > 1 else s
           for s, n in zip(stems, names)]
    if len(set(out)) != len(out):  # the same name twice: never two predictions of one file
        raise ValueError(f"two images share the name {next(n for n in names if names.count(n) > 1)!r}")
    return out


def depth_png16(depth: np.ndarray, step: float) -> np.ndarray:
    """(H, W) depth -> (H, W) uint16 ``round(depth / step)``, clipped to [0, 65535] (0 = invalid)."""
    return np.clip(np.round(np.asarray(depth, np.float64) / step), 0, PNG_MAX).astype(np.uint16)


def write_depth_png(path: str | Path, depth: np.ndarray, unit: str) -> float:
    """Write (H, W) depth (0 = invalid) as a 16-bit PNG and its sidecar ``<path stem>.json``; returns
    the scale (depth = png_value * scale; scale = max depth / 65535, 1 for an all-zero map)."""
    from ..report.viz import save_png

    path = Path(path)
    d = np.asarray(depth, np.float64)
    top = float(d.max()) if d.size else 0.0
    scale = top / PNG_MAX if top > 0 else 1.0
    save_png(path, depth_png16(d, scale))
    side = {"scale": scale, "unit": unit, "invalid": 0, "formula": "depth = png_value * scale"}
    atomic_write_bytes(path.with_suffix(".json"), (json.dumps(side, indent=1) + "\n").encode())
    return scale


def read_depth_png(path: str | Path) -> np.ndarray:
    """(H, W) float64 depth of a PNG written by ``write_depth_png`` (its sidecar gives the scale)."""
    import cv2

    path = Path(path)
    raw = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if raw is None or raw.dtype != np.uint16:
        raise ValueError(f"{path}: not a 16-bit PNG")
    scale = json.loads(path.with_suffix(".json").read_text())["scale"]
    return raw.astype(np.float64) * scale


def write_ply(path: str | Path, points: np.ndarray, colors: np.ndarray) -> Path:
    """Binary PLY of (N, 3) points (stored float32) and (N, 3) uint8 RGB colours, via plyfile."""
    from plyfile import PlyData, PlyElement

    vertex = np.empty(len(points), dtype=[("x", "f4"), ("y", "f4"), ("z", "f4"),
                                          ("red", "u1"), ("green", "u1"), ("blue", "u1")])
    for k, axis in enumerate("xyz"):
        vertex[axis] = points[:, k]
    for k, channel in enumerate(("red", "green", "blue")):
        vertex[channel] = colors[:, k]
    path = Path(path)
    with atomic_target(path) as tmp:
        PlyData([PlyElement.describe(vertex, "vertex")]).write(tmp)
    return path


def read_ply(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(points (N, 3) float64, colors (N, 3) uint8) of a PLY written by ``write_ply``."""
    from plyfile import PlyData

    v = PlyData.read(str(path))["vertex"].data
    return (np.stack([v[a] for a in "xyz"], axis=1).astype(np.float64),
            np.stack([v[c] for c in ("red", "green", "blue")], axis=1).astype(np.uint8))


def _write_frame(out: Path, frame, unit: str, stem: str) -> dict:
    """The files of one ImagePrediction, named ``<stem>_*``; returns its entry of prediction.json."""
    from ..report.viz import colorize_depth, depth_range, save_png, with_colorbar

    scale = write_depth_png(out / f"{stem}_depth.png", frame.depth, unit)
    np.save(out / f"{stem}_depth.npy", frame.depth)
    np.save(out / f"{stem}_conf.npy", frame.conf)
    vmin, vmax = depth_range(frame.depth)
    colored = colorize_depth(frame.depth, None, vmin, vmax)
    label = "rel" if unit == "normalized" else ""
    save_png(out / f"{stem}_depth_color.png", with_colorbar(colored, vmin, vmax, label=label))
    save_png(out / f"{stem}_image.png", frame.image)
    return {"name": frame.name, "stem": stem, "files": [f"{stem}_{k}" for k in ("depth.png", "depth.json", "depth.npy", "conf.npy",
                                                                   "depth_color.png", "image.png")],
            "png_scale": scale, "K": frame.K.tolist(), "w2c": frame.w2c.tolist(), "views": frame.views}


def write_prediction(result, out_dir: str | Path, conf_threshold: float | None = None,
                     fusion: FusionSettings | None = None, filtered_depth: bool = False, cloud=None) -> dict:
    """Write every file of a ``PredictionResult`` into ``out_dir`` (module docstring); returns the
    summary written to prediction.json (plus "points": the number of points in points.ply).
    fusion: the multi-view consistency filter of points.ply (None: every pixel above the confidence
    threshold); filtered_depth: also write ``<stem>_depth_filtered.*`` (0 where a pixel is not in
    points.ply); cloud: ``fuse_result``'s (FusedPoints, masks) when the caller already has them."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stems = file_stems([fr.name for fr in result.frames])
    frames = [_write_frame(out, fr, result.unit, stem) for fr, stem in zip(result.frames, stems)]
    points = np.zeros((0, 3))
    if fusable(result):
        cloud = cloud or fuse_result(result, conf_threshold, fusion)
        points = cloud[0].points
        write_ply(out / "points.ply", points, cloud[0].colors)
        if filtered_depth:
            for entry, fr, keep in zip(frames, result.frames, cloud[1]):
                _write_filtered(out, entry, np.where(keep, fr.depth, 0).astype(np.float32), result.unit)
    else:
        result.notes.append("no points.ply: without a common camera frame and unit the views cannot be fused")
    summary = {"size": list(result.size), "unit": result.unit, "mode": result.mode,
               "views_per_prediction": result.views_per_prediction, "conf_threshold": conf_threshold,
               "fusion": None if fusion is None else vars(fusion), "points": int(len(points)),
               "notes": result.notes, "frames": frames}
    atomic_write_bytes(out / "prediction.json", (json.dumps(summary, indent=1) + "\n").encode())
    return summary


def write_images(frames, stems: list[str], folder: str | Path) -> list[str]:
    """Write each frame's image (as the model saw it) to ``folder/<stem>.png``; returns the file names."""
    from ..report.viz import save_png

    names = [f"{s}.png" for s in stems]
    for fr, name in zip(frames, names):
        save_png(Path(folder) / name, fr.image)
    return names


def fusable(result) -> bool:
    """True when the frames share one frame and unit (cameras given, or a single image)."""
    return result.unit == "cameras" or len(result.frames) == 1


def _write_filtered(out: Path, entry: dict, depth: np.ndarray, unit: str) -> None:
    """``<stem>_depth_filtered.png/.json/.npy`` of one frame; their names are added to ``entry``."""
    stem = entry["stem"]
    write_depth_png(out / f"{stem}_depth_filtered.png", depth, unit)
    np.save(out / f"{stem}_depth_filtered.npy", depth)
    entry["files"] += [f"{stem}_depth_filtered.{k}" for k in ("png", "json", "npy")]
