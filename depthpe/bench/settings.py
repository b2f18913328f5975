"""What the settings of the ``depthpe bench`` commands share. Each benchmark's settings are one
dataclass in its module (``SynthSettings``, ``MemorySettings``, ...) whose fields are its options
(``depthpe.config.options.add_plain_options``: one place for every default). For a benchmark of a
training run, ``--config NAME`` and the ``key=value`` items name that run's config
(``BenchedRun``), as for ``depthpe train``, not the benchmark's own settings. Light module: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.options import option

__all__ = ["DEFAULT_RUN_CONFIG", "RUN_CONFIG_HELP", "JSON_HELP", "BenchedRun", "config_option", "overrides_option"]

DEFAULT_RUN_CONFIG = "quickstart"  # the run a benchmark measures unless --config names another
RUN_CONFIG_HELP = "run config: a YAML file or a shipped config name"
JSON_HELP = "also write the results to this JSON file"


def config_option(help: str = RUN_CONFIG_HELP, default=DEFAULT_RUN_CONFIG):
    """The ``--config NAME`` field of the benchmarked run (``REQUIRED`` as ``default``: no default)."""
    return option(default, help=help)


def overrides_option(help: str = "dotted config overrides, e.g. model.global_pe=prope"):
    """The ``key=value`` items of the benchmarked run (a positional list, spelled ``overrides``)."""
    return option(default_factory=list, positional=True, metavar="overrides", help=help)


@dataclass
class BenchedRun:
    """The training run a benchmark measures: ``config`` (a YAML file or a shipped config name, as
    ``depthpe train --config``) and its dotted ``overrides`` (``model.global_pe=prope``), applied in
    order after the file."""

    config: str = config_option()
    overrides: list[str] = overrides_option()
