"""``depthpe bench memory --encodings``: one prediction per global encoding against rope, as a table
of peaks and ratios (with ``--fit views``, the largest S per GPU size for each)."""

from __future__ import annotations

import argparse
import json

import torch

from .memory_report import largest, progress_lines
from .methods import method_overrides
from .memory_step import CAPACITIES_GB, Setting, predict, setting_from_args, table_unit


def compare_encodings(args, progress) -> dict[str, dict]:
    """{encoding as given: {"setting", "result", "largest"}} for rope and every one of ``args.encodings``
    (a preset, ``PRESET,option=value,...`` or ``qk=A,vo=B[,option=value]``: ``methods.parse_method``):
    the run config with ``model.global_pe`` and that entry's ``pe_options`` overridden, the other sizes
    resolved once (with rope); ``largest`` (with ``--fit views``) maps GPU GB to the largest S that fits."""
    from ..run import load_run_config

    base = _checked(setting_from_args, args, _with_encoding(args, "rope"))
    configs = {pe: _checked(load_run_config, args, args.config, _with_encoding(args, pe).overrides)
               for pe in dict.fromkeys(["rope", *args.encodings])}  # every entry checked before a prediction
    out = {}
    for pe, cfg in configs.items():
        progress(f"encoding {pe}")
        setting = Setting(cfg, base.views, base.batch, base.height, base.width, base.precision,
                          base.checkpointing, base.target, base.ddp)
        result = predict(setting)
        largest_s = largest(setting, "views", None, {setting.views: result}) if args.fit == "views" else None
        out[pe] = {"setting": setting, "result": result, "largest": largest_s}
    return out


def _with_encoding(args, pe: str):
    """A copy of ``args`` whose config overrides end with those selecting ``pe`` (``method_overrides``);
    an entry that is no encoding is a one-line ``SystemExit``."""
    try:
        chosen = method_overrides(pe)
    except ValueError as err:
        raise SystemExit(f"--encodings {pe!r}: {err}") from None
    return argparse.Namespace(**{**vars(args), "overrides": [*args.overrides, *chosen]})


def _checked(load, args, *load_args):
    """``load(*load_args)``; a config error becomes a one-line ``SystemExit``, which adds, where the
    overrides set ``model.pe_options``, that those reach every compared encoding, rope included."""
    try:
        return load(*load_args)
    except ValueError as err:
        shared = any(o.startswith("model.pe_options") for o in args.overrides)
        hint = (" (model.pe_options overrides reach every compared encoding, rope included: give an encoding "
                "its own options after a comma, e.g. --encodings urope,num_anchors=2)") if shared else ""
        raise SystemExit(f"{err}{hint}") from None


def format_comparison(compared: dict[str, dict]) -> str:
    """Markdown table of ``compare_encodings``: the whole step's peak and the activation part
    (peak minus parameters, gradients-free state, AdamW state and batch) per encoding, each with its
    ratio to rope, and the largest S per GPU size when searched."""
    first = next(iter(compared.values()))["setting"].describe()
    rope = compared["rope"]["result"]
    unit, name = table_unit(rope["peak"])
    lines = [f"training-step peak memory per encoding ({first['target']}): B={first['batch']} x S={first['views']} "
             f"views of {first['height']}x{first['width']} px, {first['precision']}, checkpointing "
             f"{'on' if first['checkpointing'] else 'off'}"]
    has_fit = any(c["largest"] for c in compared.values())
    head = f"| global_pe | peak {name} | x rope | activations {name} | x rope |"
    lines += [head + (" largest S (" + ", ".join(f"{c} GB" for c in CAPACITIES_GB) + ") |" if has_fit else ""),
              "|---" * (5 + has_fit) + "|"]
    for pe, c in compared.items():
        r = c["result"]
        row = (f"| {pe} | {r['peak'] / unit:.3f} | {r['peak'] / rope['peak']:.3f} | {r['extra'] / unit:.3f} | "
               f"{r['extra'] / rope['extra']:.3f} |")
        if has_fit:
            row += " " + ", ".join(str(n) for n in c["largest"].values()) + " |"
        lines.append(row)
    return "\n".join(lines)


def run_comparison(args) -> int:
    """``--encodings``: predict every encoding, print ``format_comparison``; exit status."""
    if args.measure or (args.fit and args.fit != "views"):
        raise SystemExit("--encodings compares predictions: it takes --fit views but not --measure or --fit batch")
    progress = progress_lines(args.quiet)
    compared = compare_encodings(args, progress)
    print(format_comparison(compared))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": args.config, "overrides": list(args.overrides), "torch": torch.__version__,
                       "encodings": {pe: {"setting": c["setting"].describe(), "predicted_bytes": c["result"],
                                          "largest_views": c["largest"]} for pe, c in compared.items()}}, f, indent=1)
    return 0
