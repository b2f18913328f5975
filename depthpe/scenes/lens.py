"""The one lens check of every camera reader (COLMAP models, cameras JSON, transforms.json and WAI
``scene_meta.json``, RMVD sample lists, ``.h5`` scene files): depthpe's geometry is an undistorted
pinhole with K = [[fx, 0, cx], [0, fy, cy], [0, 0, 1]], so every field of a format that changes the
projection is either read (focal lengths, principal point, image size), refused with the undistort
hint (a lens model that is not a pinhole, a non-zero distortion coefficient, a fisheye / f-theta /
latitude-longitude / equirectangular flag, a skewed K), or ignored because it is informational
(the table: docs/data.md, "Lens fields").

``lens_problem`` returns the one line of the first such field, or None; the readers raise it in their
own error type with the file and frame in front. Pure: numpy and the standard library only.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

__all__ = ["UNDISTORT_HINT", "PINHOLE_MODELS", "DISTORTION_KEYS", "LENS_FLAGS", "lens_problem",
           "distortion_list"]

#: What to do with distorted, fisheye or otherwise non-pinhole images (the end of every refusal).
UNDISTORT_HINT = ("depthpe reads undistorted pinhole images only: undistort them first (`colmap image_undistorter`, "
                  "then `ns-process-data` on the undistorted model; for WAI scenes the wai_processing undistort "
                  "stage) and use the cameras of the undistorted images")
#: Lens models that are a pinhole when their distortion coefficients are all zero (COLMAP's names,
#: which nerfstudio and WAI use for ``camera_model``; nerfstudio's ``PERSPECTIVE`` camera type).
PINHOLE_MODELS = ("PINHOLE", "SIMPLE_PINHOLE", "OPENCV", "SIMPLE_RADIAL", "RADIAL", "FULL_OPENCV", "PERSPECTIVE")
#: Distortion coefficients by name (OpenCV / COLMAP / nerfstudio / instant-ngp); instant-ngp's
#: f-theta polynomial ``ftheta_p0``..``ftheta_p4`` describes a fisheye lens of its own.
DISTORTION_KEYS = ("k1", "k2", "k3", "k4", "k5", "k6", "p1", "p2", "s1", "s2", "s3", "s4")
FTHETA_KEYS = tuple(f"ftheta_p{i}" for i in range(5))
#: instant-ngp's flags of a non-pinhole projection -> what they mean.
LENS_FLAGS = {"is_fisheye": "a fisheye lens (OpenCV fisheye model)", "latlong": "a latitude-longitude projection",
              "equirectangular": "an equirectangular projection"}
#: nerfstudio's ``distortion_params`` order.
NERFSTUDIO_DISTORTION_ORDER = ("k1", "k2", "k3", "k4", "p1", "p2")
_SKEW_TOL = 1e-6  # relative to the focal length


def distortion_list(value, where: str) -> dict[str, float]:
    """nerfstudio's ``distortion_params`` ([k1, k2, k3, k4, p1, p2], possibly shorter) as {name: value};
    ValueError naming ``where`` for anything but a list of numbers."""
    if not isinstance(value, (list, tuple)) or len(value) > len(NERFSTUDIO_DISTORTION_ORDER) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        raise ValueError(f"{where}: distortion_params must be a list of at most 6 numbers [k1, k2, k3, k4, p1, p2], "
                         f"got {value!r}")
    return dict(zip(NERFSTUDIO_DISTORTION_ORDER, map(float, value)))


def _model_problem(model) -> str | None:
    if model is not None and str(model).upper() not in PINHOLE_MODELS:
        return f"camera_model {model} is not a pinhole camera (fisheye or other lens); {UNDISTORT_HINT}"
    return None


def _K_problem(K) -> str | None:
    """A skewed or otherwise off-pinhole K (the entries below the diagonal and the skew K[0][1])."""
    K = np.asarray(K, dtype=np.float64)
    focal = max(abs(float(K[0, 0])), abs(float(K[1, 1])), 1e-12)
    if abs(float(K[0, 1])) > _SKEW_TOL * focal:
        return (f"K has skew (K[0][1] = {float(K[0, 1]):g}), which a pinhole with square pixel axes does not have; "
                f"{UNDISTORT_HINT}")
    if abs(float(K[1, 0])) > _SKEW_TOL * focal or np.abs(K[2] - [0.0, 0.0, 1.0]).max() > 1e-6:
        return f"K must be [[fx, 0, cx], [0, fy, cy], [0, 0, 1]], got {K.tolist()}"
    return None


def lens_problem(*, model=None, coefficients: Mapping[str, float | None] | None = None,
                 flags: Mapping[str, object] | None = None, K=None) -> str | None:
    """Why a camera is not an undistorted pinhole, as one line (without the file in front), or None.

    model: the format's lens model name (``camera_model``, a COLMAP model; None = not given, a
    pinhole); coefficients: {name: value} of its distortion terms (None or 0 = none; an f-theta
    term ``ftheta_p*`` of any value but 0 is a fisheye); flags: instant-ngp's ``LENS_FLAGS`` as read
    (any true value refuses); K: (3, 3) pixel intrinsics (skew and off-pinhole entries refused)."""
    problem = _model_problem(model)
    if problem:
        return problem
    for flag, value in (flags or {}).items():
        if value:
            return f"{flag}: {value!r} marks {LENS_FLAGS.get(flag, 'a lens that is not a pinhole')}; {UNDISTORT_HINT}"
    nonzero = {k: float(v) for k, v in (coefficients or {}).items() if v}
    ftheta = [k for k in nonzero if k.startswith("ftheta_")]
    if ftheta:
        return f"{ftheta[0]} = {nonzero[ftheta[0]]:g} describes an f-theta (fisheye) lens; {UNDISTORT_HINT}"
    if nonzero:
        listed = ", ".join(f"{k}={v:g}" for k, v in nonzero.items())
        return f"the camera has lens distortion ({listed}); {UNDISTORT_HINT}"
    return _K_problem(K) if K is not None else None
