"""The evaluation protocol's choices (docs/evaluation.md): where the held-out scenes are (``discover_sources``,
each source's index read once: ``SourceScenes``), which sources can be evaluated (``usable_sources``), which
scenes of them (``scene_indices``) and the manifests that fix the views of each scene (``write_manifest``,
``load_manifest``). The views themselves are drawn by ``depthpe.loader.sampling.eval_view_indices``."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, Sequence

import numpy as np

from depthpe.loader.config import SourceConfig
from depthpe.loader.datasets import SceneEvalDataset
from ..files import atomic_write_bytes, read_json

__all__ = ["SELECTIONS", "SourceScenes", "read_source", "scene_indices", "write_manifest", "load_manifest",
           "discover_sources", "usable_sources"]

SELECTIONS = ("first", "random")


@dataclass(frozen=True)
class SourceScenes:
    """A held-out source with the entries of its index.json, read once (``read_index``: dicts with
    ``path`` relative to the split folder, ``scene_id``, ``num_frames``, ``height``, ``width``)."""

    source: SourceConfig
    index: tuple[dict, ...]

    @property
    def evaluable(self) -> int:
        """How many of its scenes have the 2 or more frames an evaluation needs."""
        return sum(int(e["num_frames"]) >= 2 for e in self.index)


def read_source(source: SourceConfig | dict | SourceScenes) -> SourceScenes:
    """``source`` with its index.json read (an already read ``SourceScenes`` is returned as is).
    Raises ``SceneFileError`` for a missing or malformed index."""
    from depthpe.scenes.format.scene_file import read_index

    if isinstance(source, SourceScenes):
        return source
    source = source if isinstance(source, SourceConfig) else SourceConfig.from_dict(source)
    return SourceScenes(source, tuple(read_index(source.split_dir)))


def write_manifest(path: str | Path, scenes: dict, *, seed=None, views=None, camera_noise: dict | None = None) -> Path:
    """Write an evaluation manifest {"seed", "views", "scenes": {"<source>/<scene_id>": [frames]}} atomically,
    with "camera_noise" (the levels and seed of the input-camera perturbation) when one was applied."""
    doc = {"seed": seed, "views": views, "scenes": scenes}
    if camera_noise:
        doc["camera_noise"] = camera_noise
    return atomic_write_bytes(Path(path), json.dumps(doc, indent=1).encode())


def load_manifest(path: str | Path | None) -> dict | None:
    """Read a ``manifest.json`` written by an earlier evaluation ({"scenes": {key: frames}}).
    Raises ``ConfigError`` (one line) for a file that is missing, not JSON or not a manifest."""
    from ..config import ConfigError

    if path is None:
        return None
    try:
        doc = read_json(path)
    except (OSError, ValueError) as err:
        raise ConfigError(f"manifest {path}: cannot read it ({err}); give the manifest.json of an earlier "
                          "evaluation (or the val_manifest.json of a run)") from None
    scenes = doc.get("scenes") if isinstance(doc, dict) else None
    if not isinstance(scenes, dict):
        raise ConfigError(f"{path}: not a depthpe evaluation manifest (no 'scenes' mapping)")
    return scenes


def scene_indices(dataset: SceneEvalDataset, max_scenes: int | None, selection: str = "first", seed: int = 0,
                  scenes: Collection[str] | None = None) -> list[int]:
    """Item indices to evaluate, in index order. Per source: at most ``source.max_scenes`` (if set,
    else ``max_scenes``; None = all) scenes, the first ones (``selection="first"``) or a random draw
    seeded by (``seed``, source name) (``"random"``: the same draw on every machine and run).
    ``scenes``: only these "<source>/<scene_id>" keys (a fixed manifest), before the limit."""
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
    per_source: dict[int, list[int]] = {}
    for i, (src, _) in enumerate(dataset.items):
        if scenes is None or dataset.scene_key(i) in scenes:
            per_source.setdefault(src, []).append(i)
    out = []
    for src, items in per_source.items():
        limit = dataset.sources[src].max_scenes
        limit = max_scenes if limit is None else limit
        if limit is not None and limit < len(items):
            if selection == "random":
                rng = np.random.default_rng([seed, zlib.crc32(dataset.sources[src].name.encode())])
                items = [items[j] for j in sorted(rng.choice(len(items), size=limit, replace=False))]
            else:
                items = items[:limit]
        out += items
    return sorted(out)


def discover_sources(root: str | Path, split: str, datasets: Sequence[str] | None = None) -> list[SourceConfig]:
    """Sources for every ``root/<dataset>/<split>/index.json`` (or only ``datasets``), sorted by name."""
    root = Path(root)
    names = list(datasets) if datasets else sorted(p.parent.parent.name for p in root.glob(f"*/{split}/index.json"))
    if not names:
        raise FileNotFoundError(
            f"no dataset with a '{split}' split under {root} (expected {root}/<dataset>/{split}/index.json); "
            "generate data with `depthpe synth --out ROOT` or convert one with `depthpe convert`"
        )
    for name in names:
        if not (root / name / split / "index.json").is_file():
            raise FileNotFoundError(f"{root / name / split / 'index.json'} not found")
    return [SourceConfig(name=n, root=str(root), split=split) for n in names]


def usable_sources(sources: Sequence[SourceConfig | SourceScenes], *,
                   named: bool) -> tuple[list[SourceScenes], list[str]]:
    """The sources (index read once: ``SourceScenes``) whose index lists at least one scene of two
    or more frames, and one warning per empty source left out. ``named``: the user named the
    datasets (``--datasets``), so an empty one is an error rather than a warning. Raises
    ``ConfigError`` for an unreadable index, an empty named source, or when no source is left."""
    from ..config import ConfigError
    from depthpe.scenes.format.scene_file import SceneFileError

    kept, warnings = [], []
    for src in sources:
        try:
            scenes = read_source(src)
        except SceneFileError as err:
            raise ConfigError(f"{err} (rebuild it with `depthpe index {src.split_dir}`)") from None
        if scenes.evaluable:
            kept.append(scenes)
            continue
        src = scenes.source
        problem = f"dataset {src.name!r} has no scene with 2 or more frames in its '{src.split}' split ({src.split_dir})"
        if named:
            raise ConfigError(f"{problem}; nothing to evaluate there")
        warnings.append(f"warning: skipping {problem}")
    if not kept:
        raise ConfigError(f"nothing to evaluate: {'; '.join(w.removeprefix('warning: skipping ') for w in warnings)}")
    return kept, warnings
