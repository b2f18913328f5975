"""Camera geometry as pure, batched torch functions (float32 and float64 safe), one job per module:

* ``cameras``: inverses of w2c and K, normalized intrinsics, projection, unprojection, crop/resize of
  K, camera centres;
* ``normalization``: the scene normalization of every sample (``normalize_scene``) and its scale;
* ``perturbation``: noisy copies of a scene's cameras (``perturb_cameras``);
* ``correspondence``: true cross-view patch matches from GT depth and cameras, and the blocks of an
  attention matrix they select.

Conventions (docs/conventions.md): ``K`` (..., 3, 3) OpenCV pixel intrinsics; ``w2c`` (..., 3|4, 4)
OpenCV world-to-camera; depth is z-depth, 0 = invalid. Every public name is importable from
``depthpe.geometry`` itself.
"""

from __future__ import annotations

from .cameras import (
    camera_centers,
    check_rotation,
    crop_intrinsics,
    invert_intrinsics,
    invert_w2c,
    normalize_intrinsics,
    pixel_grid,
    project_points,
    resize_intrinsics,
    to_4x4,
    transform_points,
    unproject_depth,
)
from .correspondence import (
    PatchMatches,
    cyclic_pairs,
    match_hits,
    pair_blocks,
    pair_targets,
    patch_depths,
    patch_matches,
    patch_rows_cols,
    query_patches,
    window_masks,
)
from .normalization import (
    MIN_RELATIVE_SCALE,
    SCALE_REFERENCES,
    DegenerateSceneError,
    mean_center_distance,
    normalize_scene,
    scale_is_degenerate,
)
from .perturbation import axis_angle_rotation, perturb_cameras

__all__ = [
    "DegenerateSceneError",
    "to_4x4",
    "check_rotation",
    "invert_w2c",
    "invert_intrinsics",
    "normalize_intrinsics",
    "camera_centers",
    "pixel_grid",
    "unproject_depth",
    "project_points",
    "transform_points",
    "crop_intrinsics",
    "resize_intrinsics",
    "normalize_scene",
    "mean_center_distance",
    "scale_is_degenerate",
    "SCALE_REFERENCES",
    "MIN_RELATIVE_SCALE",
    "axis_angle_rotation",
    "perturb_cameras",
    "PatchMatches",
    "patch_depths",
    "patch_matches",
    "patch_rows_cols",
    "window_masks",
    "cyclic_pairs",
    "query_patches",
    "pair_targets",
    "pair_blocks",
    "match_hits",
]
