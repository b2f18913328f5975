"""``depthpe demo --model MODEL``: serve the demo page (docs/predict.md#demo-depthpe-demo; needs ``pip install 'depthpe[demo]'``)."""

from __future__ import annotations

import argparse
import os

from ..config.options import add_options, config_from_args
from ..demo.config import DemoConfig
from ..config.command_line import USAGE_ERROR_STATUS, report_errors

DESCRIPTION = """\
Serve a web page where you upload images (and, optionally, their cameras: a COLMAP model, a
transforms.json or a depthpe cameras .json), pick the views per prediction, the confidence threshold
and the multi-view consistency filter, and get the depth maps, a 3D view of the fused points with the
cameras and a zip of the prediction folder with its COLMAP and nerfstudio exports. Built on Gradio
(pip install 'depthpe[demo]'); no share link, no analytics. Prints the address; Ctrl-C stops it."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, DemoConfig)
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")


def run(args: argparse.Namespace) -> int:
    with report_errors(args.debug):
        from ..config import ConfigError

        cfg = config_from_args(DemoConfig, args)
        os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported
        try:
            from gradio import Blocks  # noqa: F401 (a bare "import gradio" also finds a stray gradio/ folder)
        except ImportError:
            raise ConfigError("depthpe demo needs Gradio: pip install 'depthpe[demo]'") from None
        import torch

        from ..demo.app import build_app, launch
        from ..demo.uploads import UploadLimits

        device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
        blocks = build_app(cfg.model, device=device, revision=cfg.revision,
                           limits=UploadLimits(cfg.max_images, cfg.max_mb))
        print(f"serving the depthpe demo of {cfg.model}: open http://{cfg.host}:{cfg.port} in a browser "
              "(Ctrl-C stops it)", flush=True)
        launch(blocks, cfg.host, cfg.port, block=True, max_mb=cfg.max_mb)
        return 0
    return USAGE_ERROR_STATUS
