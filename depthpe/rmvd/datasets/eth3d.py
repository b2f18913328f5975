"""ETH3D as RMVD reads it: the high-res multi-view training scenes, the DSLR JPEGs
(``<scene>_dslr_jpg.7z``) and their ground-truth depth (``<scene>_dslr_depth.7z``).

Native root (``--data-root eth3d=ROOT``, the archives extracted into it)::

    ROOT/<scene>/images/dslr_images/DSC_<nnnn>.JPG              images (6048 x 4032)
    ROOT/<scene>/ground_truth_depth/dslr_images/DSC_<nnnn>.JPG  GT depth (not a JPEG: see below)

GT depth: a headerless file of little-endian float32, row-major, one value per pixel of the image
of the same name (H x W values; ETH3D's depth is given for these original, distorted images),
metres along the optical axis, ``inf`` = no ground truth. The reference code reshapes it to
4032 x 6048; here the shape is read from the keyview image's header, so the file must hold
exactly H x W floats. The sample list's K is the pinhole K the reference uses with these images
(lens distortion is not modelled, as in the reference).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...config import ConfigError
from .common import image_hw, read_file_bytes, zero_invalid

__all__ = ["read_depth"]


def read_depth(path: Path, key_image: Path) -> np.ndarray:
    """ETH3D raw float32 depth ``path`` of the keyview image ``key_image`` -> (H, W) float64
    metres with ``inf``, NaN and values <= 0 as 0 (no GT); a file of another size is one
    ConfigError line."""
    height, width = image_hw(key_image, "ETH3D keyview image")
    data = read_file_bytes(path, "ETH3D ground-truth depth")
    if len(data) != 4 * height * width:
        raise ConfigError(f"ETH3D ground-truth depth {path} has {len(data)} bytes; its image {key_image} is "
                          f"{height}x{width} (HxW), so it must hold {4 * height * width} (raw float32 per pixel)")
    return zero_invalid(np.frombuffer(data, dtype="<f4").reshape(height, width))
