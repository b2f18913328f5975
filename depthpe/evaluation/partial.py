"""The partial results of a running ``depthpe eval``, kept in ``OUT/partial/`` so that an interrupted
evaluation continues where it stopped (docs/evaluation.md, "Long evaluations: interruption and resume").

Layout of ``OUT/partial/``:

* ``settings.json``: the fingerprint of everything that determines the results (``eval_fingerprint``),
  written atomically before the first scene;
* ``gt_medians.json``: pass 1's result (median normalized GT depth per dataset), written once pass 1 ends;
* ``scenes.<rank>.jsonl``: one JSON line per finished scene (``SceneRecord`` fields: metric rows,
  frames, failure, loss, panel files), appended by process ``rank``; each line is flushed to the
  operating system at once (it survives the process being killed) and fsynced at least every
  ``FSYNC_SECONDS`` (it survives a machine crash too);
* ``png/``: the panels of finished scenes (scene panels, worst-image candidates), each written
  atomically before the line that names it.

Every line carries the hash of the settings it was made with (``settings_hash``); a line of other
settings, a line that does not parse, a repeated scene or a line whose panel PNG is missing is
skipped and counted (its scene is evaluated again). A line cut short by a kill (no final newline) is
ignored, and cut off before the next append. ``start`` empties the folder first.
Written by hand: no library keeps an append-only record of dicts next to a settings check.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np

from ..config import ConfigError
from ..files import atomic_write_bytes, safe_component
from ..config.inference import EvalConfig
from ..config.options import flag_of
from .record import SceneRecord

__all__ = ["PARTIAL_DIR", "FSYNC_SECONDS", "PartialEvaluation", "eval_fingerprint", "settings_difference", "settings_hash"]

PARTIAL_DIR = "partial"
FSYNC_SECONDS = 5.0
SETTINGS = "settings.json"
GT_MEDIANS = "gt_medians.json"

# Fingerprint entries that are not an option of their own: how an error names them.
_DESCRIBED = {
    "weights": "the weights file of --model (its size or modification time)",
    "model_config": "the config.json of --model",
    "sources": "the scenes under --data (an index.json, or a scene file's size or modification time)",
    "aspect": "the training aspect ratio of --model (training_inputs.json)",
    "scale_reference": "the scale reference of --model (training_inputs.json)",
    "device": "the device (--cpu, or the GPU)",
    "depthpe": "the depthpe version",
    "camera_noise": "the camera noise (--rotation-noise, --translation-noise, --focal-noise, --noise-seed)",
}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _stamp(path: Path) -> list[int]:
    """[size in bytes, modification time in ns] of ``path``."""
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def _source_fingerprint(scenes) -> dict:
    """A source's name, folder, index.json hash and one hash of (path, size, mtime) of its scene files
    (``scenes``: a ``protocol.SourceScenes``, whose index entries were read already)."""
    from depthpe.scenes.format.scene_file import INDEX_NAME

    source = scenes.source
    split_dir = Path(source.split_dir)
    files = hashlib.sha256()
    for entry in scenes.index:
        scene = split_dir / entry["path"]
        files.update(json.dumps([entry["path"], *(_stamp(scene) if scene.exists() else [])]).encode())
    return {"name": source.name, "split_dir": str(split_dir.resolve()), "index": _sha256(split_dir / INDEX_NAME),
            "scene_files": files.hexdigest(), "max_scenes": source.max_scenes}


def eval_fingerprint(cfg: EvalConfig, held_out, device: str) -> dict:
    """Everything that determines the results of ``depthpe eval`` with ``cfg`` on ``held_out`` (a
    ``heldout.HeldOutSet``: its sources and input size): the model (path or Hub id, revision, the weights file's size and
    modification time, config.json's hash), the scenes (index.json hashes, scene files' sizes and
    modification times), the options that change numbers or outputs (views, seed, --scenes,
    manifest hash, width, aspect, dtype, min-valid-fraction, panels, worst), the device type and the
    depthpe version. Not in it: --num-workers and the number of processes (no effect on the results)."""
    from .. import __version__
    from ..model.depth_model import checkpoint_files

    files = checkpoint_files(cfg.model, cfg.revision)
    size = held_out.size
    model = str(Path(cfg.model).resolve()) if Path(cfg.model).is_dir() else cfg.model
    return {"model": model, "revision": cfg.revision, "weights": _stamp(Path(files["weights"])),
            "model_config": _sha256(Path(files["config"])),
            "sources": [_source_fingerprint(s) for s in held_out.sources],
            "max_scenes": cfg.max_scenes, "views": cfg.views, "seed": cfg.seed,
            "manifest": _sha256(Path(cfg.manifest)) if cfg.manifest else None, "image_width": size.image_width,
            "aspect": size.aspect, "scale_reference": size.scale_reference, "dtype": cfg.dtype,
            "min_valid_fraction": cfg.min_valid_fraction, "panels": cfg.panels, "worst": cfg.worst,
            "device": device, "depthpe": __version__,
            **cfg.camera_noise_entry()}


def settings_hash(fingerprint: dict) -> str:
    """16 hex digits of the SHA-256 of a settings fingerprint (its JSON, keys sorted): the mark every
    record line carries, so that no line of other settings is ever reused."""
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:16]


def settings_difference(old: dict, new: dict, config_class=EvalConfig, described: dict | None = None) -> str | None:
    """The first fingerprint entry that differs, as words for an error ("--views was 8, now 2"), or
    None. ``config_class``: the command's config dataclass, whose fields are named by their flag;
    ``described``: {entry: words} for the entries that are not an option (default: evaluation's)."""
    described = _DESCRIBED if described is None else described
    for key in [*new, *(k for k in old if k not in new)]:
        if old.get(key) == new.get(key):
            continue
        if key in described:
            return f"{described[key]} changed"
        if key in config_class.__dataclass_fields__:
            return f"{flag_of(config_class, key)} was {old.get(key)!r}, now {new.get(key)!r}"
        return f"{key} was {old.get(key)!r}, now {new.get(key)!r}"
    return None


class PartialEvaluation:
    """The partial results in ``out/partial/`` as seen by process ``rank`` (module docstring).
    ``config_class`` and ``described`` name the fingerprint's entries in errors (``settings_difference``):
    ``depthpe rmvd --model`` keeps its finished samples here too, as records of its own settings."""

    def __init__(self, out: str | Path, rank: int = 0, *, config_class=EvalConfig, described: dict | None = None):
        self.config_class, self.described = config_class, described
        self.out = Path(out)
        self.folder = self.out / PARTIAL_DIR
        self.rank = int(rank)
        self._file = None
        self._last_sync = 0.0
        self.settings_hash: str | None = None  # set by check() or start(); every line carries it
        self.bad_records = 0  # lines records() skipped: unreadable, other settings, duplicated, panel missing

    def exists(self) -> bool:
        """Whether an evaluation started in ``out`` and did not finish (its settings are there)."""
        return (self.folder / SETTINGS).is_file()

    def check(self, fingerprint: dict) -> None:
        """Raise ``ConfigError`` (one line) if the partial results were made with other settings."""
        try:
            old = json.loads((self.folder / SETTINGS).read_text())
            if not isinstance(old, dict):
                raise ValueError(f"a JSON {type(old).__name__}, not an object")
        except (OSError, ValueError) as err:
            raise ConfigError(f"--out {self.out}: unreadable {PARTIAL_DIR}/{SETTINGS} ({err}); "
                              "pass --restart to discard the partial results") from None
        self.settings_hash = settings_hash(fingerprint)
        difference = settings_difference(old, fingerprint, self.config_class, self.described)
        if difference:
            raise ConfigError(f"--out {self.out} holds a partial evaluation made with other settings: {difference}; "
                              "rerun with the same settings to resume it, choose another --out, or pass --restart "
                              "to discard the partial results")

    def start(self, fingerprint: dict) -> None:
        """Empty the folder (stale records, medians and PNGs of any earlier run go), then record the
        settings (main process, before any scene)."""
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        atomic_write_bytes(self.folder / SETTINGS, json.dumps(fingerprint, indent=1).encode())
        self.settings_hash = settings_hash(fingerprint)

    def use_settings(self, fingerprint: dict) -> None:
        """The settings this process appends under (the main process checked or started the folder)."""
        self.settings_hash = settings_hash(fingerprint)

    def discard(self) -> None:
        """Remove the partial results (after the outputs are written, or for --restart)."""
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def records(self) -> list[SceneRecord]:
        """Every finished scene's record, from every process's file (complete lines only), made with
        the current settings. A line that does not parse, carries another settings hash, repeats a
        scene or names a panel PNG that is missing is skipped and counted in ``bad_records`` (its
        scene is evaluated again)."""
        found, seen, self.bad_records = [], set(), 0
        for path in sorted(self.folder.glob("scenes.*.jsonl")):
            data = path.read_bytes()
            for line in data[: data.rfind(b"\n") + 1].splitlines():
                record = self._record(line) if line.strip() else None
                if line.strip() and (record is None or record.key in seen):
                    self.bad_records += 1
                elif record is not None:
                    seen.add(record.key)
                    found.append(record)
        return found

    def _record(self, line: bytes) -> SceneRecord | None:
        """The record of one line if it is whole and of these settings, else None."""
        try:
            doc = json.loads(line.decode("utf-8"))
            record = SceneRecord.from_json(doc)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        if doc.get("settings") != self.settings_hash:
            return None
        pngs = [record.panel_file] if record.panel_file else []
        pngs += [item.get("panel_file") for item in record.worst]
        if not all(isinstance(p, str) and (self.folder / "png" / safe_component(p)).is_file() for p in pngs):
            return None
        return record

    def gt_medians(self) -> dict[str, float] | None:
        """Pass 1's result if it finished, else None."""
        path = self.folder / GT_MEDIANS
        return json.loads(path.read_text()) if path.is_file() else None

    def save_gt_medians(self, medians: dict[str, float]) -> None:
        """Keep pass 1's result ({dataset: median GT depth, normalized scene unit}) atomically, so a
        resumed evaluation skips pass 1."""
        atomic_write_bytes(self.folder / GT_MEDIANS, json.dumps(medians).encode())

    def save_png(self, name: str, panel: np.ndarray) -> str:
        """Write a uint8 panel as ``png/<name>.png``; returns the name to store in a record."""
        from ..report.viz import save_png

        name = f"{safe_component(name)}.png"
        save_png(self.folder / "png" / name, panel)
        return name

    def load_png(self, name: str) -> np.ndarray:
        """A panel saved with ``save_png``, as the same uint8 (H, W, 3) RGB array."""
        import cv2

        return np.ascontiguousarray(cv2.imread(str(self.folder / "png" / safe_component(name)), cv2.IMREAD_COLOR)[..., ::-1])

    def keep(self, record: SceneRecord, entered: list[dict]) -> None:
        """Keep a finished scene: its panel (``record.panel_image``, if any) and the panels of the
        images of it that ``entered`` the worst list as PNG files, named in ``record.panel_file`` and
        ``record.worst`` (the items without their panel), then its line (``append``)."""
        if record.panel_image is not None:
            record.panel_file = self.save_png(f"panel_{record.stem}", record.panel_image)
        record.worst = [{**{k: v for k, v in item.items() if k != "panel"},
                         "panel_file": self.save_png(f"worst_{record.stem}_v{item['image']}", item["panel"])}
                        for item in entered]
        self.append(record)

    def append(self, record: SceneRecord) -> None:
        """Add one finished scene's record to this process's file (flushed now, fsynced every few seconds)."""
        if self._file is None:
            self._file = self._open()
        self._file.write(json.dumps({**record.to_json(), "settings": self.settings_hash}, default=_plain) + "\n")
        self._file.flush()
        if time.monotonic() - self._last_sync >= FSYNC_SECONDS:
            os.fsync(self._file.fileno())
            self._last_sync = time.monotonic()

    def close(self) -> None:
        """Fsync and close this process's file."""
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None

    def _open(self):
        """This process's file for appending, with a line cut short by a kill removed first."""
        path = self.folder / f"scenes.{self.rank}.jsonl"
        self.folder.mkdir(parents=True, exist_ok=True)
        if path.exists():
            data = path.read_bytes()
            if data and not data.endswith(b"\n"):
                os.truncate(path, data.rfind(b"\n") + 1)
        self._last_sync = time.monotonic()
        return open(path, "a", encoding="utf-8")


def _plain(value):
    """JSON for numpy scalars in metric rows."""
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    raise TypeError(f"cannot store {type(value).__name__} in a scene record")
