"""``ViewScene``s from what depthpe writes or computes: a ``depthpe predict`` output folder, or a
held-out scene predicted as in the evaluation (``depthpe.evaluation.scene``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .scene import ViewFrame, ViewScene

__all__ = ["load_prediction_dir", "scene_from_prediction", "is_eval_dir"]


def _read_rgb(path: Path, shape: tuple[int, int]) -> np.ndarray:
    """(H, W, 3) uint8 RGB of a PNG, or mid grey of ``shape`` when the file is missing (predict
    outputs written before ``<stem>_image.png`` existed)."""
    import cv2

    image = cv2.imread(str(path), cv2.IMREAD_COLOR) if path.is_file() else None
    if image is None:
        return np.full((*shape, 3), 128, np.uint8)
    return np.ascontiguousarray(image[..., ::-1])


def load_prediction_dir(folder: str | Path) -> ViewScene:
    """The ``ViewScene`` of a ``depthpe predict`` output folder: per image its depth, confidence,
    input image (``<stem>_image.png``), K and w2c from prediction.json. Raises ValueError when the
    folder is not a predict output or a file is missing."""
    from ..files import safe_component
    from ..prediction.files import file_stem

    folder = Path(folder)
    meta_path = folder / "prediction.json"
    if not meta_path.is_file():
        raise ValueError(f"{folder}: no prediction.json (not a `depthpe predict` output folder; "
                         "make one with `depthpe predict --model M --images DIR --out FOLDER`)")
    meta = json.loads(meta_path.read_text())
    frames = []
    for entry in meta["frames"]:
        stem = safe_component(entry["stem"]) if "stem" in entry else file_stem(entry["name"])
        try:
            depth = np.load(folder / f"{stem}_depth.npy")
            conf = np.load(folder / f"{stem}_conf.npy")
        except FileNotFoundError as err:
            raise ValueError(f"{folder}: {Path(err.filename).name} is missing (listed in prediction.json)") from None
        frames.append(ViewFrame(name=entry["name"], image=_read_rgb(folder / f"{stem}_image.png", depth.shape),
                                K=np.asarray(entry["K"], np.float64), w2c=np.asarray(entry["w2c"], np.float64),
                                depth=depth, conf=conf))
    unit = "the cameras' unit" if meta.get("unit") == "cameras" else "relative (no cameras)"
    return ViewScene(title=f"{folder.name}: {len(frames)} image(s)", frames=frames, unit=unit)


def scene_from_prediction(predicted, metrics: dict, scales: dict) -> ViewScene:
    """The ``ViewScene`` of a ``depthpe.evaluation.scene.PredictedScene`` with its metrics and alignment scales."""
    frames = [ViewFrame(name=f"frame {f}", image=predicted.images[i], K=predicted.K[i], w2c=predicted.w2c[i],
                        depth=predicted.depth[i], gt=predicted.gt[i],
                        conf=None if predicted.conf is None else predicted.conf[i])
              for i, f in enumerate(predicted.frames)]
    return ViewScene(title=f"{predicted.dataset}/{predicted.scene}: {len(frames)} views", frames=frames,
                     unit="normalized scene unit", scales=scales, metrics=metrics,
                     name=f"{predicted.dataset}_{predicted.scene}")


def is_eval_dir(folder: str | Path) -> bool:
    """Whether ``folder`` is a ``depthpe eval`` output (summary.json, no prediction.json)."""
    return (Path(folder) / "summary.json").is_file() and not (Path(folder) / "prediction.json").is_file()
