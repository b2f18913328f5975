"""The official RMVD sample lists shipped with depthpe (``depthpe/rmvd/lists/<dataset>.json``).

They are the reference code's pickles (``lmb-freiburg/robustmvd``,
``rmvd/data/sample_lists/<dataset>.robustmvd.mvd.pickle``, Apache-2.0) converted once, offline, by
``scripts/convert_rmvd_sample_lists.py``: paths relative to each dataset's native root (given as
``--data-root DATASET=DIR``), K in pixels, poses view_to_key (``p_view = pose @ p_key``). Nothing
is unpickled at run time. ``official:NAME`` or ``official:all`` in ``--samples`` names them.
"""

from __future__ import annotations

from pathlib import Path

from ..config import ConfigError

__all__ = ["OFFICIAL_LISTS", "LISTS_DIR", "is_official", "official_list_paths"]

LISTS_DIR = Path(__file__).resolve().parent / "lists"

# dataset -> (samples, views per sample: the keyview and its source views), as in the reference
OFFICIAL_LISTS = {"kitti": (93, 21), "scannet": (200, 8), "eth3d": (104, 11), "dtu": (110, 11),
                  "tanks_and_temples": (69, 11)}

_PREFIX = "official:"


def is_official(spec: str) -> bool:
    """Whether a ``--samples`` entry names shipped lists (``official:NAME`` or ``official:all``)."""
    return str(spec).startswith(_PREFIX)


def official_list_paths(spec: str) -> list[Path]:
    """``official:NAME`` -> [the shipped list of NAME]; ``official:all`` -> the five, in the order
    of ``OFFICIAL_LISTS``; another name is one ConfigError line."""
    name = str(spec)[len(_PREFIX):]
    names = list(OFFICIAL_LISTS) if name == "all" else [name]
    if any(n not in OFFICIAL_LISTS for n in names):
        raise ConfigError(f"--samples {spec}: the official lists are official:all or official:NAME with NAME one "
                          f"of {', '.join(OFFICIAL_LISTS)}")
    return [LISTS_DIR / f"{n}.json" for n in names]
