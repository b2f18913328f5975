"""``depthpe eval --model DIR_OR_ID --data ROOT --out DIR``: depth metrics on held-out scenes."""

from __future__ import annotations

import argparse

from .errors import USAGE_ERROR_STATUS, report_errors

HELP = "evaluate a model on held-out scenes (`accelerate launch -m depthpe.eval` splits scenes over processes)"
DESCRIPTION = """\
Evaluate a depthpe model on the held-out scenes of every dataset under --data (ROOT/<dataset>/<split>/
index.json) and print the table (rows native, scene_aligned, image_aligned and the baselines
global_constant and scene_constant). Writes summary.json, metrics_per_image.csv, manifest.json,
summary.md and panels/ to --out. The input width defaults to the width the model was trained at
(training_inputs.json next to the exported model); pass --manifest of an earlier run to evaluate
the very same views. A scene with fewer frames than --views is evaluated with all its frames (a
warning; the count per scene is in summary.json and metrics_per_image.csv). No dataset, an empty
split or dataset, or no scene that could be evaluated is an error (one line, exit status 2).
The protocol: docs/evaluation.md."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="exported model folder (e.g. runs/NAME/final) or Hub repo id")
    parser.add_argument("--revision", default=None, help="Hub revision (branch, tag or commit) of --model")
    parser.add_argument("--data", required=True, help="data root holding <dataset>/<split>/index.json")
    parser.add_argument("--split", default="val", help="split to evaluate (default: val)")
    parser.add_argument("--datasets", nargs="*", default=None, help="dataset names (default: all with that split)")
    parser.add_argument("--views", type=int, default=8, help="views per scene (default 8)")
    parser.add_argument("--scenes", type=int, default=None, help="evaluate the first K scenes of each dataset (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the view subsets (default 0)")
    parser.add_argument("--image-width", type=int, default=None,
                        help="input width in pixels, a multiple of 14 (default: the model's training width, else 518)")
    parser.add_argument("--manifest", default=None, help="manifest.json of an earlier run: evaluate the same views")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--panels", type=int, default=4, help="scenes rendered as PNG panels (default 4)")
    parser.add_argument("--num-workers", type=int, default=2, help="data loader workers (default 2)")
    parser.add_argument("--cpu", action="store_true", help="run on CPU even if a GPU is available")
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32",
                        help="fp32 (default) or bf16: run the model under torch.autocast with bfloat16 "
                             "(CPU or GPU); metrics are computed in float32")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")


def run(args: argparse.Namespace) -> int:
    with report_errors(args.debug):
        from ..evaluation import run_evaluation

        run_evaluation(args)
        return 0
    return USAGE_ERROR_STATUS
