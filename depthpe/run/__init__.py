"""The run layer: typed run configs, the training loop and its parts.

``load_run_config`` reads a config; ``train`` runs it. Modules: ``schema`` (the config dataclasses),
``loading`` (files, overrides, shipped configs), ``preflight`` (checks before anything is built),
``building`` (model, optimizer, schedule and loaders from a config), ``lock`` (one run per output
folder), ``preemption`` (SIGTERM/SIGINT turned into a checkpoint and an exit status), ``distributed``
(several processes and machines: collective timeout, group checks, a lost peer), ``state``
(what a checkpoint restores), ``step`` (one optimizer step), ``checkpoints`` (writing, finding and
loading them), ``checkpoint_files`` (whether every file of one loads), ``identity`` (run ids, what of a
run a folder holds, ``--overwrite``), ``resume_checks`` (what a resume compares), ``disk_space`` (free space before a checkpoint, one-line disk-full errors), ``tracking`` (logging and trackers), ``validation`` (what validation keeps in the run
folder), ``pushes`` (what training pushes to the Hub), ``correspondence`` (the correspondence term of a
forward pass, ``loss.correspondence_weight``), ``callbacks`` (hooks into the loop:
``train(cfg, callbacks=[...])``), ``trainer`` (the loop).
"""

from .loading import dump_run_config, load_run_config, save_run_config
from .schema import HubConfig, LossConfig, ModelSection, OptimConfig, RunConfig, TrainLoopConfig, ValConfig

__all__ = ["RunConfig", "ModelSection", "OptimConfig", "LossConfig", "TrainLoopConfig", "ValConfig", "HubConfig",
           "load_run_config", "dump_run_config", "save_run_config"]
