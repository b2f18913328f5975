"""The parameters of the scene distribution (``SynthParams``), the named distribution shifts
(``SHIFTS``, ``depthpe synth --shift``) and styles (``STYLES``, ``--style``), the scene knobs of a
correspondence benchmark (``RIGS``, ``TEXTURES``, ``knob_params``: ``--rig``, ``--depth-ratio``,
``--rotation-jitter``, ``--texture``), the parameters as a file records them (``params_json``) and the
per-scene seed (``scene_seed``: a scene depends only on (seed, split, index))."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import json

import numpy as np

__all__ = ["SynthParams", "DEFAULT_PARAMS", "SHIFTS", "shift_names", "shift_label", "shift_params", "STYLES",
           "style_params", "RIGS", "TEXTURES", "PATCH_PX", "knob_params", "scene_params", "params_json", "SPLIT_KEYS",
           "scene_seed"]

SPLIT_KEYS = {"train": 0, "val": 1, "test": 2}
PATCH_PX = 14  # the ViT patch side in pixels of the output image: the unit of texture periods and parallax


@dataclass(frozen=True)
class SynthParams:
    """The parameters of the scene distribution; the defaults are the training distribution.

    Ranges are (low, high). scale: the global scale ``s`` (log-uniform) that sets the size of the
    objects, the textures and the camera motion; room_scale: the scale of the room (walls, floor,
    ceiling and their textures), log-uniform, or None for the room to use ``s``; the room is
    ``U(0.6, 1)`` x that scale wide and deep and ``U(0.35, 0.7)`` x it high. object_count: number of
    primitives drawn (inclusive range; a primitive too big for the room is dropped); object_size:
    primitive size in units of ``s``; object_kinds: the shapes drawn (uniformly; repeat a name to
    weight it). paths: camera path styles, drawn uniformly per trajectory ("orbit", "walk", "dolly":
    straight line looking along the motion, "truck": straight line looking sideways, "rig": the
    geometry-only path of ``_rig_trajectory``); orbit_object_p:
    probability that an orbit circles a primitive (else a random point of the room); orbit_radius:
    orbit distance in units of ``s``; orbit_arc_deg: azimuth covered by an orbit; orbit_wobble:
    multiplier of the orbit's smooth radius (+-20%) and elevation (+-10 deg) variation;
    walk_length: length of a walk, dolly or truck path in units of ``s``. hfov_deg: ranges of the
    horizontal field of view in degrees; one range is drawn uniformly per scene, then a value in it.
    depth_ratio: the depth / baseline ratio ``rho`` of the rig paths, log-uniform: for "rig" (the
    curve) ``s`` over the path length, for "stereo" and "line" the median depth the rig's centre sees
    over the distance from the first to the last camera (orbit, walk, dolly and truck ignore it).
    flat_shading: light every surface fully (ambient 1: no shading, no shadows).
    rotation_jitter_deg: None for each path's own rotations (the curve's smooth few degrees, none on
    "stereo" and "line"), or each camera's yaw, pitch and roll off the rig's shared direction drawn
    uniformly within +- this many degrees (rig paths only). texture: "mixed" (random kinds and
    periods), or "stripes" / "checkers" on every surface, without fine noise, repeating every
    ``texture_period`` patches (``PATCH_PX`` pixels of the output image) at the scene's median depth,
    aligned with the baseline (``textures.repetitive_textures``).
    """

    scale: tuple[float, float] = (3.0, 10.0)
    room_scale: tuple[float, float] | None = None
    object_count: tuple[int, int] = (3, 8)
    object_size: tuple[float, float] = (0.05, 0.14)
    object_kinds: tuple[str, ...] = ("box", "sphere", "cylinder")
    paths: tuple[str, ...] = ("orbit", "walk")
    orbit_object_p: float = 0.75
    orbit_radius: tuple[float, float] = (0.2, 0.45)
    orbit_arc_deg: tuple[float, float] = (30.0, 180.0)
    orbit_wobble: float = 1.0
    walk_length: tuple[float, float] = (0.15, 0.45)
    hfov_deg: tuple[tuple[float, float], ...] = ((45.0, 70.0),)
    depth_ratio: tuple[float, float] = (2.0, 12.0)
    flat_shading: bool = False
    # added after the first files were written: recorded (``params_json``) only when not the default
    rotation_jitter_deg: float | None = None
    texture: str = "mixed"
    texture_period: tuple[float, float] = (2.0, 4.0)


_ADDED_FIELDS = ("rotation_jitter_deg", "texture", "texture_period")

# Named distribution shifts: the SynthParams fields each one changes (``depthpe synth --shift``).
SHIFTS: dict[str, dict] = {
    # rooms 12-30 units instead of 3-10 around objects and camera paths of the default size: far
    # walls, so scene depth is no longer proportional to the camera motion; orbits always circle an
    # object (an orbit around empty space of a big room sees different far walls from each view)
    "scale": {"room_scale": (12.0, 30.0), "orbit_object_p": 1.0},
    # about 5x less camera motion relative to the scene: short orbit arcs, little wobble, short walks
    "baseline": {"orbit_arc_deg": (5.0, 15.0), "orbit_wobble": 0.15, "walk_length": (0.03, 0.08)},
    # straight-line paths (forward dolly, sideways truck) instead of orbits and walks
    "path": {"paths": ("dolly", "truck")},
    # narrow (30-40 deg) or wide (80-95 deg) horizontal field of view instead of 45-70 deg
    "fov": {"hfov_deg": ((30.0, 40.0), (80.0, 95.0))},
    # clutter: 10-16 smaller spheres and cylinders (no boxes) instead of 3-8 boxes/spheres/cylinders
    "objects": {"object_count": (10, 16), "object_size": (0.03, 0.08), "object_kinds": ("sphere", "cylinder")},
}


def shift_names(names: Sequence[str]) -> tuple[str, ...]:
    """Validate shift names (``SHIFTS`` keys or "all") -> the distinct shifts in ``SHIFTS`` order."""
    unknown = sorted(set(names) - set(SHIFTS) - {"all"})
    if unknown:
        raise ValueError(f"unknown shift(s) {unknown}; expected some of {[*SHIFTS, 'all']}")
    chosen = set(SHIFTS) if "all" in names else set(names)
    return tuple(name for name in SHIFTS if name in chosen)


def shift_label(names: Sequence[str]) -> str | None:
    """The label recorded for a set of shifts: "all", the names joined by "-", or None for none."""
    names = shift_names(names)
    if not names:
        return None
    return "all" if len(names) == len(SHIFTS) else "-".join(names)


def shift_params(names: Sequence[str] = ()) -> SynthParams:
    """The ``SynthParams`` of the default distribution with the named shifts applied (see ``SHIFTS``)."""
    changes: dict = {}
    for name in shift_names(names):
        changes.update(SHIFTS[name])
    return replace(SynthParams(), **changes)


# Named scene styles (``depthpe synth --style NAME``): the SynthParams fields each one changes.
STYLES: dict[str, dict] = {
    "default": {},
    # geometry-only scenes: the depth / camera-path ratio is drawn on its own (log-uniform, 6x range),
    # the cameras look along one random direction (rotations say nothing of the content), surfaces
    # are flat-lit (no shading or shadow cue) and object sizes vary more
    "geometry": {"paths": ("rig",), "depth_ratio": (2.0, 12.0), "flat_shading": True,
                 "object_size": (0.04, 0.18)},
}


def style_params(style: str = "default", shifts: Sequence[str] = ()) -> SynthParams:
    """The ``SynthParams`` of scene style ``style`` (``STYLES``), with the named shifts applied to the
    default style (a shift changes fields the geometry style sets, so the two do not combine)."""
    if style not in STYLES:
        raise ValueError(f"unknown synth style {style!r}; expected one of {sorted(STYLES)}")
    if style != "default" and shift_names(shifts):
        raise ValueError(f"synth style {style!r} cannot be combined with --shift; use one or the other")
    return replace(shift_params(shifts), **STYLES[style])


DEFAULT_PARAMS = SynthParams()

# ``depthpe synth --rig NAME``: the path style of each rig (trajectories.py). stereo: evenly spaced
# along the cameras' x axis, one rotation and one K (rectified); line: along a random direction
# perpendicular to the shared viewing direction, random spacing; curve: the geometry style's path.
RIGS: dict[str, str] = {"stereo": "stereo", "line": "line", "curve": "rig"}
RIG_PATHS = frozenset(RIGS.values())
TEXTURES = ("mixed", "stripes", "checkers")


def knob_params(params: SynthParams, *, rig: str | None = None, depth_ratio: Sequence[float] | None = None,
                rotation_jitter: float | None = None, texture: str = "mixed",
                texture_period: Sequence[float] | None = None) -> SynthParams:
    """``params`` with the scene knobs of ``depthpe synth`` applied (None / "mixed": unchanged).

    rig: a name of ``RIGS`` (its path replaces ``params.paths``); depth_ratio: (lo, hi), 0 < lo <= hi;
    rotation_jitter: degrees >= 0, not on "stereo"; both need rig paths only (a rig, or the geometry
    style); texture: one of ``TEXTURES``; texture_period: (lo, hi) patches, 0 < lo <= hi, with
    stripes or checkers. Raises ValueError naming the option for a bad value or combination."""
    changes: dict = {}
    if rig is not None:
        if rig not in RIGS:
            raise ValueError(f"--rig must be one of {', '.join(RIGS)}, got {rig!r}")
        changes["paths"] = (RIGS[rig],)
    paths = set(changes.get("paths", params.paths))
    if (depth_ratio is not None or rotation_jitter is not None) and not paths <= RIG_PATHS:
        raise ValueError("--depth-ratio and --rotation-jitter set the cameras of a rig: add --rig "
                         f"{'|'.join(RIGS)} (or --style geometry)")
    if depth_ratio is not None:
        changes["depth_ratio"] = _range("--depth-ratio", depth_ratio)
    if rotation_jitter is not None:
        if not 0 <= rotation_jitter <= 45:
            raise ValueError(f"--rotation-jitter must be 0 to 45 degrees, got {rotation_jitter}")
        if rotation_jitter > 0 and "stereo" in paths:
            raise ValueError("--rig stereo has identical rotations (rectified); for jittered cameras on a "
                             "straight line use --rig line")
        changes["rotation_jitter_deg"] = float(rotation_jitter)
    if texture not in TEXTURES:
        raise ValueError(f"--texture must be one of {', '.join(TEXTURES)}, got {texture!r}")
    changes["texture"] = texture
    if texture_period is not None:
        if texture == "mixed":
            raise ValueError("--texture-period sets the period of --texture stripes or checkers; add one of them")
        changes["texture_period"] = _range("--texture-period", texture_period)
    return replace(params, **changes)


def scene_params(style: str = "default", shifts: Sequence[str] = (), **knobs) -> SynthParams:
    """The ``SynthParams`` of a ``depthpe synth`` run: ``style_params(style, shifts)`` with the scene
    knobs (``knob_params``: rig, depth_ratio, rotation_jitter, texture, texture_period) applied; a
    rig does not combine with a shift. Raises ValueError (one line naming the option)."""
    if knobs.get("rig") is not None and shift_names(shifts):
        raise ValueError("--rig cannot be combined with --shift; use one or the other")
    return knob_params(style_params(style, shifts), **knobs)


def _range(flag: str, values: Sequence[float]) -> tuple[float, float]:
    """(lo, hi) of a two-number option, 0 < lo <= hi; ValueError naming ``flag`` otherwise."""
    if len(values) != 2:
        raise ValueError(f"{flag} takes two numbers LO HI, got {list(values)}")
    lo, hi = float(values[0]), float(values[1])
    if not 0 < lo <= hi < float("inf"):
        raise ValueError(f"{flag} needs 0 < LO <= HI, got {lo:g} {hi:g}")
    return lo, hi


def params_json(params: SynthParams) -> str:
    """The ``synth_params`` attribute of a scene file: the fields of ``params`` as JSON, leaving out
    those added after the first files (``_ADDED_FIELDS``) while they hold their defaults, so that the
    files of a style or shift stay byte-identical to those written before the fields existed."""
    fields = asdict(params)
    for name in _ADDED_FIELDS:
        if fields[name] == asdict(DEFAULT_PARAMS)[name]:
            del fields[name]
    return json.dumps(fields)


def _log_uniform(rng: np.random.Generator, lo_hi: tuple[float, float]) -> float:
    return float(np.exp(rng.uniform(np.log(lo_hi[0]), np.log(lo_hi[1]))))


def scene_seed(seed: int, split: str, index: int) -> np.random.SeedSequence:
    """The SeedSequence of scene ``index`` of ``split`` for a dataset ``seed``.

    Built as ``SeedSequence(seed, spawn_key=(split_key, index))`` so that every (split, index)
    gets an independent stream: train and val scenes never coincide and a scene does not depend on
    how many scenes are generated.
    """
    if split not in SPLIT_KEYS:
        raise ValueError(f"unknown split {split!r}; expected one of {sorted(SPLIT_KEYS)}")
    if seed < 0 or index < 0:
        raise ValueError(f"seed and index must be non-negative, got seed={seed}, index={index}")
    return np.random.SeedSequence(int(seed), spawn_key=(SPLIT_KEYS[split], int(index)))
