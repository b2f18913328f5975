"""Write a scene file out as a user's own capture, in the layouts `depthpe convert folder` and
`depthpe convert colmap` read (docs/data.md): for round-trip tests of those converters.

Images are written as lossless PNG ``frame_00000.png``, ... (the scene's decoded images), cameras
with ``depthpe.scenes.cameras`` (JSON or a COLMAP text model), depth as ``.npy`` (float32), ``.exr``,
16-bit ``.png`` (value = depth * depth_scale, rounded) or COLMAP ``.geometric.bin`` maps.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from .fake_datasets import write_image

__all__ = ["read_scene_frames", "scene_cameras", "write_images", "write_depth", "export_capture",
           "export_colmap_workspace"]


def read_scene_frames(scene_path: str | Path) -> dict:
    """All frames of a scene file: images (N, H, W, 3) uint8, depth (N, H, W) float32 (0 where
    invalid), K (N, 3, 3), w2c (N, 3, 4) float64, names (``frame_00000.png``, ...)."""
    from depthpe.scenes.format.scene_file import SceneReader

    with SceneReader(scene_path) as reader:
        frames = [reader.read_frame(i) for i in range(reader.num_frames)]
    return {
        "images": np.stack([f["image"] for f in frames]),
        "depth": np.stack([np.where(f["valid"], f["depth"], 0) for f in frames]).astype(np.float32),
        "K": np.stack([f["K"] for f in frames]),
        "w2c": np.stack([f["w2c"] for f in frames]),
        "names": [f"frame_{i:05d}.png" for i in range(len(frames))],
    }


def scene_cameras(sc: dict, prefix: str = "") -> list:
    """``FrameCamera``s (with the image size) of ``read_scene_frames``' result, named ``prefix + name``."""
    from depthpe.scenes.cameras import FrameCamera

    _, H, W = sc["depth"].shape
    return [FrameCamera(prefix + name, K, w2c, W, H) for name, K, w2c in zip(sc["names"], sc["K"], sc["w2c"])]


def write_images(folder: Path, sc: dict) -> None:
    """The scene's images as lossless PNGs ``folder/<name>``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, image in zip(sc["names"], sc["images"]):
        write_image(folder / name, cv2.cvtColor(image, cv2.COLOR_RGB2BGR))


def write_depth(path: Path, depth: np.ndarray, depth_format: str, depth_scale: float) -> None:
    """One depth map as ``path.with_suffix(.npy|.exr|.png)``."""
    if depth_format == "npy":
        np.save(path.with_suffix(".npy"), depth.astype(np.float32))
    elif depth_format == "exr":
        from .fake_datasets import write_exr

        write_exr(path.with_suffix(".exr"), depth)
    elif depth_format == "png":
        write_image(path.with_suffix(".png"), np.round(depth * depth_scale).astype(np.uint16))
    else:
        raise ValueError(f"depth_format must be npy, exr or png, got {depth_format!r}")


def export_capture(scene_path: str | Path, out: str | Path, *, depth_format: str = "npy",
                   cameras: str = "json", depth_scale: float = 1000.0) -> Path:
    """Write ``scene_path`` as ``out/{images/, depth/, cameras.json | sparse/0/}`` (the ``folder``
    layout); ``cameras``: "json" or "colmap" (a text model in sparse/0). Returns ``out``."""
    from depthpe.scenes.cameras import write_colmap_text, write_json_cameras

    out = Path(out)
    sc = read_scene_frames(scene_path)
    write_images(out / "images", sc)
    (out / "depth").mkdir(parents=True, exist_ok=True)
    for name, depth in zip(sc["names"], sc["depth"]):
        write_depth(out / "depth" / name, depth, depth_format, depth_scale)
    if cameras == "json":
        write_json_cameras(out / "cameras.json", scene_cameras(sc))
    else:
        write_colmap_text(out / "sparse" / "0", scene_cameras(sc))
    return out


def export_colmap_workspace(scene_path: str | Path, out: str | Path) -> Path:
    """Write ``scene_path`` as a COLMAP dense workspace: ``out/images/``, ``out/sparse/`` (text
    model) and ``out/stereo/depth_maps/<image>.geometric.bin``. Returns ``out``."""
    from depthpe.scenes.convert.colmap import write_colmap_depth
    from depthpe.scenes.cameras import write_colmap_text

    out = Path(out)
    sc = read_scene_frames(scene_path)
    write_images(out / "images", sc)
    write_colmap_text(out / "sparse", scene_cameras(sc))
    for name, depth in zip(sc["names"], sc["depth"]):
        write_colmap_depth(out / "stereo" / "depth_maps" / f"{name}.geometric.bin", depth)
    return out
