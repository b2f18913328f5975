"""Converting one scene (``convert_scene``): keep a finished file of an earlier run, else open the
scene, load and prepare every kept frame and write the scene file; never raises for a bad scene."""

from __future__ import annotations

import importlib
import json
import os
import time
from collections import Counter
from pathlib import Path

import cv2
import numpy as np

from ...files import safe_component
from ..format.scene_file import finished_entry, write_scene
from .contract import FrameDropped, SceneRef, SceneSkipped
from .frames import _prepare_frame
from .options import ConvertOptions

__all__ = ["convert_scene"]


def _existing_entry(path: Path, settings: str, min_frames: int) -> dict | None:
    """Index entry of a finished scene file written with the same settings (and at least
    ``min_frames`` frames), else None: ``scene_file.finished_entry``."""
    return finished_entry(path, lambda attrs: attrs.get("convert_settings") == settings
                          and attrs["num_frames"] >= min_frames)



def convert_scene(
    module_name: str, ref: SceneRef, split: str, split_dir: str | os.PathLike, options: ConvertOptions
) -> dict:
    """Convert one scene to ``split_dir/<scene_id>.h5``; never raises for a bad scene.

    Returns a result dict: scene_id, split, status ("written", "existing" = finished by an earlier
    run with the same settings, or "skipped"), entry (index entry or None), frames (written or
    existing), dropped ({reason: frames}), reason (why a scene was skipped), seconds.
    """
    t0 = time.perf_counter()
    cv2.setNumThreads(1)
    module = importlib.import_module(module_name)
    path = Path(split_dir) / f"{safe_component(ref.scene_id)}.h5"
    settings = json.dumps(options.content_settings(), sort_keys=True)
    result = _skipped_result(ref.scene_id, split)
    entry = _existing_entry(path, settings, options.min_frames)
    if entry is not None:
        result.update(status="existing", entry=entry, frames=entry["num_frames"])
        result["seconds"] = time.perf_counter() - t0
        return result
    dropped: Counter = Counter()
    orientations: list[int] = []
    try:
        source = module.open_scene(ref, options)
        dropped.update(source.dropped)
        images, depths, Ks, w2cs, names = _load_frames(source, options, dropped, orientations)
        if len(images) < options.min_frames:
            result["reason"] = f"only {len(images)} usable frame(s) (minimum {options.min_frames})"
            result["kind"] = "too few usable frames"
            if path.exists():  # a stale file of an earlier run would no longer be listed
                path.unlink()
        else:
            metric, depth_units = source.units or _units(module, options)
            entry = write_scene(
                path,
                images=images,
                depth=np.stack(depths),
                K=np.stack(Ks),
                w2c=np.stack(w2cs),
                dataset=module.NAME,
                scene_id=ref.scene_id,
                split=split,
                metric=metric,
                depth_units=depth_units,
                source=module.SOURCE,
                frame_names=names,
                jpeg_quality=options.jpeg_quality,
                depth_dtype=options.depth_dtype,
                depth_compression=options.depth_compression,
                extra_attrs={"convert_settings": settings, "frames_dropped": json.dumps(dict(dropped))},
            )
            result.update(status="written", entry=entry, frames=len(images))
    except SceneSkipped as err:
        result["reason"] = result["kind"] = str(err)
    except Exception as err:  # noqa: BLE001 - one bad scene must never stop a conversion
        result["reason"] = f"error: {type(err).__name__}: {err}"
        result["kind"] = f"error: {type(err).__name__}"
    result["dropped"] = dict(dropped)
    result["exif_orientation_ignored"] = sum(o != 1 for o in orientations)
    result["seconds"] = time.perf_counter() - t0
    return result


def _units(module, options: ConvertOptions) -> tuple[bool, str]:
    """(metric, depth_units) of the scenes a converter writes: ``module.units(options)`` where the
    converter defines it (own captures: the user says), else ``module.METRIC``, ``module.DEPTH_UNITS``."""
    if hasattr(module, "units"):
        return module.units(options)
    return module.METRIC, module.DEPTH_UNITS


def _skipped_result(scene_id: str, split: str, reason: str = "", kind: str = "") -> dict:
    """A ``convert_scene`` result for a scene that is not (or not yet) converted."""
    return {"scene_id": scene_id, "split": split, "status": "skipped", "entry": None, "frames": 0,
            "dropped": {}, "exif_orientation_ignored": 0, "reason": reason, "kind": kind, "seconds": 0.0}


def _load_frames(source, options: ConvertOptions, dropped: Counter,
                 orientations: list) -> tuple[list, list, list, list, list]:
    """Load and prepare every ``options.frame_stride``-th frame of an opened scene ->
    ``(images, depths, Ks, w2cs, names)`` of the kept frames; dropped frames are counted in
    ``dropped`` by reason, the EXIF orientation tag of every frame read is appended to
    ``orientations``. The first kept frame fixes the size of the others."""
    images, depths, Ks, w2cs, names = [], [], [], [], []
    target = None
    for key in list(source.frames)[:: options.frame_stride]:
        try:
            raw = source.load(key)
            orientations.append(raw.exif_orientation)
            image, depth, K, w2c = _prepare_frame(raw, target, options)
        except FrameDropped as drop:
            dropped[drop.reason] += 1
            continue
        target = depth.shape
        images.append(image)
        depths.append(depth)
        Ks.append(K)
        w2cs.append(w2c)
        names.append(raw.name)
    return images, depths, Ks, w2cs, names
