"""``depthpe predict --model ID_OR_DIR --images DIR_OR_GLOB [--cameras SOURCE] --out DIR``: depth for
your own images (docs/predict.md)."""

from __future__ import annotations

import argparse

from .errors import USAGE_ERROR_STATUS, report_errors

HELP = "predict depth for your own images (any size; cameras from COLMAP, a JSON file or a scene file)"
DESCRIPTION = """\
Predict depth for a folder (or glob) of images of any size. Images are cropped around their principal
point to the aspect the model was trained at and resized to its trained width (training_inputs.json);
K follows exactly. Cameras (--cameras): a COLMAP reconstruction (sparse/0, .bin or .txt), a JSON file
{"frames": [{"file", "K", "w2c"}]} or a depthpe scene file, matched to the images by name; without
cameras only the encodings rope and none run, and depth is then relative (the model's unit).
Up to --max-views images are predicted together; with more, each image is predicted with its nearest
cameras. Writes per image <stem>_depth.png (16-bit, scale in <stem>_depth.json), <stem>_depth.npy,
<stem>_conf.npy and <stem>_depth_color.png, plus points.ply and prediction.json. Formats: docs/predict.md."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="exported model folder (e.g. runs/NAME/final) or Hub repo id")
    parser.add_argument("--images", required=True, help="folder of images (searched recursively), a glob, or one file")
    parser.add_argument("--cameras", default=None,
                        help="COLMAP folder (sparse/0, .bin or .txt), cameras .json or scene .h5 (default: none)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    parser.add_argument("--dtype", choices=("bf16", "fp32"), default="fp32",
                        help="bf16 autocast or fp32 (default fp32)")
    parser.add_argument("--max-views", type=int, default=None,
                        help="views per prediction (default: the most the model was trained with, else 8)")
    parser.add_argument("--image-width", type=int, default=None,
                        help="input width, a multiple of 14 (default: the model's training width, else 518)")
    parser.add_argument("--conf-threshold", type=float, default=None,
                        help="leave out of points.ply the pixels whose confidence is below this (default: keep all)")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")


def _describe(result, summary: dict, out) -> str:
    """What was done, in a few lines."""
    n = len(result.frames)
    h, w = result.size
    how = (f"all {n} images in one prediction" if result.mode == "all"
           else f"{n} predictions of {result.views_per_prediction} views (each image with its nearest cameras)")
    unit = "the cameras' unit" if result.unit == "cameras" else "the model's normalized unit (relative depth)"
    lines = [f"predicted {n} image(s) at {w}x{h} (WxH): {how}; depth in {unit}",
             *result.notes,
             f"wrote {out}: per-image depth PNG/NPY, confidence, colour maps; "
             f"points.ply with {summary['points']} points; prediction.json"]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    with report_errors(args.debug):
        import torch

        from ..config import ConfigError
        from ..io.prediction_files import write_prediction
        from ..prediction import predict

        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if args.conf_threshold is not None and args.conf_threshold < 0:
            raise ConfigError(f"--conf-threshold must be >= 0, got {args.conf_threshold} (confidence is > 1)")
        result = predict(args.model, args.images, args.cameras, max_views=args.max_views, device=device,
                         dtype=args.dtype, image_width=args.image_width, progress=True)
        summary = write_prediction(result, args.out, args.conf_threshold)
        print(_describe(result, summary, args.out), flush=True)
        return 0
    return USAGE_ERROR_STATUS
