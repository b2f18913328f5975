"""Procedural MegaSynth-like multi-view scenes: an exact numpy ray caster and a dataset writer.

A scene is a box-shaped room (floor, walls, ceiling) with procedural textures (checker, stripes,
value noise, colour bands), usually with one or two openings (a missing wall, a window or a
skylight) through which rays escape to a sky, plus 3-8 textured primitives (rotated boxes, spheres,
finite capped cylinders). Cameras either orbit a point of interest or walk through the room along a
smooth path. Rendering is exact ray casting at the pixel centres, vectorized over all pixels of a
view, in float64, with Lambertian shading (key light + ambient) and shadows cast by the primitives.

Conventions (docs/conventions.md):

* world frame: right-handed, **z up** (the floor is ``z = room_min[2]``); units are arbitrary
  "scene" units (``depth_units="scene"``, ``metric=False``).
* ``K``: (V, 3, 3) pixel intrinsics, OpenCV (pixel centres at integer coordinates, zero skew), so the
  ray through pixel (u, v) is ``K^-1 [u, v, 1]``.
* ``w2c``: (V, 3, 4) OpenCV world-to-camera (x right, y down, z forward): ``x_cam = R x_world + t``.
* depth: (V, H, W) float32 **z-depth** (distance along the optical axis, not ray length); 0 where a
  ray escapes through an opening (the image shows the sky there). Never NaN or inf.
* images: (V, H, W, 3) uint8 RGB.

Everything in a scene (room, primitives, texture scales, camera distances) is drawn relative to one
global scale ``s`` in [3, 10] units, so a single image carries no cue about ``s``: recovering the
scale of the depth needs the camera translations (the multi-view geometry).

The distribution is set by ``SynthParams`` (defaults: the distribution described above);
``shift_params`` builds the named distribution shifts of ``SHIFTS`` (``depthpe synth --shift NAME``),
which change room size, camera baseline, camera path, field of view or object statistics. The
scene knobs (``knob_params``: ``--rig``, ``--depth-ratio``, ``--rotation-jitter``, ``--texture``) build
a correspondence benchmark: straight rigs with a set depth / baseline ratio and repetitive textures
(``rigs``, ``repetitive``); ``parallax`` measures the parallax of a scene's view pairs in patches.

Per-scene randomness comes from ``numpy.random.SeedSequence(seed, spawn_key=(split, index))``, so a
scene depends only on (seed, split, index): runs are deterministic, resumable and train/val scenes
never share a random stream.

One module per job: ``params`` (the distribution, shifts, styles, seeds), ``scene`` (the
dataclasses), ``rooms`` (a random room), ``textures``, ``raycast``, ``render`` (shading),
``clearance``, ``trajectories`` (camera paths), ``rigs`` (the straight rigs), ``cameras`` (drawing
them), ``repetitive`` (stripes and checkers), ``parallax``, ``generate`` (one scene) and ``writer``
(the dataset); this package re-exports their public names.
"""

from __future__ import annotations

from .cameras import random_cameras
from .clearance import free_space_clearance, surface_distance
from .generate import generate_scene
from .parallax import pair_parallax, parallax_patches, parallax_quantiles
from .params import (DEFAULT_PARAMS, PATCH_PX, RIGS, SHIFTS, STYLES, TEXTURES, SynthParams, knob_params, scene_params,
                     scene_seed, shift_label, shift_names, shift_params, style_params)
from .raycast import camera_rays, cast_rays
from .render import render_view, render_views
from .rooms import random_scene
from .scene import Primitive, Scene, SceneGenerationError, Texture
from .trajectories import intrinsics_from_fov, look_at_w2c
from .writer import (DATASET_NAME, DEFAULT_HEIGHT, DEFAULT_TRAIN_SCENES, DEFAULT_VAL_SCENES, DEFAULT_VIEWS,
                     DEFAULT_WIDTH, SOURCE, format_summary, write_synth_dataset)

__all__ = [
    "Texture",
    "Primitive",
    "Scene",
    "SceneGenerationError",
    "SynthParams",
    "SHIFTS",
    "shift_names",
    "shift_label",
    "shift_params",
    "STYLES",
    "style_params",
    "RIGS",
    "TEXTURES",
    "PATCH_PX",
    "knob_params",
    "scene_params",
    "pair_parallax",
    "parallax_patches",
    "parallax_quantiles",
    "DATASET_NAME",
    "SOURCE",
    "DEFAULT_HEIGHT",
    "DEFAULT_WIDTH",
    "DEFAULT_VIEWS",
    "DEFAULT_TRAIN_SCENES",
    "DEFAULT_VAL_SCENES",
    "scene_seed",
    "random_scene",
    "random_cameras",
    "look_at_w2c",
    "intrinsics_from_fov",
    "camera_rays",
    "cast_rays",
    "render_views",
    "render_view",
    "surface_distance",
    "free_space_clearance",
    "generate_scene",
    "write_synth_dataset",
    "format_summary",
    "DEFAULT_PARAMS",
]
