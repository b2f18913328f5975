"""The train/validation split of a converted dataset: drawn (seeded) or official, saved as
``ROOT/<dataset>/split.json`` and reused (and extended) by later runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import numpy as np

from ...files import atomic_write_bytes, safe_component
from .contract import ConvertError, SceneRef
from .options import ConvertOptions

__all__ = ["SPLIT_FILE", "random_val_split", "load_or_create_split"]

SPLIT_FILE = "split.json"


# Splits
# --------------------------------------------------------------------------------------------



def random_val_split(scene_ids: Iterable[str], val_scenes: int, seed: int) -> dict[str, str]:
    """Seeded random split: ``val_scenes`` scenes (at most half of them) are "val", the rest "train".

    The draw depends only on the sorted scene ids and ``seed``, so it is reproducible. Returns
    ``{scene_id: split}``.
    """
    ids = sorted(set(scene_ids))
    n_val = min(int(val_scenes), len(ids) // 2)
    rng = np.random.default_rng(int(seed))
    val = {ids[i] for i in rng.choice(len(ids), size=n_val, replace=False)} if n_val else set()
    return {s: ("val" if s in val else "train") for s in ids}


def _check_split_names(path: Path, splits: Iterable) -> None:
    """Raise ConvertError unless every split name of the split file ``path`` is a plain folder name
    (``depthpe.files.safe_component`` keeps it as it is): a split is the folder ``ROOT/<dataset>/<split>``,
    so ``../../x`` would write scene files outside ``--out``."""
    for split in sorted(set(map(str, splits))):
        if safe_component(split) != split:
            raise ConvertError(
                f"{path}: split name {split!r} is not a plain folder name (letters, digits and ._+=@,-, "
                "not starting with '.'); rename it, or delete the file to draw a new split")


def load_or_create_split(
    dataset_dir: Path, refs: list[SceneRef], rule: str, options: ConvertOptions
) -> tuple[dict[str, str], dict]:
    """The split of every scene, from ``dataset_dir/split.json`` if it exists, else made by ``rule``
    and written there. Scenes missing from an existing file (a larger download) are assigned by
    their official split (rule "official") or to train, and the file is updated.

    Under rule "official" a scene without an official split is left out of the assignment.
    Returns ``({scene_id: split}, info)`` with info = {"file", "created", "added"}. Raises
    ConvertError for a malformed file or a split name that is not a plain folder name.
    """
    path = dataset_dir / SPLIT_FILE
    ids = [r.scene_id for r in refs]
    info = {"file": str(path), "created": False, "added": 0}
    if path.is_file():
        try:
            doc = json.loads(path.read_text())
            assignment = {s: split for split, members in doc["splits"].items() for s in members}
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise ConvertError(
                f"{path}: malformed split file ({err!r}); fix or delete it to draw a new split"
            ) from err
        _check_split_names(path, assignment.values())
    else:
        doc = {"format": "depthpe-split", "rule": rule, "seed": options.split_seed,
               "val_scenes": options.val_scenes}
        if rule == "random":
            assignment = random_val_split(ids, options.val_scenes, options.split_seed)
        elif rule == "official":
            assignment = {r.scene_id: r.split for r in refs if r.split}
        elif rule == "train":
            assignment = {s: "train" for s in ids}
        else:
            raise ValueError(f"unknown split rule {rule!r}")
        info["created"] = True
    for r in refs:
        if r.scene_id not in assignment:
            if rule == "official" and not r.split:
                continue  # not in the official split: reported as skipped, never assigned
            assignment[r.scene_id] = r.split if rule == "official" else "train"
            info["added"] += 1
    if info["created"] or info["added"]:
        splits: dict[str, list[str]] = {}
        for s, split in sorted(assignment.items()):
            splits.setdefault(split, []).append(s)
        doc["splits"] = splits
        doc["dataset"] = dataset_dir.name
        atomic_write_bytes(path, json.dumps(doc, indent=1).encode())
    return assignment, info


# --------------------------------------------------------------------------------------------
