"""``depthpe view``: the scene of a ``ViewConfig``, served until Ctrl-C."""

from __future__ import annotations

import time
from pathlib import Path

from ..config import ConfigError
from ..files import safe_component
from .config import ViewConfig
from .loaders import is_eval_dir, load_prediction_dir, scene_from_prediction
from .scene import ViewScene

__all__ = ["scene_for", "serve"]

VIEW_EXTRA = 'the viewer needs viser: pip install "depthpe[view]"'


def _eval_scene(cfg: ViewConfig) -> ViewScene:
    """A held-out scene predicted as in the evaluation (cfg.model + cfg.data, or an eval folder)."""
    import torch

    from ..evaluation.scene import EvalSceneSpec, predict_eval_scene, scene_metrics, spec_from_eval_dir

    given = {"model": cfg.model, "split": cfg.split, "views": cfg.views, "seed": cfg.seed,
             "image_width": cfg.image_width, "revision": cfg.revision, "dtype": cfg.dtype,
             "min_valid_fraction": cfg.min_valid_fraction}
    if cfg.source is not None:
        spec = spec_from_eval_dir(cfg.source, cfg.scene, **given)
    else:
        spec = EvalSceneSpec(data=cfg.data, scene=cfg.scene, **{k: v for k, v in given.items() if v is not None})
    device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
    predicted = predict_eval_scene(spec, device=device)
    metrics, scales = scene_metrics(predicted)
    return scene_from_prediction(predicted, metrics, scales)


def scene_for(cfg: ViewConfig) -> tuple[ViewScene, Path]:
    """(the scene to show, where 'save PLY' writes: ``--save``, else ``points_filtered.ply`` in a
    predict folder, else ``view_<dataset>_<scene>.ply`` here as one ``safe_component``, so that a
    scene id such as ``a:b/../../x`` neither leaves the folder nor shares a file with another).
    Raises ConfigError (one line) for a folder that is neither a predict nor an eval output, a
    missing file or an unknown scene."""
    try:
        if cfg.source is not None and not Path(cfg.source).is_dir():
            raise ValueError(f"{cfg.source}: no such folder")
        if cfg.source is not None and not is_eval_dir(cfg.source):
            scene = load_prediction_dir(cfg.source)
            return scene, Path(cfg.save or Path(cfg.source) / "points_filtered.ply")
        scene = _eval_scene(cfg)
    except (ValueError, FileNotFoundError) as err:
        raise ConfigError(str(err)) from None
    return scene, Path(cfg.save or safe_component(f"view_{scene.name}") + ".ply")


def serve(cfg: ViewConfig) -> int:
    """Load, serve at cfg.host:cfg.port, print the URL, wait for Ctrl-C; returns 0."""
    try:
        import viser  # noqa: F401
    except ImportError:
        raise ConfigError(VIEW_EXTRA) from None
    from .app import Viewer

    scene, save_path = scene_for(cfg)
    try:
        viewer = Viewer(scene, host=cfg.host, port=cfg.port, max_points=cfg.max_points,
                        conf_threshold=cfg.conf_threshold, save_path=save_path)
    except OSError as err:
        raise ConfigError(f"cannot serve on {cfg.host}:{cfg.port} ({err.strerror or err}); pick another --port")
    print(f"depthpe view: {scene.title}; {viewer.last.shown} of {viewer.last.total} points drawn", flush=True)
    print(f"open {viewer.url} in a browser (Ctrl-C stops)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        viewer.stop()
    return 0
