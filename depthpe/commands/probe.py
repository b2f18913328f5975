"""``depthpe probe attention --model M --data D --out DIR``: does the global attention find the
true cross-view correspondences? (docs/probe.md)"""

from __future__ import annotations

import argparse

from ..config.options import add_options, config_from_args
from ..probe.config import ProbeConfig
from ..config.command_line import USAGE_ERROR_STATUS, report_errors

DESCRIPTION = """\
Diagnostics of a trained model's global attention. `attention`: for every global-attention layer
and head, how much attention a query patch puts on the key patches of other views that lie within r
patches of the true reprojection of its 3D point (from GT depth and cameras; occluded points are
left out), against uniform attention: the correspondence lift (1 = uniform). For URoPE also the
lift per head group against the depth of the matched point. Writes lift.csv, summary.json,
summary.md and figures to --out. How to read it: docs/probe.md."""

ATTENTION = """\
Correspondence lift of the global attention of --model on the held-out scenes of every dataset under
--data (ROOT/<dataset>/<split>/index.json), views chosen as in `depthpe eval` (--manifest of an
earlier run: the very same views). Settings can also come from --config FILE and key=value."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="probe", metavar="PROBE", required=True)
    attention = sub.add_parser("attention", help="correspondence lift per global layer and head",
                               description=ATTENTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(attention, ProbeConfig)
    attention.add_argument("--debug", action="store_true", help="show the full traceback of an error")


def run(args: argparse.Namespace) -> int:
    with report_errors(getattr(args, "debug", False)):
        cfg = config_from_args(ProbeConfig, args)
        from ..probe.runner import run_probe

        run_probe(cfg)
        return 0
    return USAGE_ERROR_STATUS
