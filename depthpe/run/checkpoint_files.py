"""Whether every file of a checkpoint folder can be read back, checked before a resume chooses it.

``checkpoint_problem(folder)`` names the first broken file of ``checkpoints/step_N`` ("<file>:
<why>"), or None. It reads ``trainer_state.json``, the header of every safetensors file, and loads
every ``torch.save`` archive of Accelerate's state (``optimizer.bin``, ``random_states_<rank>.pkl``,
``custom_checkpoint_<i>.pkl``, ``scheduler.bin``, DeepSpeed's ``*_states.pt``) with
``weights_only=True`` and its tensors memory-mapped, so that only the pickle is read, not the
tensor bytes: a truncated file, a zip archive of garbage and a pickle whose bytes were changed are
found in milliseconds even for a large optimizer state, a changed byte inside a tensor's data is
not. A pickle that holds a class ``weights_only`` will not build (a custom object's state) is
checked opcode by opcode instead, without running it. Accelerate itself would raise an
``UnpicklingError`` for a broken optimizer state, and for broken random states it only logs that
it could not load them and goes on with other random numbers.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

__all__ = ["STATE_FILE", "TORCH_SAVE_SUFFIXES", "checkpoint_problem", "state_files", "file_problem"]

STATE_FILE = "trainer_state.json"
TORCH_SAVE_SUFFIXES = (".bin", ".pkl", ".pt", ".pth", ".safetensors")


def checkpoint_problem(folder: Path) -> str | None:
    """The first broken file of a checkpoint folder ("<folder>/<file>: <why>"), or None when every
    file can be read back: a parseable trainer_state.json, the exported model and every file of
    Accelerate's state (``file_problem``)."""
    try:
        doc = json.loads((folder / STATE_FILE).read_text())
        if not isinstance(doc.get("step"), int) or not isinstance(doc.get("counters"), dict):
            return f"{STATE_FILE}: no integer 'step' or no 'counters'"
    except (OSError, ValueError, AttributeError) as err:
        return f"{STATE_FILE}: {err}"
    files = [folder / "model" / "model.safetensors", *state_files(folder / "state")]
    for path in files:
        problem = file_problem(path) if path.is_file() else f"{path.name}: missing"
        if problem:
            return f"{path.parent.name}/{problem}"
    return None


def state_files(state: Path) -> list[Path]:
    """The files of Accelerate's state folder that must be readable archives: its own top-level files,
    and in its subfolders (DeepSpeed's ``<tag>/``: ``mp_rank_*_model_states.pt``,
    ``*_optim_states.pt``) the files with a ``torch.save`` or safetensors suffix. DeepSpeed's
    ``latest`` (a text file naming the tag folder) counts as that folder, missing if it is; its
    ``zero_to_*.py`` conversion scripts are not checked."""
    files: list[Path] = []
    for path in sorted(state.glob("*")):
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.suffix in TORCH_SAVE_SUFFIXES)
        elif path.name == "latest":
            name = path.read_text(errors="replace").strip()
            files += [] if name and (state / name).is_dir() else [state / (name or "latest (empty)")]
        elif path.suffix != ".py":
            files.append(path)
    return files


def file_problem(path: Path) -> str | None:
    """Why one checkpoint file cannot be read back ("<name>: <why>"), or None. A safetensors file
    must cover its header's tensors; anything else is a ``torch.save`` zip archive whose pickle
    loads (``_unpickle_problem``)."""
    from safetensors import SafetensorError, safe_open

    if path.suffix == ".safetensors":
        try:
            with safe_open(str(path), "pt"):
                return None
        except (SafetensorError, OSError) as err:
            return f"{path.name}: {str(err).splitlines()[0]}"
    if not zipfile.is_zipfile(path):
        return f"{path.name}: truncated or not a torch.save archive"
    problem = _unpickle_problem(path)
    return f"{path.name}: {problem}" if problem else None


_WEIGHTS_ONLY_REASON = re.compile(r"WeightsUnpickler error:\s*(.+?)\s*(?:\n|$)")


def _unpickle_problem(path: Path) -> str | None:
    """Why ``torch.load(path, weights_only=True)`` fails (tensors memory-mapped, not read), or None.
    Accelerate's ``load`` is used, which also admits the numpy types of its random states."""
    import pickle

    from accelerate.utils import load

    try:
        load(str(path), map_location="cpu", weights_only=True, mmap=True)
        return None
    except pickle.UnpicklingError as err:
        if "Unsupported global" in str(err):  # a class weights_only does not build: check the structure
            return _opcode_problem(path)
        found = _WEIGHTS_ONLY_REASON.search(str(err))
        reason = found.group(1) if found else (str(err).strip().splitlines() or ["unpickling failed"])[0]
    except Exception as err:  # noqa: BLE001 - whatever torch.load raises, the file cannot be resumed from
        reason = f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:200]}"
    return f"a zip archive that torch.load cannot read ({reason})"


def _opcode_problem(path: Path) -> str | None:
    """Why the pickle (``*/data.pkl``) of a torch.save archive is not a well-formed pickle, or None;
    reads its opcodes only (nothing is imported or built)."""
    import pickletools

    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if n.endswith("/data.pkl")]
        if not names:
            return "a zip archive without a pickle (no */data.pkl)"
        data = archive.read(names[0])
    try:
        for _ in pickletools.genops(data):
            pass
    except Exception as err:  # noqa: BLE001 - ValueError for a bad opcode or a missing STOP, and others
        return f"a zip archive whose pickle is malformed ({err})"
    return None
