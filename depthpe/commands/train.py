"""``depthpe train --config NAME_OR_PATH [--resume latest|auto|PATH | --overwrite] [--allow-config-change KEY]
[key=value ...]``: train a model."""

from __future__ import annotations

import argparse
import sys

from ..config.command_line import USAGE_ERROR_STATUS, report_errors

DESCRIPTION = """\
Train a depthpe model as a run config describes it. --config takes a YAML file or the name of a
config shipped with the package (quickstart, quickstart_rope, vggt1b_prope, ...). Overrides are
dotted keys with YAML values: train.steps=2000 optim.lr=1e-4 model.global_pe=rope
data.sources.0.root=/data. The resolved config is saved to <output_dir>/config.yaml.

Config sections:
  output_dir, seed   where the run goes; the seed of model init and data sampling
  model              preset (tiny, vggt-1b), init_from (a VGGT checkpoint) and any DepthModelConfig
                     field: global_pe (a preset: none, rope, prope, dppe_dual, dppe_tadd, gta, urope;
                     or a pair {qk: NAME, vo: NAME}, docs/encodings.md), plucker, sizes, ...
  data               training sources (name, root, split, weight, view_selection, window), views and
                     aspect ranges, image_width, max_images_per_batch, augmentation
  optim              AdamW lr, min_lr, weight_decay, betas, warmup_steps, schedule, grad_clip
  loss               l1_weight, gradient_weight, gradient_scales, conf_weight, conf_alpha
  train              steps, grad_accum, mixed_precision, num_workers, logging, checkpoints, report_to
  val                validation sources, every, views, max_scenes, panels
  hub                repo_id and settings of background pushes to the Hugging Face Hub

Every run has an id (run.json, trainer_state.json). A new run (no --resume) refuses an output_dir
that holds a run: resume it with --resume latest, choose another output_dir, or pass --overwrite,
which moves the earlier run aside to <output_dir>.old-TIMESTAMP first. --resume refuses a
checkpoint of another run, another model, and a changed data.image_width or data.scale_reference
(unless --allow-config-change KEY); other changed settings are logged.

Every key with its default: docs/configuration.md (or --print-config). A bad config stops with one
line 'error: ...' and exit status 2 before anything is built or downloaded.
Several processes: accelerate launch -m depthpe.train --config NAME [...] (same arguments), or under
Slurm srun --ntasks=N depthpe train ... (one process per task; docs/distributed.md)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, metavar="NAME_OR_PATH",
                        help="run config: a YAML file or a shipped config name (e.g. quickstart)")
    parser.add_argument("--resume", default=None, metavar="latest|auto|PATH",
                        help="'latest' = newest complete checkpoint of output_dir (error if none), 'auto' = "
                             "latest if there is one, else start fresh, or a checkpoints/step_N folder")
    parser.add_argument("--overwrite", action="store_true",
                        help="start a new run even though output_dir holds one (checkpoints/, final/, validation "
                             "history): everything in it but its .lock is first moved aside to "
                             "<output_dir>.old-TIMESTAMP (nothing is deleted); not with --resume")
    parser.add_argument("--allow-config-change", action="append", default=[], metavar="KEY",
                        help="with --resume: allow a change of KEY that a resume refuses because it changes what "
                             "the run trains for (data.image_width, data.scale_reference); repeat for several. "
                             "Every other changed setting is allowed and logged")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="dotted overrides, e.g. train.steps=100 model.global_pe=prope")


def run(args: argparse.Namespace) -> int:
    try:
        return _train(args)
    except KeyboardInterrupt:  # Ctrl-C twice, or once before training started (once in training: a checkpoint)
        if args.debug:
            raise
        from ..run.preemption import INTERRUPTED_EXIT_CODE

        print("error: interrupted (Ctrl-C) without a new checkpoint; `--resume latest` continues from the last "
              "complete one", file=sys.stderr, flush=True)
        return INTERRUPTED_EXIT_CODE


def _train(args: argparse.Namespace) -> int:
    from ..run import dump_run_config, load_run_config
    from ..cluster.slurm import apply_launch_env

    apply_launch_env()  # `srun --ntasks=N depthpe train`: the N tasks form one run (depthpe.cluster.slurm)

    with report_errors(args.debug):
        cfg = load_run_config(args.config, args.overrides)
        if args.print_config:
            sys.stdout.write(dump_run_config(cfg))
            return 0
        from depthpe.loader.datasets import NoUsableSampleError
        from ..model.backbone import BackboneWeightsError
        from ..run.checkpoints import NoSpaceError
        from ..run.tracking import error_line
        from ..run.trainer import train

        try:
            train(cfg, resume=args.resume, overwrite=args.overwrite, allow_config_change=tuple(args.allow_config_change),
                  callbacks=[_complete_run_ignores_sigterm()])
        except (NoSpaceError, NoUsableSampleError, BackboneWeightsError) as err:  # a full disk, broken data,
            if args.debug:                                                        # unusable backbone weights
                raise
            print(f"error: {error_line(err)}", file=sys.stderr, flush=True)
            return 1
        return 0
    return USAGE_ERROR_STATUS



def _complete_run_ignores_sigterm():
    """A training callback: once ``final/`` is written the run is complete, and a SIGTERM until this
    process has ended (the final validation, the Hub uploads, the teardown of torch, the trackers and
    accelerate can take seconds) must not make it exit with 143, which the Slurm scripts read as
    "stopped with a checkpoint, requeue" (a pre-emption or time limit landing just after the last step
    would otherwise train the last steps again in a new allocation). So SIGTERM is ignored from the
    moment ``final/`` is saved; the stop request leaves that in place when it restores its handlers
    (``StopRequest.restore``), so no moment is left where SIGTERM kills the process."""
    import signal
    import threading

    from ..run.callbacks import TrainingCallback

    class CompleteRunIgnoresSigterm(TrainingCallback):
        def on_checkpoint_saved(self, run, folder, final: bool) -> None:
            if final and threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, signal.SIG_IGN)

    return CompleteRunIgnoresSigterm()
