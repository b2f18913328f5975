"""``depthpe view PRED_DIR`` / ``depthpe view --model M --data ROOT --scene NAME``: a 3D viewer in the browser."""

from __future__ import annotations

import argparse

from ..config.options import add_options, config_from_args
from ..view.config import ViewConfig
from ..config.command_line import USAGE_ERROR_STATUS, report_errors

DESCRIPTION = """\
Serve a 3D view of a prediction or a held-out scene at http://HOST:PORT (printed; open it in a
browser, through an SSH tunnel on a server: nothing is opened by itself). A `depthpe predict`
folder shows its fused points coloured by the images, every camera as a frustum with its image, a
confidence threshold, per-view toggles, the point size and a button that saves the filtered cloud
as PLY. --model M --data ROOT [--scene NAME], or an evaluation folder with --scene, predicts that
scene as `depthpe eval` does and adds the ground truth (side by side or overlaid), colours by
depth or per-pixel error, the alignment row (native, scene_aligned) and the scene's metrics.
At most --max-points points are drawn (a uniform subsample; the panel says how many). Needs the
view extra: pip install "depthpe[view]". Docs: docs/predict.md."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, ViewConfig)
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")


def run(args: argparse.Namespace) -> int:
    with report_errors(args.debug):
        cfg = config_from_args(ViewConfig, args)
        from ..view.serve import serve

        return serve(cfg)
    return USAGE_ERROR_STATUS
