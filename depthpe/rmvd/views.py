"""The model input of one RMVD view set: the images read, resized to the input size, with exact
intrinsics and the poses as depthpe ``w2c``, the keyview first.

Input size (``--input-size``):

* ``training`` (default): the width the model was trained at (``training_inputs.json``; 518
  without it, as VGGT-1B; ``--image-width`` overrides) and the keyview image's own aspect, the
  height the nearest multiple of 14 (``depthpe.loader.sampling.target_size``);
* ``rmvd``: RMVD's input size of the dataset (``RMVD_SIZES``, height x width, the reference's
  README and benchmark defaults, e.g. ETH3D 768 x 1152), each side rounded to the nearest multiple
  of 14 (ETH3D: 770 x 1148).

Every view is resized as a whole (no crop: the depth must cover the GT's frame), so its aspect may
change slightly; K follows exactly (``depthpe.loader.augment.crop_and_resize`` with the full image as
the window: INTER_AREA shrinking, INTER_CUBIC enlarging). The views of a set are ordered keyview
first, then the source views nearest in list index first (a tie: the lower index); only the first
view is special to a depthpe model (it is the reference frame), so the order of the others does
not matter. Poses are RMVD's view_to_key, which is ``w2c`` with the keyview as the world.
"""

from __future__ import annotations

import numpy as np

from ..config import ConfigError
from depthpe.loader.augment import CropBox, crop_and_resize
from depthpe.loader.sampling import target_size
from .datasets.images import read_view_image
from .orderings import index_distance_order
from .samples import RmvdSample

__all__ = ["INPUT_SIZES", "RMVD_SIZES", "PATCH", "round_to_patch", "input_hw", "SampleImages"]

INPUT_SIZES = ("training", "rmvd")  # = config.INPUT_SIZE_CHOICES
# RMVD's input (height, width) per dataset, as its benchmark runs its own model.
RMVD_SIZES = {"kitti": (384, 1280), "scannet": (448, 640), "eth3d": (768, 1152), "dtu": (896, 1216),
              "tanks_and_temples": (704, 1280)}
PATCH = 14


def round_to_patch(pixels: float, patch: int = PATCH) -> int:
    """The multiple of ``patch`` nearest to ``pixels`` (at least one patch)."""
    return max(patch, int(round(pixels / patch)) * patch)


def input_hw(input_size: str, dataset: str, keyview_hw: tuple[int, int], width: int) -> tuple[int, int]:
    """The model input (H, W) of a sample of ``dataset`` whose keyview image is ``keyview_hw``
    (H, W): ``training`` -> ``width`` and the keyview's aspect; ``rmvd`` -> ``RMVD_SIZES[dataset]``
    rounded to multiples of 14 (a ``ConfigError`` for another dataset name)."""
    if input_size == "training":
        return target_size(keyview_hw[0] / keyview_hw[1], width, PATCH)
    if dataset not in RMVD_SIZES:
        raise ConfigError(f"--input-size rmvd: RMVD has no input size for dataset {dataset!r} (it has "
                          f"{', '.join(RMVD_SIZES)}); use --input-size training")
    h, w = RMVD_SIZES[dataset]
    return round_to_patch(h), round_to_patch(w)


class SampleImages:
    """The views of one sample, each image read once (uint8 (H, W, 3) RGB) when first needed."""

    def __init__(self, sample: RmvdSample):
        self.sample = sample
        self._images: dict[int, np.ndarray] = {}

    def image(self, index: int) -> np.ndarray:
        """View ``index``'s image as stored; a ``ConfigError`` naming the file if it cannot be read."""
        if index not in self._images:
            self._images[index] = read_view_image(self.sample.views[index])[0]
        return self._images[index]

    def model_order(self, views: tuple[int, ...]) -> list[int]:
        """The view indices of ``views`` (a set holding the keyview) in the model's order: the
        keyview, then the others nearest in list index first."""
        keyview = self.sample.keyview
        order = index_distance_order(keyview, len(self.sample.views))
        return [keyview, *(i for i in order if i in views)]

    def inputs(self, views: tuple[int, ...], out_hw: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(images (S, H, W, 3) uint8, K (S, 3, 3) float64 of those pixels, w2c (S, 4, 4) float64
        metres) of ``views`` at ``out_hw`` = (H, W), in ``model_order``."""
        images, Ks, poses = [], [], []
        for i in self.model_order(views):
            image, view = self.image(i), self.sample.views[i]
            h, w = image.shape[:2]
            blank = np.zeros((h, w), np.float32)
            resized, _, _, K = crop_and_resize(image, blank, blank > 0, view.K, CropBox(0, 0, w, h), out_hw)
            images.append(resized)
            Ks.append(K)
            poses.append(view.pose)
        return np.stack(images), np.stack(Ks), np.stack(poses)
