"""The demo's test inputs: a tiny randomly initialised model saved to a folder, four synthetic views as
PNG uploads with their cameras (JSON and a COLMAP text model), and the page served in this process."""

from __future__ import annotations

from pathlib import Path

import cv2
import torch

from depthpe.scenes.cameras import FrameCamera, write_colmap_text, write_json_cameras
from depthpe.scenes.synth import generate_scene
from depthpe.model.training_inputs import TrainingInputs, write_training_inputs
from tests.helpers.training import micro_model

H, W, VIEWS = 96, 160, 4


def write_demo_inputs(root: Path) -> dict:
    """root/model (prope micro model, trained size 126 wide), root/up/v{i}.png, root/cams.json,
    root/colmap/{cameras,images,points3D}.txt; returns their paths."""
    torch.manual_seed(0)
    model = micro_model("prope")
    model.save_pretrained(root / "model")
    write_training_inputs(root / "model", TrainingInputs(126, (0.5, 1.0), (2, 4)))
    scene = generate_scene(11, views=VIEWS, height=H, width=W)
    (root / "up").mkdir()
    cams = {}
    for i in range(VIEWS):
        cv2.imwrite(str(root / "up" / f"v{i}.png"), cv2.cvtColor(scene["images"][i], cv2.COLOR_RGB2BGR))
        cams[f"v{i}.png"] = FrameCamera(f"v{i}.png", scene["K"][i], scene["w2c"][i], W, H)
    write_json_cameras(root / "cams.json", cams)
    write_colmap_text(root / "colmap", cams)
    return {"model": root / "model", "images": sorted((root / "up").glob("*.png")), "cams": root / "cams.json",
            "colmap": sorted((root / "colmap").iterdir())}


def serve_demo(model_dir: Path, folder: Path):
    """(blocks, url): the Hugging Face Space ``app.py`` that ``depthpe push --demo-app`` writes, written
    into ``folder`` for the model ``model_dir`` (a local folder stands in for a Hub id), run as a
    module (``demo`` is its page) and served on a free local port (not blocking)."""
    import runpy

    from depthpe.demo.app import launch
    from depthpe.demo.space import write_space_app
    from tests.helpers.browser import free_port

    app = runpy.run_path(str(write_space_app(folder, str(model_dir))))  # not __main__: builds, does not launch
    _, url, _ = launch(app["demo"], "127.0.0.1", free_port(), block=False)
    return app["demo"], url
