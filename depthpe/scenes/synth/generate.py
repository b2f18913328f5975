"""One random scene, drawn and rendered (``generate_scene``): room, cameras, images and depth."""

from __future__ import annotations

import numpy as np

from .cameras import random_cameras
from .params import DEFAULT_PARAMS, SynthParams
from .render import render_views
from .repetitive import repetitive_textures
from .rooms import random_scene
from .scene import SceneGenerationError

__all__ = ["generate_scene"]


def generate_scene(seed: int | np.random.SeedSequence, views: int, height: int, width: int,
                   params: SynthParams = DEFAULT_PARAMS) -> dict:
    """Draw and render one random scene of the distribution ``params`` (default: the training one).

    seed: an int or a SeedSequence (see ``scene_seed``). Returns dict(images (V, H, W, 3) uint8
    RGB, depth (V, H, W) float32 z-depth (0 = sky), K (V, 3, 3) float64, w2c (V, 3, 4) float64
    OpenCV world-to-camera, scene: the Scene). Deterministic for a seed. If a scene admits no
    valid camera trajectory (rare), a new scene is drawn from the same stream. With
    ``params.texture`` "stripes" or "checkers" the scene is re-textured once its cameras are drawn
    (``repetitive_textures``).
    """
    if views < 1 or height < 8 or width < 8:
        raise ValueError(f"need views >= 1 and height, width >= 8; got {views}, {height}, {width}")
    rng = np.random.default_rng(seed)
    for _ in range(20):
        scene = random_scene(rng, params)
        try:
            K, w2c = random_cameras(rng, scene, views, height, width, params=params)
        except SceneGenerationError:
            continue
        if params.texture != "mixed":  # drawn after the cameras: periods follow the depth they see
            scene = repetitive_textures(rng, scene, K, w2c, height, width, params)
        images, depth = render_views(scene, K, w2c, height, width)
        return {"images": images, "depth": depth, "K": K, "w2c": w2c, "scene": scene}
    raise SceneGenerationError("could not draw a scene with valid cameras in 20 attempts")
