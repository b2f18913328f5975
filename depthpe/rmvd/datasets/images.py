"""A sample view's image as the benchmark uses it: RGB at the size its ``K`` is given for.

Most lists give K in pixels of the image file. ScanNet's list gives K for 640 x 480 while the
exported colour frames are 1296 x 968: its views carry ``image_size`` (H, W) and the image is
resized to it with Lanczos filtering, as the reference does (PIL, ``Image.LANCZOS``).
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from ...config import ConfigError
from depthpe.scenes.format.image_bytes import decode_rgb
from .common import read_file_bytes

__all__ = ["read_view_image"]


def read_view_image(view) -> tuple[np.ndarray, np.ndarray]:
    """``view`` (an ``RmvdView``) -> (its image (H, W, 3) uint8 RGB, resized to ``view.image_size``
    when that is given and differs from the file's size, and ``view.K`` (3, 3) in pixels of that
    image). A missing or undecodable file is one ConfigError line."""
    data = read_file_bytes(view.image, "image")
    try:
        rgb, _ = decode_rgb(data)
    except ValueError as err:
        raise ConfigError(f"image {view.image} is not a readable JPEG or PNG ({err})") from None
    size = view.image_size
    if size is not None and tuple(rgb.shape[:2]) != tuple(size):
        rgb = np.asarray(Image.fromarray(rgb).resize((size[1], size[0]), Image.LANCZOS))
    return rgb, view.K
