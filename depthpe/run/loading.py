"""Reading, resolving and saving run configs (``RunConfig``).

``load_run_config("quickstart", ["train.steps=200"])`` finds the config (a path, or the name of a
config shipped in ``depthpe/configs/``, or ``grid/NAME`` for ``depthpe/configs/grid/``), reads its ``base:`` chain, merges the overrides into the
typed schema, fills the model fields that the YAML does not set from ``model.preset`` and checks
every value (``schema.build_run_config``). The result is complete: ``dump_run_config`` writes every field, and reading that file
back gives an equal ``RunConfig`` (this is what ``<output_dir>/config.yaml`` holds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..config import ConfigError, read_yaml_chain, to_yaml
from .schema import RunConfig, build_run_config

__all__ = ["SHIPPED_CONFIGS", "SHIPPED_GROUPS", "shipped_config_names", "shipped_group_config_names",
           "resolve_config_path",
           "load_run_config", "dump_run_config", "save_run_config"]

SHIPPED_CONFIGS = Path(__file__).resolve().parent.parent / "configs"


SHIPPED_GROUPS = ("grid",)  # sub-folders of depthpe/configs whose configs are named "grid/NAME"


def shipped_config_names() -> list[str]:
    """Names of the run configs that ship with the package (``depthpe/configs/*.yaml``)."""
    return sorted(p.stem for p in SHIPPED_CONFIGS.glob("*.yaml"))


def shipped_group_config_names(group: str = "grid") -> list[str]:
    """Names ``group/NAME`` of the configs in the shipped sub-folder ``group`` of the configs folder
    (``grid``: the DPPE paper's encoding grid, depthpe/configs/grid/)."""
    return sorted(f"{group}/{p.stem}" for p in (SHIPPED_CONFIGS / group).glob("*.yaml"))


def resolve_config_path(config: str | Path) -> Path:
    """A config file path: ``config`` itself if it is a file, else the shipped config of that name
    (``NAME`` in depthpe/configs/ or ``grid/NAME`` in depthpe/configs/grid/)."""
    path = Path(config)
    if path.is_file():
        return path
    stem = path.name.removesuffix(".yaml")
    folder = str(path.parent)
    if folder == "." or folder in SHIPPED_GROUPS:
        shipped = SHIPPED_CONFIGS / ("" if folder == "." else folder) / f"{stem}.yaml"
        if shipped.is_file():
            return shipped
    groups = "; ".join(f"{g}/NAME: {len(shipped_group_config_names(g))} configs in the shipped folder {g}"
                       for g in SHIPPED_GROUPS)
    raise ConfigError(f"config {str(config)!r} not found: no such file and no shipped config of that name "
                      f"(shipped: {', '.join(shipped_config_names())}; {groups})")


def load_run_config(config: str | Path, overrides: Sequence[str] = ()) -> RunConfig:
    """Read a run config (path or shipped name) with its ``base:`` chain and apply ``overrides``."""
    return build_run_config([read_yaml_chain(resolve_config_path(config))], overrides)


def dump_run_config(cfg: RunConfig) -> str:
    """The complete YAML of ``cfg`` (every field; reading it back gives an equal config)."""
    return to_yaml(cfg)


def save_run_config(cfg: RunConfig, path: str | Path) -> Path:
    """Write ``dump_run_config(cfg)`` to ``path`` atomically; returns the path."""
    from ..files import atomic_write_bytes

    return atomic_write_bytes(Path(path), dump_run_config(cfg).encode())
