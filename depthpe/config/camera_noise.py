"""How much the *input* cameras of a scene are perturbed (``CameraNoise``), for evaluation under
noisy poses (``depthpe eval --rotation-noise ...``) and for training with the same augmentation
(``data.camera_noise``). Light module: no torch; the perturbation itself is
``depthpe.geometry.perturb_cameras``.

The levels are magnitudes, not standard deviations: at ``rotation_deg = 2`` every perturbed camera
is rotated by exactly 2 degrees about a random axis. See docs/evaluation.md ("Noisy cameras").
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from . import require
from .options import option

__all__ = ["CameraNoise", "CameraNoiseOptions", "check_levels", "MAX_TRANSLATION_NOISE", "noise_note", "scene_noise_seed"]


def scene_noise_seed(seed: int, key: str) -> int:
    """The seed of one scene's perturbation: 63 bits of SHA-256 of ``seed`` and the scene's key
    (``"<dataset>/<scene>"``), so that each scene has its own draw, the same in any order and on any
    number of processes."""
    digest = hashlib.sha256(f"{int(seed)}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def noise_note(entry: dict | None) -> str | None:
    """The one line that says an evaluation gave the model perturbed cameras, from the
    ``"camera_noise"`` entry of its settings ({"rotation_deg", "translation", "focal", "seed"};
    ``CameraNoiseOptions.camera_noise_entry``), or None without noise. Printed above the table on the
    console and in summary.md."""
    if not entry:
        return None
    return (f"camera noise: the model was given perturbed input cameras (rotation {entry['rotation_deg']:g} deg, "
            f"translation {entry['translation']:g} x the mean baseline, focal x (1 +- {entry['focal']:g}), "
            f"noise seed {entry.get('seed', 0)}); ground truth untouched")


MAX_TRANSLATION_NOISE = 100.0  # mean baselines: the largest translation noise any command accepts


def check_levels(levels: tuple, names: tuple[str, str, str]) -> None:
    """Raise ``ConfigError`` (one line, naming the level by ``names``) unless the (rotation in
    degrees, translation fraction, focal fraction) ``levels`` are finite numbers >= 0, the rotation
    at most 180 degrees, the translation at most ``MAX_TRANSLATION_NOISE`` mean baselines (far beyond
    any camera error; 1e300 would overflow the poses) and the focal fraction below 1."""
    for value, name in zip(levels, names):
        require(isinstance(value, (int, float)) and math.isfinite(value) and value >= 0,
                f"{name} must be a finite number >= 0, got {value!r}")
    require(levels[0] <= 180, f"{names[0]} must be at most 180 degrees, got {levels[0]}")
    require(levels[1] <= MAX_TRANSLATION_NOISE, f"{names[1]} must be at most {MAX_TRANSLATION_NOISE:g} (a multiple "
            f"of the mean baseline), got {levels[1]:g}")
    require(levels[2] < 1, f"{names[2]} must be below 1 (a fraction of the focal length), got {levels[2]}")


@dataclass(frozen=True)
class CameraNoise:
    """Perturbation levels of the input cameras of one scene (view 0 = the reference).

    rotation_deg: every view but the reference is rotated by this many degrees about a uniformly
    random axis through its centre (so its pose relative to the reference errs by exactly this);
    translation: every view but the reference has its centre moved by this fraction of the mean
    baseline (mean distance of the other camera centres to the reference's) in a uniformly random
    direction; focal: every view's focal lengths (fx and fy together) are multiplied by
    ``1 + focal`` or ``1 - focal`` (random sign; principal point kept). All 0 = no perturbation.
    """

    rotation_deg: float = 0.0
    translation: float = 0.0
    focal: float = 0.0

    def __post_init__(self) -> None:
        check_levels((self.rotation_deg, self.translation, self.focal),
                     ("camera noise rotation_deg", "camera noise translation", "camera noise focal"))

    @property
    def is_zero(self) -> bool:
        """Whether no camera is changed."""
        return self.rotation_deg == 0 and self.translation == 0 and self.focal == 0

    def as_dict(self) -> dict:
        """The levels, as recorded in summary.json, the manifest and the report."""
        return {"rotation_deg": float(self.rotation_deg), "translation": float(self.translation),
                "focal": float(self.focal)}


@dataclass
class CameraNoiseOptions:
    """The camera-noise options of a command (``depthpe eval``): the levels of ``CameraNoise`` and the
    seed of the perturbation (each scene draws its own from the seed and its name, so the same seed
    perturbs a scene the same way in any order, on any number of processes)."""

    rotation_noise: float = option(0.0, metavar="DEG", help="rotate every input camera but view 0 by DEG degrees "
                                   "about a random axis (ground truth untouched)")
    translation_noise: float = option(0.0, metavar="FRAC", help="move every input camera centre but view 0's by "
                                      "FRAC x the mean baseline in a random direction")
    focal_noise: float = option(0.0, metavar="FRAC", help="scale every input camera's focal length by 1 +- FRAC")
    noise_seed: int = option(0, help="seed of the camera perturbation")

    def _check_camera_noise(self) -> None:
        """One ``ConfigError`` line naming the flag of a bad level."""
        check_levels((self.rotation_noise, self.translation_noise, self.focal_noise),
                     ("--rotation-noise", "--translation-noise", "--focal-noise"))

    def camera_noise_entry(self) -> dict:
        """{"camera_noise": the levels and the seed}, as summary.json's meta, the manifest and the
        settings fingerprint record them, or {} without noise (so that those files stay as they
        were before noise existed)."""
        noise = self.camera_noise()
        return {} if noise.is_zero else {"camera_noise": {**noise.as_dict(), "seed": int(self.noise_seed)}}

    def camera_noise(self) -> CameraNoise:
        """The levels as a ``CameraNoise``."""
        return CameraNoise(self.rotation_noise, self.translation_noise, self.focal_noise)
