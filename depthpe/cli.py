"""The ``depthpe`` command line.

Each sub-command lives in its own module under ``depthpe.commands`` (``depthpe.bench`` for
``depthpe bench NAME``) exposing ``add_arguments(parser)``, ``run(args) -> int`` and optionally
``DESCRIPTION``; its one-line help is in ``COMMANDS`` here. Modules are imported only when their
command is parsed (``depthpe.commands.subcommands``), so ``depthpe --help`` and
``depthpe COMMAND --help`` import no torch and a missing optional dependency only affects its own
command.
"""

from __future__ import annotations

import argparse
import sys

from .commands.subcommands import add_lazy_subcommands, configure_parser

# name -> (module, one-line help); a module is imported only when its command runs (``depthpe --help``
# imports none: tests/commands/test_cli_imports.py).
COMMANDS = {
    "train": ("depthpe.commands.train",
              "train a model from a run config (one process; `accelerate launch -m depthpe.train` for several)"),
    "eval": ("depthpe.commands.eval",
             "evaluate a model on held-out scenes (`accelerate launch -m depthpe.eval` splits scenes over processes)"),
    "predict": ("depthpe.commands.predict",
                "predict depth for your own images (any size; cameras from COLMAP, a JSON file or a scene file)"),
    "synth": ("depthpe.commands.synth", "generate procedural MegaSynth-like scenes (DIR/synth/{train,val})"),
    "check": ("depthpe.commands.check",
              "validate scene files (schema, values, cameras) and their multi-view consistency"),
    "convert": ("depthpe.commands.convert", "convert a raw dataset download (co3d, wildrgbd, arkitscenes, "
                "megasynth), MapAnything's WAI scenes (wai) or your own captures (folder: cameras.json or "
                "nerfstudio transforms.json; colmap) to scene files"),
    "index": ("depthpe.commands.index", "rebuild index.json from the scene files of each folder under ROOT"),
    "bench": ("depthpe.commands.bench", "run a benchmark of speed, memory or scale (synth, convert, attention, ...) "
              "and print a table"),
    "study": ("depthpe.commands.study", "run a study (correspondence, camera-noise, cameras-only, lift-table): an "
              "experiment on the encodings that writes tables and figures"),
    "push": ("depthpe.commands.push", "push an exported model or a run's final model to the Hugging Face Hub"),
    "compare": ("depthpe.commands.compare", "compare evaluations of several runs: groups of seeds, mean ± std, "
                "baseline ratios, paired bootstrap intervals"),
    "view": ("depthpe.commands.view", "3D viewer in the browser of a prediction or a held-out scene, with "
             "cameras, confidence filter and ground truth (needs the view extra)"),
    "demo": ("depthpe.commands.demo", "a web page (Gradio) that predicts depth for uploaded images and cameras: "
             "depth maps, 3D points, a zip with the exports (needs the demo extra)"),
    "plot": ("depthpe.commands.plot",
             "plot the validation curves of runs (val_history.jsonl): one figure per dataset, PNG and SVG"),
    "probe": ("depthpe.commands.probe", "diagnostics of a model's global attention: `probe attention` measures "
              "how much it attends to the true cross-view correspondences"),
    "rmvd": ("depthpe.commands.rmvd", "score depth maps on the Robust Multi-View Depth benchmark's sample lists "
             "(AbsRel, inliers, per dataset and their mean)"),
}


def build_parser() -> argparse.ArgumentParser:
    """The ``depthpe`` parser; a command's module is imported when argparse reaches its name."""
    parser = argparse.ArgumentParser(
        prog="depthpe",
        description="Multi-view depth with camera positional encodings: train and evaluate models, make and "
                    "check data, push to the Hub, benchmark. `depthpe COMMAND --help` for each; docs/index.md "
                    "for the documentation.",
    )
    add_lazy_subcommands(parser, COMMANDS, dest="command", run_key="_run", metavar="COMMAND")
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse ``argv``; ``key=value`` overrides may stand anywhere, also after options such as
    ``--resume latest`` (argparse alone takes positionals in one run only)."""
    args, extra = parser.parse_known_args(argv)
    if extra and hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
        args.overrides = [*args.overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


INTERRUPTED_STATUS = 130  # 128 + SIGINT, what a shell reports for Ctrl-C


def main(argv: list[str] | None = None) -> int:
    """``depthpe COMMAND ...``; returns the exit status (130 after Ctrl-C, said in one line: no traceback)."""
    args = parse(build_parser(), argv)
    return _interruptible(args)


def _interruptible(args) -> int:
    """Run the parsed command; Ctrl-C (``KeyboardInterrupt``) ends it with one line on stderr and the
    shell's status 130 instead of a traceback (the commands' outputs are written atomically, and
    those that resume say so when rerun)."""
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted (Ctrl-C); files already written are complete, and an interrupted eval, rmvd --model, "
              "convert or synth resumes when run again", file=sys.stderr, flush=True)
        return INTERRUPTED_STATUS


def run_command(name: str, argv: list[str] | None = None) -> int:
    """Run one command with its own parser (``python -m depthpe.train`` = ``depthpe train``)."""
    module_name, help_text = COMMANDS[name]
    parser = argparse.ArgumentParser(prog=f"depthpe {name}", formatter_class=argparse.RawDescriptionHelpFormatter)
    configure_parser(parser, module_name, help_text, "_run")
    args = parse(parser, argv)
    return _interruptible(args)


if __name__ == "__main__":
    sys.exit(main())
