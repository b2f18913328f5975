"""Tiny fake raw datasets in each native layout, made from procedural scenes with known cameras.

Used by the converter tests and ``depthpe bench convert``. Each writer takes scenes from
``depthpe.scenes.synth.generate_scene`` (images (V, H, W, 3) uint8 RGB, depth (V, H, W) z-depth with 0
where a ray escapes, K (V, 3, 3) OpenCV, w2c (V, 3, 4) OpenCV) and writes them exactly the way the
real dataset stores them (docs/data.md), including each dataset's traps: CO3D float16 bits
in uint16 PNGs with a scale_adjustment, depth masks, PyTorch3D row-vector cameras and NDC
intrinsics; WildRGB-D column-major K, camera-to-world poses and millimetre depth; ARKitScenes
axis-angle world-to-camera trajectories with offset timestamps and per-frame pincams; MegaSynth
RGBA renderings and EXR depth with a 1e10 background sentinel.

Every writer returns ``{scene_id: FakeScene}`` with the ground truth and the frames a correct
converter keeps, so that a test can compare the converted files with the truth.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

__all__ = [
    "FakeScene",
    "make_scenes",
    "with_shared_intrinsics",
    "write_fake_co3d",
    "write_fake_wildrgbd",
    "write_fake_arkitscenes",
    "write_fake_megasynth",
    "write_exr",
    "write_image",
    "compare_to_ground_truth",
    "WRITERS",
]

SENTINEL = 1e10  # MegaSynth background depth


@dataclass
class FakeScene:
    """Ground truth of one fake scene: ``gt`` (generate_scene's dict), ``kept`` (frame indices a
    correct converter keeps, in order), ``invalid`` ((V, H, W) bool: pixels whose depth a correct
    converter sets to 0 beyond the GT zeros, e.g. CO3D depth-mask holes or MegaSynth alpha edges),
    ``split`` (the official split if the layout fixes one), ``images`` (the expected RGB images if
    the layout changes them, e.g. MegaSynth's white background; None = the GT images)."""

    gt: dict
    kept: list[int]
    invalid: np.ndarray
    split: str | None = None
    images: np.ndarray | None = None
    notes: dict = field(default_factory=dict)


def make_scenes(count: int, views: int = 5, height: int = 48, width: int = 64, seed: int = 0) -> list[dict]:
    """``count`` procedural scenes (``generate_scene`` with seeds seed, seed+1, ...)."""
    from depthpe.scenes.synth import generate_scene

    return [generate_scene(seed + i, views, height, width) for i in range(count)]


def with_shared_intrinsics(scene: dict) -> dict:
    """The scene re-rendered with view 0's intrinsics for every view (datasets with one K per scene)."""
    from depthpe.scenes.synth import render_views

    V, H, W = scene["depth"].shape
    K = np.repeat(np.asarray(scene["K"][:1], np.float64), V, axis=0)
    images, depth = render_views(scene["scene"], K, scene["w2c"], H, W)
    return {**scene, "images": images, "depth": depth, "K": K}


def write_image(path: Path, array: np.ndarray, params: Sequence[int] = ()) -> None:
    """Write ``array`` (BGR, or one channel) as the image format of ``path``'s suffix, creating the
    folder. Encoded in memory (``cv2.imencode``) and written by Python, so that any file name works
    (``cv2.imwrite`` crashes on a name that is not valid UTF-8)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ok, encoded = cv2.imencode(path.suffix, array, list(params))
    if not ok:
        raise OSError(f"could not encode {path}")
    path.write_bytes(encoded.tobytes())


def _bgr(image: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(image, cv2.COLOR_RGB2BGR)


def write_exr(path: Path, depth: np.ndarray) -> None:
    """Write (H, W) float32 depth as a 3-channel (R, G, B) float32 OpenEXR file, like Blender's Z pass."""
    import OpenEXR

    path.parent.mkdir(parents=True, exist_ok=True)
    d = np.ascontiguousarray(depth, dtype=np.float32)
    header = {"compression": OpenEXR.ZIP_COMPRESSION, "type": OpenEXR.scanlineimage}
    with OpenEXR.File(header, {"R": d, "G": d.copy(), "B": d.copy()}) as f:
        f.write(str(path))


# --------------------------------------------------------------------------------------------
# CO3D
# --------------------------------------------------------------------------------------------

_FLIP = np.diag([-1.0, -1.0, 1.0])


def _co3d_viewpoint(K: np.ndarray, w2c: np.ndarray, H: int, W: int, fmt: str) -> dict:
    """Inverse of the converter: OpenCV K/w2c -> PyTorch3D R, T (row vectors) and NDC intrinsics."""
    R_cv, t_cv = w2c[:, :3], w2c[:, 3]
    R = (_FLIP @ R_cv).T  # X_cam = X_world R + T  <=>  x_cam_p3d = R^T x_w + T,  R^T = F R_cv
    T = _FLIP @ t_cv
    if fmt == "ndc_isotropic":
        sx = sy = min(H, W) / 2.0
    else:
        sx, sy = W / 2.0, H / 2.0
    focal = [K[0, 0] / sx, K[1, 1] / sy]
    pp = [(W / 2.0 - (K[0, 2] + 0.5)) / sx, (H / 2.0 - (K[1, 2] + 0.5)) / sy]
    return {"R": R.tolist(), "T": T.tolist(), "focal_length": focal, "principal_point": pp,
            "intrinsics_format": fmt}


def _write_co3d_frame(root: Path, category: str, seq: str, sc: dict, v: int, fmt: str, sa: float,
                      blank: bool, mask_columns: int) -> dict:
    """Write frame ``v`` of scene ``sc`` as sequence ``seq`` under ``root/category`` (image file numbered v + 1, float16-bits
    depth PNG divided by ``sa``, depth mask without the ``mask_columns`` leftmost columns; black
    image and zero depth if ``blank``); returns its frame annotation."""
    _, H, W = sc["depth"].shape
    rel, stem = f"{category}/{seq}", f"frame{v + 1:06d}"
    image, depth = sc["images"][v], sc["depth"][v]
    if blank:
        image, depth = np.zeros_like(image), np.zeros_like(depth)
    write_image(root / rel / "images" / f"{stem}.jpg", _bgr(image), [cv2.IMWRITE_JPEG_QUALITY, 98])
    bits = (depth / sa).astype(np.float16).view(np.uint16)
    write_image(root / rel / "depths" / f"{stem}.jpg.geometric.png", bits)
    mask = np.full((H, W), 255, np.uint8)
    mask[:, :mask_columns] = 0
    write_image(root / rel / "depth_masks" / f"{stem}.png", mask, [cv2.IMWRITE_PNG_BILEVEL, 1])
    return {
        "sequence_name": seq,
        "frame_number": v,
        "frame_timestamp": 0.1 * v,
        "image": {"path": f"{rel}/images/{stem}.jpg", "size": [H, W]},
        "depth": {"path": f"{rel}/depths/{stem}.jpg.geometric.png", "scale_adjustment": sa,
                  "mask_path": f"{rel}/depth_masks/{stem}.png"},
        "mask": {"path": f"{rel}/masks/{stem}.png", "mass": 1.0},
        "viewpoint": _co3d_viewpoint(sc["K"][v], sc["w2c"][v], H, W, fmt),
        "meta": {"frame_type": "train_known"},
    }


def write_fake_co3d(
    root: str | Path,
    scenes: list[dict],
    *,
    category: str = "apple",
    formats: Sequence[str] = ("ndc_isotropic",),
    scale_adjustments: Sequence[float] = (1.0,),
    blackout: dict[int, list[int]] | None = None,
    mask_columns: int = 3,
    sequence_names: Sequence[str] | None = None,
) -> dict[str, FakeScene]:
    """Write ``root/<category>/<sequence>/...`` plus the category's annotation files.

    Scene i uses intrinsics format ``formats[i % len]`` and depth ``scale_adjustment``
    ``scale_adjustments[i % len]`` (PNG = float16 bits of depth / scale_adjustment). The depth mask
    of every frame removes the ``mask_columns`` leftmost columns. ``blackout[i]`` lists frames
    written as challenge targets (black image, zero depth). Image files are numbered from 1 while
    ``frame_number`` starts at 0, and annotations are stored in reverse order. ``sequence_names[i]``:
    the ``sequence_name`` the annotations give scene i (default: its folder's name
    ``<100+i>_<1000+i>_<2000+i>``); the files stay in that folder, so that names from a hostile
    annotation file (``../../x``) write nothing outside ``root``. Keys: ``<category>__<sequence_name>``.
    """
    root = Path(root)
    blackout = blackout or {}
    cat_dir = root / category
    frame_anns, seq_anns, out = [], [], {}
    for i, sc in enumerate(scenes):
        seq = f"{100 + i}_{1000 + i}_{2000 + i}"
        name = seq if sequence_names is None else sequence_names[i]
        fmt = formats[i % len(formats)]
        sa = float(scale_adjustments[i % len(scale_adjustments)])
        V, H, W = sc["depth"].shape
        invalid = np.zeros((V, H, W), bool)
        invalid[:, :, :mask_columns] = True
        for v in range(V):
            blank = v in blackout.get(i, [])
            frame_anns.append({**_write_co3d_frame(root, category, seq, sc, v, fmt, sa, blank, mask_columns),
                               "sequence_name": name})
        seq_anns.append({"sequence_name": name, "category": category, "video": {"path": "", "length": V},
                         "viewpoint_quality_score": 1.0})
        kept = [v for v in range(V) if v not in blackout.get(i, [])]
        out[f"{category}__{name}"] = FakeScene(sc, kept, invalid, notes={"format": fmt, "scale_adjustment": sa})
    cat_dir.mkdir(parents=True, exist_ok=True)
    for name, doc in (("frame_annotations.jgz", frame_anns[::-1]), ("sequence_annotations.jgz", seq_anns)):
        with gzip.open(cat_dir / name, "wt", encoding="utf-8") as f:
            json.dump(doc, f)
    return out


# --------------------------------------------------------------------------------------------
# WildRGB-D
# --------------------------------------------------------------------------------------------


def _c2w_4x4(w2c: np.ndarray) -> np.ndarray:
    R, t = w2c[:, :3], w2c[:, 3]
    c2w = np.eye(4)
    c2w[:3, :3] = R.T
    c2w[:3, 3] = -R.T @ t
    return c2w


def _mm(depth: np.ndarray) -> np.ndarray:
    mm = np.round(depth * 1000.0)
    if mm.max(initial=0) > 65535:
        raise ValueError("fake depth exceeds the uint16 millimetre range")
    return mm.astype(np.uint16)


def write_fake_wildrgbd(
    root: str | Path,
    scenes: list[dict],
    *,
    category: str = "cup",
    no_pose: dict[int, list[int]] | None = None,
    sparse_depth: dict[int, list[int]] | None = None,
) -> dict[str, FakeScene]:
    """Write ``root/<category>/scenes/scene_<i:03d>/{rgb, depth, metadata, cam_poses.txt}``.

    Scenes are re-rendered with one K (view 0's), as WildRGB-D has one K per scene; K is stored
    column-major, poses as camera-to-world, depth in millimetres. ``no_pose[i]``: frames
    left out of cam_poses.txt; ``sparse_depth[i]``: frames whose depth keeps only 0.2% of pixels.
    """
    root = Path(root)
    no_pose, sparse_depth = no_pose or {}, sparse_depth or {}
    out = {}
    for i, sc in enumerate(scenes):
        sc = with_shared_intrinsics(sc)
        scene_dir = root / category / "scenes" / f"scene_{i:03d}"
        V, H, W = sc["depth"].shape
        lines = []
        for v in range(V):
            depth = sc["depth"][v].copy()
            if v in sparse_depth.get(i, []):
                keep = np.zeros(depth.size, bool)
                keep[:: 500] = True
                depth[~keep.reshape(depth.shape)] = 0
            write_image(scene_dir / "rgb" / f"{v:05d}.png", _bgr(sc["images"][v]))
            write_image(scene_dir / "depth" / f"{v:05d}.png", _mm(depth))
            if v not in no_pose.get(i, []):
                lines.append(" ".join([str(v)] + [repr(float(x)) for x in _c2w_4x4(sc["w2c"][v]).reshape(-1)]))
        K = np.asarray(sc["K"][0])
        (scene_dir / "metadata").write_text(json.dumps({"K": K.T.reshape(-1).tolist(), "w": W, "h": H}))
        (scene_dir / "cam_poses.txt").write_text("\n".join(lines) + "\n")
        kept = [v for v in range(V) if v not in no_pose.get(i, []) and v not in sparse_depth.get(i, [])]
        out[f"{category}__scene_{i:03d}"] = FakeScene(sc, kept, np.zeros((V, H, W), bool), split="train")
    return out


# --------------------------------------------------------------------------------------------
# ARKitScenes
# --------------------------------------------------------------------------------------------


def write_fake_arkitscenes(
    root: str | Path,
    scenes: list[dict],
    *,
    folds: Sequence[str] = ("Training",),
    time_offset: float = 0.002,
    far_pose: dict[int, list[int]] | None = None,
    pincam_shift: dict[int, list[int]] | None = None,
) -> dict[str, FakeScene]:
    """Write ``root/3dod/<fold>/<vid>/<vid>_frames/...`` and ``root/threedod/3dod_train_val_splits.csv``.

    Frame v of scene i has timestamp 1000 + 0.1 v (file names with 3 decimals); its pose in the
    trajectory is stamped ``time_offset`` later (``far_pose[i]``: 0.05 s later, beyond the 5 ms
    tolerance). ``pincam_shift[i]``: frames whose .pincam file is named 1 ms earlier. Video ids are
    41000000 + i; fold ``folds[i % len]``.
    """
    root = Path(root)
    far_pose, pincam_shift = far_pose or {}, pincam_shift or {}
    out, rows = {}, ["video_id,visit_id,fold"]
    for i, sc in enumerate(scenes):
        vid = str(41000000 + i)
        fold = folds[i % len(folds)]
        rows.append(f"{vid},{300000 + i},{fold}")
        frames_dir = root / "3dod" / fold / vid / f"{vid}_frames"
        V, H, W = sc["depth"].shape
        traj = []
        for v in range(V):
            ts = 1000.0 + 0.1 * v
            stem = f"{vid}_{ts:.3f}"
            write_image(frames_dir / "lowres_wide" / f"{stem}.png", _bgr(sc["images"][v]))
            write_image(frames_dir / "lowres_depth" / f"{stem}.png", _mm(sc["depth"][v]))
            K = sc["K"][v]
            pin_ts = ts - 0.001 if v in pincam_shift.get(i, []) else ts
            pin = frames_dir / "lowres_wide_intrinsics" / f"{vid}_{pin_ts:.3f}.pincam"
            pin.parent.mkdir(parents=True, exist_ok=True)
            pin.write_text(" ".join(repr(float(x)) for x in (W, H, K[0, 0], K[1, 1], K[0, 2], K[1, 2])) + "\n")
            rvec = cv2.Rodrigues(np.asarray(sc["w2c"][v][:, :3], np.float64))[0].reshape(3)
            t = sc["w2c"][v][:, 3]
            pose_ts = ts + (0.05 if v in far_pose.get(i, []) else time_offset)
            traj.append(f"{pose_ts:.6f} " + " ".join(repr(float(x)) for x in (*rvec, *t)))
        (frames_dir / "lowres_wide.traj").write_text("\n".join(traj) + "\n")
        kept = [v for v in range(V) if v not in far_pose.get(i, [])]
        split = {"Training": "train", "Validation": "val"}[fold]
        out[vid] = FakeScene(sc, kept, np.zeros((V, H, W), bool), split=split)
    csv_path = root / "threedod" / "3dod_train_val_splits.csv"
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    csv_path.write_text("\n".join(rows) + "\n")
    return out


# --------------------------------------------------------------------------------------------
# MegaSynth
# --------------------------------------------------------------------------------------------


def write_fake_megasynth(
    root: str | Path,
    scenes: list[dict],
    *,
    prefix: str = "split_0",
    edge_block: int = 3,
    opaque_background: bool = False,
) -> dict[str, FakeScene]:
    """Write ``root/<prefix>/<uuid>/hanwen/{opencv_cameras.json, renderings/*}``.

    Renderings are RGBA (background: white, alpha 0); depth EXRs hold 1e10 where the GT has no
    surface. An ``edge_block`` x ``edge_block`` square at the image centre gets alpha 128 (an
    anti-aliased edge: valid depth a correct converter must drop). cx, cy are stored in the
    pixel-corner convention (OpenCV value + 0.5). ``opaque_background``: background pixels keep
    alpha 255 (only the depth sentinel marks them).
    """
    root = Path(root)
    out = {}
    for i, sc in enumerate(scenes):
        uuid = f"{zlib.crc32(prefix.encode()):08x}-0000-4000-8000-{i:012x}"
        scene_dir = root / prefix / uuid / "hanwen"
        V, H, W = sc["depth"].shape
        invalid = np.zeros((V, H, W), bool)
        r0, c0 = H // 2 - edge_block // 2, W // 2 - edge_block // 2
        invalid[:, r0:r0 + edge_block, c0:c0 + edge_block] = True
        frames = []
        expected = sc["images"].copy()
        for v in range(V):
            depth = sc["depth"][v]
            background = depth <= 0
            expected[v][background] = 255
            rgba = np.dstack([expected[v], np.full((H, W), 255, np.uint8)])
            if not opaque_background:
                rgba[background, 3] = 0
            rgba[r0:r0 + edge_block, c0:c0 + edge_block, 3] = 128
            write_image(scene_dir / "renderings" / f"{v:08d}_rgba.png", cv2.cvtColor(rgba, cv2.COLOR_RGBA2BGRA))
            write_exr(scene_dir / "renderings" / f"{v:08d}_depth.exr", np.where(background, SENTINEL, depth))
            K = sc["K"][v]
            w2c = np.eye(4)
            w2c[:3] = sc["w2c"][v]
            frames.append({"w": W, "h": H, "fx": float(K[0, 0]), "fy": float(K[1, 1]),
                           "cx": float(K[0, 2]) + 0.5, "cy": float(K[1, 2]) + 0.5,
                           "w2c": w2c.tolist(), "file_path": f"renderings/{v:08d}_rgba.png",
                           "blender_camera_location": [0.0, 0.0, 0.0]})
        (scene_dir / "opencv_cameras.json").write_text(json.dumps({"frames": frames}))
        out[uuid] = FakeScene(sc, list(range(V)), invalid, images=expected)
    return out


WRITERS = {
    "co3d": write_fake_co3d,
    "wildrgbd": write_fake_wildrgbd,
    "arkitscenes": write_fake_arkitscenes,
    "megasynth": write_fake_megasynth,
}


# --------------------------------------------------------------------------------------------
# Comparison with the ground truth
# --------------------------------------------------------------------------------------------


def compare_to_ground_truth(path: str | Path, fake: FakeScene) -> dict:
    """Compare a converted scene file with the ground truth of the fake scene it came from.

    The expected values account for the resize: K_gt rescaled to the stored size
    (``common.scale_intrinsics``), GT depth (with ``fake.invalid`` zeroed) resampled with
    ``cv2.INTER_NEAREST_EXACT`` and the GT image with ``cv2.INTER_AREA``. Returns
    ``frames`` (stored count), ``expected_frames``, ``frame_names``, ``K_err`` (max abs),
    ``w2c_err`` (max abs), ``depth_rel_err`` (max |d - d_gt| / d_gt where both are valid),
    ``valid_recall`` (min over frames of the fraction of expected valid pixels kept),
    ``false_valid`` (pixels valid in the file but invalid in the truth), ``image_mae`` (max over
    frames of the mean absolute RGB difference, 0-255) and ``surface_rel`` (median distance of the
    unprojected stored depth to the true surfaces, relative to depth).
    """
    import torch

    from depthpe.scenes.convert.common import scale_intrinsics
    from depthpe.scenes.format.scene_file import SceneReader
    from depthpe.scenes.synth import surface_distance
    from ..geometry import unproject_depth

    gt = fake.gt
    reader = SceneReader(path)
    try:
        n, h, w = reader.num_frames, reader.height, reader.width
        K, w2c = reader.read_cameras()
        frames = [reader.read_frame(i) for i in range(n)]
        names = reader.frame_names()
    finally:
        reader.close()
    result = {"frames": n, "expected_frames": len(fake.kept), "frame_names": names}
    if n != len(fake.kept):
        return result
    _, H, W = gt["depth"].shape
    K_err = w2c_err = rel_err = image_mae = 0.0
    recall, false_valid, surface = 1.0, 0, []
    for i, v in enumerate(fake.kept):
        K_exp = scale_intrinsics(gt["K"][v], w / W, h / H)
        K_err = max(K_err, float(np.abs(K[i] - K_exp).max()))
        w2c_err = max(w2c_err, float(np.abs(w2c[i] - gt["w2c"][v]).max()))
        d_exp = np.where(fake.invalid[v], 0, gt["depth"][v]).astype(np.float32)
        if (h, w) != (H, W):  # independent of the converter's own resize helpers
            d_exp = cv2.resize(d_exp, (w, h), interpolation=cv2.INTER_NEAREST_EXACT)
        d = frames[i]["depth"] * frames[i]["valid"]
        both = (d > 0) & (d_exp > 0)
        if both.any():
            rel_err = max(rel_err, float((np.abs(d - d_exp)[both] / d_exp[both]).max()))
        recall = min(recall, float(both.sum() / max(1, (d_exp > 0).sum())))
        false_valid += int(((d > 0) & (d_exp <= 0)).sum())
        img_gt = (gt["images"] if fake.images is None else fake.images)[v]
        img_exp = cv2.resize(img_gt, (w, h), interpolation=cv2.INTER_AREA) if (h, w) != (H, W) else img_gt
        image_mae = max(image_mae, float(np.abs(frames[i]["image"].astype(float) - img_exp).mean()))
        pts = unproject_depth(torch.from_numpy(d.astype(np.float64)), torch.from_numpy(K[i]),
                              torch.from_numpy(w2c[i])).numpy()[d > 0]
        if len(pts):
            surface.append(surface_distance(gt["scene"], pts) / d[d > 0])
    result.update(K_err=K_err, w2c_err=w2c_err, depth_rel_err=rel_err, valid_recall=recall,
                  false_valid=false_valid, image_mae=image_mae,
                  surface_rel=float(np.median(np.concatenate(surface))) if surface else float("nan"))
    return result
