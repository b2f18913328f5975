"""Write a scene as a nerfstudio / instant-ngp ``transforms.json`` capture or as a WAI scene
(MapAnything's WorldAI format), the layouts ``depthpe convert folder`` and ``depthpe convert wai``
read (docs/data.md): fixtures from synthetic geometry with known cameras and depth.

``scene`` is a depthpe scene file (``depthpe synth``) or a ``depthpe.scenes.synth.generate_scene``
dict. Images are lossless PNGs ``frame_00000.png``, ...; cameras go through
``depthpe.scenes.transforms_json.write_transforms_json`` (camera-to-world, half-pixel principal
point). ``convention`` is the camera axes the matrices are written in, ``label`` what the file's
``camera_convention`` says: a label that differs from the matrices makes the deliberately wrong
fixture that ``depthpe check`` must fail after conversion.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .captures import read_scene_frames, scene_cameras, write_depth, write_images

__all__ = ["scene_frames", "write_exr_depth", "export_transforms_capture", "write_wai_scene"]

_UNSET = object()


def scene_frames(scene) -> dict:
    """``read_scene_frames``' dict (images, depth with 0 invalid, K, w2c, names) of a scene file
    path or of a ``generate_scene`` dict."""
    if isinstance(scene, dict):
        depth = np.asarray(scene["depth"], np.float32)
        return {"images": scene["images"], "depth": np.where(np.isfinite(depth), depth, 0), "K": scene["K"],
                "w2c": np.asarray(scene["w2c"])[:, :3], "names": [f"frame_{i:05d}.png" for i in range(len(depth))]}
    return read_scene_frames(scene)


def write_exr_depth(path: str | Path, depth: np.ndarray) -> Path:
    """(H, W) depth as a one-channel (``Y``) half-float OpenEXR file, the way WAI stores depth."""
    import OpenEXR

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {"compression": OpenEXR.ZIP_COMPRESSION, "type": OpenEXR.scanlineimage}
    with OpenEXR.File(header, {"Y": np.ascontiguousarray(depth, dtype=np.float16)}) as f:
        f.write(str(path))
    return path


def export_transforms_capture(scene, out: str | Path, *, convention: str = "opengl", label: str | None = None,
                              depth_format: str = "png", integer_depth_scale: float | None = None,
                              depth_key: str = "depth_file_path", depth_unit_scale_factor: float | None = None) -> Path:
    """Write ``scene`` as ``out/{images/, depth/, transforms.json}`` (nerfstudio's layout) -> ``out``.

    The frames name their depth map with ``depth_key`` (``depth_file_path``: nerfstudio,
    ``depth_path``: instant-ngp; None: no depth entries). ``depth_format`` npy, exr or 16-bit png;
    PNG values are depth / ``integer_depth_scale`` (None: max depth / 60000), written as the file's
    ``integer_depth_scale``. ``.npy`` values follow nerfstudio's rule: depth / ``depth_unit_scale_factor``,
    written as the file's field when given, else depth / 1e-3 (millimetres, nerfstudio's default) with
    no field. ``label``: the ``camera_convention`` field (None: omitted, as nerfstudio writes it,
    which means OpenGL).
    """
    from depthpe.scenes.transforms_json import write_transforms_json

    out = Path(out)
    sc = scene_frames(scene)
    write_images(out / "images", sc)
    scale = integer_depth_scale or float(sc["depth"].max()) / 60000.0
    suffix = {"npy": ".npy", "exr": ".exr", "png": ".png"}[depth_format]
    frame_fields = []
    (out / "depth").mkdir(parents=True, exist_ok=True)
    npy_unit = depth_unit_scale_factor or 1e-3
    for name, depth in zip(sc["names"], sc["depth"]):
        write_depth(out / "depth" / name, depth / npy_unit if depth_format == "npy" else depth, depth_format,
                    1.0 / scale)
        frame_fields.append({depth_key: f"depth/{Path(name).stem}{suffix}"} if depth_key else {})
    fields = {"camera_model": "OPENCV", **{k: 0.0 for k in ("k1", "k2", "p1", "p2")}}
    if depth_format == "png":
        fields["integer_depth_scale"] = scale
    if depth_format == "npy" and depth_unit_scale_factor is not None:
        fields["depth_unit_scale_factor"] = depth_unit_scale_factor
    if label is not None:
        fields["camera_convention"] = label
    write_transforms_json(out / "transforms.json", scene_cameras(sc, "images/"), convention=convention,
                          fields=fields, frame_fields=frame_fields)
    return out


def write_wai_scene(root: str | Path, scene, name: str = "scene_000", *, convention: str = "opencv",
                    label=_UNSET, scale_type: str | None = None) -> Path:
    """Write ``scene`` as the WAI scene ``root/name/{images/, depth/*.exr, scene_meta.json}`` -> its folder.

    ``scene_meta.json`` has per-frame intrinsics, ``transform_matrix`` (camera-to-world in the axes
    ``convention``), ``camera_model`` PINHOLE, ``camera_convention`` ``label`` (default: the true
    ``convention``; None: no such field), the ``image`` and ``depth`` frame modalities and, when
    given, ``scale_type`` ("metric"). Depth is one-channel half-float EXR, as WAI stores it.
    """
    from depthpe.scenes.transforms_json import write_transforms_json

    folder = Path(root) / name
    sc = scene_frames(scene)
    write_images(folder / "images", sc)
    frame_fields = []
    for frame, depth in zip(sc["names"], sc["depth"]):
        stem = Path(frame).stem
        write_exr_depth(folder / "depth" / f"{stem}.exr", depth)
        frame_fields.append({"frame_name": stem, "image": f"images/{frame}", "depth": f"depth/{stem}.exr"})
    fields = {"scene_name": name, "dataset_name": "depthpe_fixture", "version": "0.1", "shared_intrinsics": False,
              "camera_model": "PINHOLE", "scene_modalities": {},
              "frame_modalities": {"image": {"frame_key": "image", "format": "image"},
                                   "depth": {"frame_key": "depth", "format": "depth"}}}
    label = convention if label is _UNSET else label
    if label is not None:
        fields["camera_convention"] = label
    if scale_type is not None:
        fields["scale_type"] = scale_type
    write_transforms_json(folder / "scene_meta.json", scene_cameras(sc, "images/"), convention=convention,
                          fields=fields, frame_fields=frame_fields)
    return folder
