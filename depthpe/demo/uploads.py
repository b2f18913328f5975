"""The demo's uploads: images and optional cameras, checked before anything runs.

Every problem is a ``ConfigError`` with one line the page shows (not an image, too many or too large
files, a camera source that is not one, cameras that name none of the images). Uploaded files are
copied under their own file names into a fresh folder (``images/``, ``cameras/``) that
``depthpe.predict`` reads as usual.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ..config import ConfigError
from ..prediction.api import IMAGE_EXTENSIONS, load_image

__all__ = ["UploadLimits", "stage_images", "stage_cameras"]

_COLMAP_FILES = ("cameras.txt", "images.txt", "points3D.txt", "cameras.bin", "images.bin", "points3D.bin",
                 "rigs.bin", "frames.bin", "rigs.txt", "frames.txt")


@dataclass
class UploadLimits:
    """max_images: images per request; max_mb: megabytes per uploaded file."""

    max_images: int = 32
    max_mb: float = 20.0


def _name(path) -> str:
    return Path(str(path)).name


def _check_size(path: Path, limits: UploadLimits) -> None:
    size = path.stat().st_size / 2 ** 20
    if size > limits.max_mb:
        raise ConfigError(f"{path.name} is {size:.1f} MB; the limit is {limits.max_mb:g} MB per file")


def stage_images(files, folder: Path, limits: UploadLimits) -> Path:
    """Copy the uploaded image ``files`` (paths) into ``folder/images`` under their file names and
    check each decodes as a JPEG or PNG; returns that folder. ConfigError: none, too many, too
    large, a name twice, not an image."""
    files = [Path(str(f)) for f in files or []]
    if not files:
        raise ConfigError("upload at least one image (JPEG or PNG)")
    if len(files) > limits.max_images:
        raise ConfigError(f"{len(files)} images uploaded; this demo takes at most {limits.max_images}")
    out = folder / "images"
    out.mkdir(parents=True)
    for f in files:
        _check_size(f, limits)
        if f.suffix.lower() not in IMAGE_EXTENSIONS:
            raise ConfigError(f"{f.name} is not an image (expected .jpg, .jpeg or .png)")
        if (out / f.name).exists():
            raise ConfigError(f"two uploaded images are named {f.name}; rename one")
        shutil.copyfile(f, out / f.name)
        load_image(out / f.name)  # ConfigError "cannot read the image" for anything but a JPEG or PNG
    return out


def stage_cameras(files, folder: Path, limits: UploadLimits):
    """The camera source of the uploaded camera ``files``: one ``.json`` (cameras JSON or
    transforms.json) or ``.h5`` scene file, or the files of a COLMAP model (cameras + images, .txt
    or .bin), copied into ``folder/cameras``; None without files. ConfigError otherwise."""
    files = [Path(str(f)) for f in files or []]
    if not files:
        return None
    out = folder / "cameras"
    out.mkdir(parents=True)
    for f in files:
        _check_size(f, limits)
        shutil.copyfile(f, out / f.name)
    single = [f for f in files if f.suffix.lower() in (".json", ".h5", ".hdf5")]
    if len(files) == 1 and single:
        return out / files[0].name
    names = {f.name for f in files}
    colmap = any({f"cameras.{e}", f"images.{e}"} <= names for e in ("txt", "bin"))
    if colmap and names <= set(_COLMAP_FILES):
        return out
    raise ConfigError("cameras: upload one cameras .json, one transforms.json, or the files of a COLMAP model "
                      f"(cameras.txt and images.txt, or the .bin pair); got {', '.join(sorted(names))}")


def check_cameras_name_images(cameras: dict, image_names: list[str]) -> None:
    """ConfigError when no camera of ``cameras`` (name -> FrameCamera) matches any uploaded image."""
    from ..scenes.cameras import match_cameras

    matched = match_cameras(cameras, image_names)
    if not any(cam is not None for cam in matched.values()):
        raise ConfigError(f"the cameras name none of the uploaded images (cameras e.g. {next(iter(cameras))!r}, "
                          f"images e.g. {image_names[0]!r}); upload the images the cameras were made for")
