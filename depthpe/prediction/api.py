"""Depth for a user's own images: ``depthpe.predict(model, images, cameras)`` (docs/predict.md).

The module is ``depthpe.prediction.api`` (not ``depthpe.predict``) so that the function
``depthpe.predict`` is never shadowed by a submodule of the same name.

Pipeline, in depthpe's conventions (docs/conventions.md):

1. Images of any size are read as uint8 RGB in their stored pixel grid (EXIF orientation ignored:
   cameras refer to that grid; ``depthpe.scenes.format.image_bytes.decode_rgb``, the converters' reader too;
   one note says for how many images a tag was ignored).
2. One input size (H, W) for all images: the model's trained width (``training_inputs.json``, else
   518) and the first image's aspect clamped to the trained aspect range, H a multiple of 14
   (``depthpe.loader.sampling.target_size``). Each image is cropped around its principal point to
   that aspect and resized (``depthpe.loader.augment.crop_box`` / ``crop_and_resize``, as in
   training), and K follows exactly (``crop_intrinsics`` then ``resize_intrinsics``).
3. Views per prediction: all images at once when there are at most ``max_views``; otherwise each
   image is predicted as view 0 together with its ``max_views - 1`` nearest cameras
   (``depthpe.loader.sampling.nearest_camera_order``), or its neighbours in name order without cameras.
4. Each prediction normalizes its cameras (``depthpe.geometry.normalize_scene``: view 0 = identity,
   unit mean camera distance); the depth the model predicts in that unit is multiplied back by the
   scale in float64, so depth is in the unit of the cameras' translations.

Without cameras only encodings that ignore them run (``global_pe`` "rope" or "none"); they get an
identity pose and a nominal K (focal length = image width), and depth stays in the model's
normalized unit (relative depth), which the result says (``unit="normalized"``).
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch

from ..config import ConfigError
from depthpe.scenes.cameras import read_cameras
from depthpe.scenes.cameras import FrameCamera, check_camera, fit_camera, match_cameras
from .result import ImagePrediction, PredictionResult

__all__ = ["ImagePrediction", "PredictionResult", "predict", "load_model", "list_images",
           "IMAGE_EXTENSIONS", "CAMERA_FREE_ENCODINGS"]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
#: Encodings that do not read K or w2c: the only ones that may run without cameras.
CAMERA_FREE_ENCODINGS = ("rope", "none")
DEFAULT_IMAGE_WIDTH = 518
DEFAULT_MAX_VIEWS = 8


# -- inputs --------------------------------------------------------------------------------------

def list_images(images: str | os.PathLike | Sequence[str | os.PathLike]) -> list[tuple[str, Path]]:
    """(name, path) of the input images, sorted by name. ``images``: a folder (its image files,
    recursively; names are paths relative to it, '/'-separated), a glob pattern (names are file
    names) or a list of files (names are file names). Raises ConfigError when none is found."""
    if isinstance(images, (str, os.PathLike)) and Path(images).is_dir():
        root = Path(images)
        found = [(p.relative_to(root).as_posix(), p) for p in root.rglob("*")
                 if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS]
    elif isinstance(images, (str, os.PathLike)):
        pattern = str(images)
        if not glob.has_magic(pattern):
            if not Path(pattern).is_file():
                raise ConfigError(f"--images {pattern}: no such folder or file (pass a folder, a glob or files)")
            found = [(Path(pattern).name, Path(pattern))]
        else:
            found = [(Path(p).name, Path(p)) for p in glob.glob(pattern, recursive=True) if Path(p).is_file()]
    else:
        found = [(Path(p).name, Path(p)) for p in images]
    if not found:
        raise ConfigError(f"no images found in {images} (extensions {', '.join(IMAGE_EXTENSIONS)})")
    names = [n for n, _ in found]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"several images are named {duplicates[0]!r}; pass a folder so that names keep their path")
    return sorted(found)


def load_image(path: Path) -> tuple[np.ndarray, int]:
    """((H, W, 3) uint8 RGB of an image file in its stored pixel grid, the EXIF orientation tag that
    was not applied: 1 = none; ``image_bytes.decode_rgb``); ConfigError if unreadable."""
    from depthpe.scenes.format.image_bytes import decode_rgb

    try:
        return decode_rgb(Path(path).read_bytes())
    except (OSError, ValueError) as err:
        raise ConfigError(f"{path}: cannot read the image ({err})") from err


def load_model(model, device: str | torch.device = "cpu", revision: str | None = None):
    """(DepthModel in eval mode on ``device``, its TrainingInputs or None). ``model``: a DepthModel
    (its ``training_inputs`` attribute, if set, is used), an exported folder or a Hub repo id (at
    ``revision``: branch, tag or commit; None = main)."""
    from ..model import DepthModel
    from ..model.training_inputs import read_training_inputs

    if isinstance(model, torch.nn.Module):
        return model.to(device).eval(), getattr(model, "training_inputs", None)
    try:
        loaded = DepthModel.from_pretrained(str(model), map_location=str(device), revision=revision)
        inputs = read_training_inputs(model, revision=revision)
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot load model {model}: {str(err).splitlines()[0]}") from err
    return loaded, inputs


def _match_cameras(names: list[str], sizes: list[tuple[int, int]], cameras) -> tuple[list[FrameCamera], list[str]]:
    """The camera of each image (by relative path, else a unique file name: ``match_cameras``),
    with K rescaled when the camera was calibrated at another resolution of the same aspect
    (``fit_camera``). ``sizes``: (H, W) per image. Returns (cameras, notes); ConfigError for a
    missing or ambiguous camera or a size of another aspect."""
    if not isinstance(cameras, Mapping):
        cameras = read_cameras(cameras)
    else:
        cameras = {name: check_camera(cam, "cameras") for name, cam in cameras.items()}
    matched = match_cameras(cameras, names)
    out, notes = [], []
    for name, (h, w) in zip(names, sizes):
        if matched[name] is None:
            raise ConfigError(f"no camera for image {name!r} in the camera source "
                              f"({len(cameras)} cameras, e.g. {next(iter(cameras))!r}); names must match")
        cam, note = fit_camera(matched[name], name, h, w)
        out.append(cam)
        notes += [note] if note else []
    return out, notes


def input_size(first_hw: tuple[int, int], inputs, image_width: int | None = None) -> tuple[int, int]:
    """Model input (H, W): width ``image_width`` or the trained width (518 without a sidecar); aspect
    H/W of the first image clamped to the trained aspect range; H a multiple of 14."""
    from depthpe.loader.sampling import target_size

    width = image_width or (inputs.image_width if inputs else DEFAULT_IMAGE_WIDTH)
    if width <= 0 or width % 14:
        raise ConfigError(f"image width must be a positive multiple of 14, got {width}")
    aspect = first_hw[0] / first_hw[1]
    if inputs is not None:
        aspect = min(max(aspect, inputs.aspect[0]), inputs.aspect[1])
    return target_size(aspect, width)


def prepare_view(image: np.ndarray, K: np.ndarray, out_hw: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Crop (H_in, W_in, 3) uint8 ``image`` around its principal point to the aspect of ``out_hw``
    (the largest such window) and resize it -> ((H, W, 3) uint8, K (3, 3) float64 of the output)."""
    from depthpe.loader.augment import crop_and_resize, crop_box

    h, w = image.shape[:2]
    box = crop_box((h, w), (float(K[0, 2]), float(K[1, 2])), out_hw, 1.0)
    blank = np.zeros((h, w), np.float32)
    img, _, _, K_out = crop_and_resize(image, blank, blank > 0, K, box, out_hw)
    return img, K_out


def nominal_K(height: int, width: int) -> np.ndarray:
    """(3, 3) stand-in intrinsics for images without cameras: focal length = width, centred."""
    return np.array([[width, 0.0, (width - 1) / 2], [0.0, width, (height - 1) / 2], [0.0, 0.0, 1.0]])


# -- planning and running ------------------------------------------------------------------------

def plan_views(n: int, max_views: int, w2c: np.ndarray | None) -> tuple[str, list[list[int]]]:
    """Which images to predict together: ("all", [[0..n-1]]) when n <= max_views, else ("nearest",
    one list per image i: [i, then its max_views - 1 nearest cameras]) (neighbours in order
    without cameras). w2c: (n, 3, 4) or None. The first index of each list is its reference view."""
    if max_views < 1:
        raise ConfigError(f"max views must be >= 1, got {max_views}")
    if n <= max_views:
        return "all", [list(range(n))]
    if w2c is not None:
        from depthpe.loader.sampling import nearest_camera_order

        return "nearest", [[i] + [int(j) for j in nearest_camera_order(w2c, i)[: max_views - 1]] for i in range(n)]
    order = [sorted(range(n), key=lambda j, i=i: (abs(j - i), j)) for i in range(n)]
    return "nearest", [o[:max_views] for o in order]


def run_views(model, images: np.ndarray, K: np.ndarray, w2c: np.ndarray | None, dtype: str = "fp32",
              scale_reference: str = "others"):
    """One prediction of S views through ``depthpe.model.inference.predict_depth``. images: (S, H, W, 3)
    uint8; K: (S, 3, 3); w2c: (S, 3, 4) in the caller's frame and unit, or None (identity poses,
    scale 1). Returns (depth (S, H, W) float32 in the caller's unit, conf (S, H, W) float32);
    unusable inputs raise ``ConfigError``."""
    from ..model.inference import predict_depth

    S = len(images)
    scale = 1.0 if w2c is None or S == 1 else None
    poses = np.tile(np.eye(4)[:3], (S, 1, 1)) if w2c is None else w2c
    x = torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).to(torch.float32) / 255
    try:
        out = predict_depth(model, x, torch.as_tensor(K, dtype=torch.float32),
                            torch.as_tensor(poses, dtype=torch.float64), scale=scale,
                            scale_reference=scale_reference, dtype=dtype)
    except ValueError as err:
        raise ConfigError(f"unusable input for the model: {err}") from err
    return out["depth"].cpu().numpy(), out["conf"].cpu().numpy()


def _check_cameras_needed(model, have_cameras: bool) -> None:
    """ConfigError when the model's encoding reads cameras and none were given."""
    pe = getattr(model.config, "global_pe", None)
    if not have_cameras and not (isinstance(pe, str) and pe in CAMERA_FREE_ENCODINGS):
        raise ConfigError(f"this model's camera encoding ({pe!r}) needs cameras: pass --cameras "
                          "(a COLMAP folder, a cameras .json or a scene file); only the encodings "
                          f"{' and '.join(CAMERA_FREE_ENCODINGS)} run without them")


def _prepare_all(paths: list[Path], names: list[str], cameras, inputs, image_width):
    """Load, crop and resize every image -> (images (N, H, W, 3) uint8, K (N, 3, 3), w2c (N, 3, 4)
    or None, (H, W), notes)."""
    from depthpe.scenes.format.image_bytes import orientation_notes

    loaded = [load_image(p) for p in paths]
    raw = [im for im, _ in loaded]
    notes = orientation_notes(sum(tag != 1 for _, tag in loaded))
    cams = None
    if cameras is not None:
        cams, cam_notes = _match_cameras(names, [im.shape[:2] for im in raw], cameras)
        notes += cam_notes
    out_hw = input_size(raw[0].shape[:2], inputs, image_width)
    views = [prepare_view(im, cams[i].K if cams else nominal_K(*im.shape[:2]), out_hw) for i, im in enumerate(raw)]
    images = np.stack([v[0] for v in views])
    K = np.stack([v[1] for v in views])
    w2c = np.stack([c.w2c for c in cams]) if cams else None
    return images, K, w2c, out_hw, notes


def predict(model, images, cameras=None, *, max_views: int | None = None, device: str = "cpu",
            dtype: str = "fp32", image_width: int | None = None, revision: str | None = None,
            progress: bool = False) -> PredictionResult:
    """Predict depth for a set of images (see the module docstring for each step).

    model: a DepthModel, an exported model folder or a Hub repo id. images: a folder, a glob or a
    list of files (``list_images``). cameras: None, a camera source (COLMAP folder, cameras .json,
    scene .h5; ``depthpe.scenes.cameras.read_cameras``) or a dict name -> FrameCamera; matched to images
    by name. max_views: views per prediction (default: the most views the model was trained with,
    else 8). device: torch device; dtype: "fp32" or "bf16" (autocast). image_width: override the
    trained input width (a multiple of 14). revision: Hub revision of ``model`` (a repo id). Raises
    ConfigError for unusable inputs.
    """
    from tqdm.auto import tqdm

    model, inputs = load_model(model, device, revision)
    _check_cameras_needed(model, cameras is not None)
    listed = list_images(images)
    names = [n for n, _ in listed]
    frames_in, K, w2c, out_hw, notes = _prepare_all([p for _, p in listed], names, cameras, inputs, image_width)
    if max_views is None:
        max_views = inputs.views[1] if inputs else DEFAULT_MAX_VIEWS
    mode, plans = plan_views(len(names), max_views, w2c)
    unit = "cameras" if w2c is not None and min(len(names), max_views) > 1 else "normalized"
    if w2c is not None and unit == "normalized":
        notes.append("one view per prediction: no camera motion, so depth is in the model's normalized unit")
    results: dict[int, ImagePrediction] = {}
    for plan in tqdm(plans, desc="predict", unit="prediction", disable=not progress):
        depth, conf = run_views(model, frames_in[plan], K[plan], None if w2c is None else w2c[plan], dtype,
                                inputs.scale_reference if inputs else "others")
        targets = plan if mode == "all" else plan[:1]
        for j, i in enumerate(targets):
            pose = w2c[i] if w2c is not None else np.eye(4)[:3]
            results[i] = ImagePrediction(names[i], depth[j], conf[j], frames_in[i], K[i], pose,
                                         [names[v] for v in plan])
    return PredictionResult([results[i] for i in range(len(names))], out_hw, unit, mode,
                            len(plans[0]), notes)
