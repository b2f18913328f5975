"""One frame made ready for a scene file: sizes, exact resizing of image, depth and K, pose checks,
and ``_prepare_frame`` (validate, resize and filter a ``RawFrame``, or drop it with its reason)."""

from __future__ import annotations

import cv2
import numpy as np

from ..format.limits import camera_problems
from .contract import FrameDropped, RawFrame
from .options import ConvertOptions

__all__ = ["BLANK_IMAGE_MAX", "fit_size", "scale_intrinsics", "match_size", "resize_frame", "rotation_ok"]

BLANK_IMAGE_MAX = 2  # an image whose brightest pixel is <= this is "blacked out" (CO3D test targets)


def fit_size(height: int, width: int, max_side: int) -> tuple[int, int]:
    """(height, width) scaled so that the longer side is at most ``max_side`` (never enlarged),
    rounded to whole pixels."""
    longest = max(height, width)
    if longest <= max_side:
        return height, width
    s = max_side / longest
    return max(1, int(round(height * s))), max(1, int(round(width * s)))


def scale_intrinsics(K: np.ndarray, sx: float, sy: float) -> np.ndarray:
    """(3, 3) OpenCV pixel intrinsics after resizing the image by (sx, sy) (geometry.resize_intrinsics,
    pixel-centre exact: cx' = sx (cx + 0.5) - 0.5) -> (3, 3) float64."""
    import torch

    from ...geometry import resize_intrinsics

    return resize_intrinsics(torch.from_numpy(np.asarray(K, np.float64)), sx, sy).numpy()


def match_size(depth: np.ndarray, height: int, width: int) -> np.ndarray:
    """Nearest-neighbour resample (``cv2.INTER_NEAREST_EXACT``) of a depth or mask map (h, w) to
    (height, width); a no-op if the size already matches. Never interpolates across depth edges."""
    if depth.shape[:2] == (height, width):
        return depth
    return cv2.resize(depth, (width, height), interpolation=cv2.INTER_NEAREST_EXACT)


def resize_frame(
    image: np.ndarray, depth: np.ndarray, K: np.ndarray, height: int, width: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Resize one frame to (height, width) with exact intrinsics.

    image: (H, W, 3) uint8 (INTER_AREA when shrinking, INTER_CUBIC when enlarging); depth: (H, W)
    z-depth (INTER_NEAREST_EXACT, so no value is ever interpolated); K: (3, 3) OpenCV pixel
    intrinsics, updated with sx = width / W, sy = height / H as
    ``fx' = sx fx, cx' = sx (cx + 0.5) - 0.5`` (geometry.resize_intrinsics).
    Returns (image (height, width, 3), depth (height, width), K (3, 3) float64).
    """
    H, W = depth.shape
    if image.shape[:2] != (H, W):
        raise ValueError(f"image {image.shape[:2]} and depth {(H, W)} differ in size")
    if (H, W) == (height, width):
        return image, depth, np.asarray(K, np.float64)
    shrink = height * width < H * W
    image = cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_CUBIC)
    depth = match_size(depth, height, width)
    return image, depth, scale_intrinsics(K, width / W, height / H)


def rotation_ok(w2c: np.ndarray, atol: float = 1e-3) -> bool:
    """True if ``w2c`` (3, 4) is finite and its 3x3 block is orthonormal with det +1 (within atol)."""
    w2c = np.asarray(w2c, np.float64)
    if w2c.shape != (3, 4) or not np.isfinite(w2c).all():
        return False
    R = w2c[:, :3]
    return bool(np.abs(R @ R.T - np.eye(3)).max() <= atol and abs(np.linalg.det(R) - 1) <= atol)



def _same_aspect(a: tuple[int, int], b: tuple[int, int], tolerance: float = 0.02) -> bool:
    """True if the (H, W) sizes ``a`` and ``b`` have the same aspect ratio within ``tolerance``
    (relative difference of the two scale factors)."""
    sy, sx = b[0] / a[0], b[1] / a[1]
    return abs(sx - sy) <= tolerance * max(sx, sy)


def _prepare_frame(raw: RawFrame, target: tuple[int, int] | None, options: ConvertOptions):
    """Validate, resize and filter one raw frame -> (image, depth, K, w2c); raises FrameDropped."""
    image, depth = np.asarray(raw.image), np.asarray(raw.depth, np.float32)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise FrameDropped("bad image format")
    if image.shape[:2] != depth.shape:
        if not _same_aspect(image.shape[:2], depth.shape):  # e.g. depth in a rotated grid: never stretch it
            raise FrameDropped("depth map aspect differs from the image")
        depth = match_size(depth, *image.shape[:2])
    if int(image.max(initial=0)) <= BLANK_IMAGE_MAX:
        raise FrameDropped("blank image")
    K = np.asarray(raw.K, np.float64)
    w2c = np.asarray(raw.w2c, np.float64)[:3]
    if not np.isfinite(K).all() or K[0, 0] <= 0 or K[1, 1] <= 0:
        raise FrameDropped("invalid intrinsics")
    if not rotation_ok(w2c):
        raise FrameDropped("invalid pose")
    depth = np.where(np.isfinite(depth) & (depth > 0), depth, 0).astype(np.float32)
    H, W = depth.shape
    if camera_problems(K[None], w2c[None], H, W):  # principal point far off, K's last row
        raise FrameDropped("invalid intrinsics")
    if target is None:
        target = fit_size(H, W, options.max_side)
    elif not _same_aspect((H, W), target):
        raise FrameDropped("image aspect differs from the scene's first frame")
    image, depth, K = resize_frame(image, depth, K, *target)
    if float((depth > 0).mean()) < options.min_valid_fraction:
        raise FrameDropped("too little valid depth")
    return image, depth, K, w2c
