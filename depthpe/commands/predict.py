"""``depthpe predict --model ID_OR_DIR --images DIR_OR_GLOB [--cameras SOURCE] --out DIR``: depth for
your own images (docs/predict.md)."""

from __future__ import annotations

import argparse

from ..config.inference import PredictConfig
from ..config.options import add_options, config_from_args
from ..files.output_folder import owned_output_folder, settings_fingerprint
from ..config.command_line import USAGE_ERROR_STATUS, report_errors, require_output_folder

DESCRIPTION = """\
Predict depth for a folder (or glob) of images of any size. Images are cropped around their principal
point to the aspect the model was trained at and resized to its trained width (training_inputs.json);
K follows exactly. Cameras (--cameras): a COLMAP reconstruction (sparse/0, .bin or .txt), a JSON file
{"frames": [{"file", "K", "w2c"}]} or a depthpe scene file, matched to the images by name; without
cameras only the encodings rope and none run, and depth is then relative (the model's unit).
Up to --max-views images are predicted together; with more, each image is predicted with its nearest
cameras. Writes per image <stem>_depth.png (16-bit, scale in <stem>_depth.json), <stem>_depth.npy,
<stem>_conf.npy and <stem>_depth_color.png, plus points.ply and prediction.json. --fusion-views N keeps
in points.ply only the pixels whose depth N other views agree with (multi-view consistency); --export
colmap / nerfstudio also writes the prediction as a COLMAP model or a nerfstudio dataset. Settings can also
come from --config FILE (YAML, keys as the options with underscores) and key=value overrides.
Formats: docs/predict.md."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, PredictConfig)
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
    lines += [f"wrote the {kind} export: {folder}" for kind, folder in summary.get("exports", {}).items()]
    return "\n".join(lines)


def output_settings(cfg) -> "OutputSettings":
    """The ``OutputSettings`` of a ``PredictConfig`` (fusion on when ``fusion_views`` > 0)."""
    from ..prediction.exports import OutputSettings
    from ..prediction.result import FusionSettings

    fusion = FusionSettings(cfg.fusion_views, cfg.fusion_rel, cfg.fusion_pixels) if cfg.fusion_views > 0 else None
    return OutputSettings(cfg.conf_threshold, fusion, cfg.filtered_depth, tuple(cfg.export or ()), cfg.colmap_format,
                          cfg.nerfstudio_depth_unit)


def run(args: argparse.Namespace) -> int:
    with report_errors(args.debug):
        cfg = config_from_args(PredictConfig, args)
        require_output_folder(cfg.out, "--out")
        with owned_output_folder(cfg.out, "depthpe predict", settings_fingerprint(cfg), replace=cfg.overwrite):
            return _predict(cfg)
    return USAGE_ERROR_STATUS


def _predict(cfg: PredictConfig) -> int:
    """Predict and write the files of ``depthpe predict`` into the owned ``cfg.out``."""
    import torch

    from ..prediction.api import list_images, predict
    from ..prediction.exports import check_exports, write_outputs

    check_exports(cfg.export, cfg.cameras is not None, len(list_images(cfg.images)))
    device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
    result = predict(cfg.model, cfg.images, cfg.cameras, max_views=cfg.max_views, device=device,
                     dtype=cfg.dtype, image_width=cfg.image_width, revision=cfg.revision, progress=True)
    summary = write_outputs(result, cfg.out, output_settings(cfg))
    print(_describe(result, summary, cfg.out), flush=True)
    return 0
