"""Checkpoints and exported models of a run folder: atomic writes, rotation, discovery.

Layout (``output_dir``)::

    checkpoints/step_0000500/     state/ (Accelerate: model, optimizer, RNG of every process),
                                  model/ (exported: config.json, model.safetensors, training_inputs.json),
                                  trainer_state.json (written last: a folder without it is incomplete)
    final/                        the exported final model and its trainer_state.json

Every folder is written under a temporary dot-name and renamed when complete, and deleted by
renaming it away first, so a process killed at any moment leaves either a complete folder or a
dot-folder that nothing reads (``remove_incomplete`` deletes those when the next run starts).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Callable

from ..files import atomic_write_bytes
from ..model.training_inputs import TrainingInputs, write_training_inputs
from .checkpoint_files import STATE_FILE, checkpoint_problem
from .disk_space import NoSpaceError, check_free_space, expected_checkpoint_bytes, export_bytes, space_error

__all__ = ["CHECKPOINT_PREFIX", "STATE_FILE", "checkpoint_dirs", "checkpoint_problem", "find_checkpoint",
           "rotate_checkpoints", "remove_tree", "remove_incomplete", "save_checkpoint", "export_model", "publish_final",
           "NoSpaceError"]

CHECKPOINT_PREFIX = "step_"


def checkpoint_dirs(output_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run (with trainer_state.json), oldest first."""
    root = Path(output_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.name.startswith(CHECKPOINT_PREFIX) and (p / STATE_FILE).is_file()
             and p.name[len(CHECKPOINT_PREFIX):].isdigit()]
    return sorted(found, key=lambda p: int(p.name[len(CHECKPOINT_PREFIX):]))


def find_checkpoint(output_dir: str | Path, resume: str, warn: Callable[[str], None] | None = None) -> Path | None:
    """``resume`` = "latest" (newest complete, readable checkpoint of the run, or None; broken newer
    ones are passed over with a ``warn``ing) or a checkpoint path (``FileNotFoundError`` with one
    line and what to pass instead, unless it is complete and readable: it names the broken file, or
    says that an exported model folder such as ``final/`` is no checkpoint)."""
    if resume == "latest":
        for folder in reversed(checkpoint_dirs(output_dir)):
            problem = checkpoint_problem(folder)
            if problem is None:
                return folder
            if warn is not None:
                warn(f"skipping checkpoint {folder}: {problem}; falling back to the previous one")
        return None
    path = Path(resume)
    exported = _exported_model_problem(path)
    if exported:
        raise FileNotFoundError(exported)
    if not (path / STATE_FILE).is_file():
        raise FileNotFoundError(f"{path} is not a complete depthpe checkpoint (no {STATE_FILE}) {_PASS_ANOTHER}")
    problem = checkpoint_problem(path)
    if problem:
        raise FileNotFoundError(f"{path} is broken: {problem} {_PASS_ANOTHER}")
    return path


_PASS_ANOTHER = "(pass another checkpoints/step_N folder or 'latest')"


def _exported_model_problem(path: Path) -> str | None:
    """One line when ``path`` is an exported model folder (``final/``, a checkpoint's ``model/``:
    config.json + model.safetensors, no Accelerate state) rather than a training checkpoint."""
    from ..hub.folders import REQUIRED_FILES

    if (path / "state").is_dir() or not all((path / name).is_file() for name in REQUIRED_FILES):
        return None
    checkpoint = path.parent if path.name == "model" and (path.parent / "state").is_dir() else None
    instead = str(checkpoint) if checkpoint else f"{path.parent / 'checkpoints' / (CHECKPOINT_PREFIX + 'N')}"
    return (f"{path} is an exported model ({path.name}/), not a training checkpoint: pass {instead} "
            "or 'latest'")


def remove_tree(path: Path) -> None:
    """Delete a folder so that it disappears at once: rename it to ``.del_<name>``, then delete it (a
    kill during the deletion leaves only a dot-folder that no reader looks at)."""
    if not path.exists():
        return
    trash = path.with_name(f".del_{path.name.lstrip('.')}")
    shutil.rmtree(trash, ignore_errors=True)
    os.replace(path, trash)
    shutil.rmtree(trash, ignore_errors=True)


def rotate_checkpoints(output_dir: Path, keep: int, protected: Callable[[Path], bool] | None = None) -> None:
    """Delete all but the newest ``keep`` checkpoints (keep <= 0: delete none), sparing those for
    which ``protected(path)`` is true (an upload still reads them)."""
    for old in checkpoint_dirs(output_dir)[:-keep] if keep > 0 else []:
        if protected is None or not protected(old):
            remove_tree(old)


def _published_name(tmp: Path) -> Path:
    """The folder a temporary one becomes: ``checkpoints/.tmp_step_N`` -> ``step_N``, ``.tmp_final`` -> ``final``."""
    return tmp.with_name(tmp.name[len(".tmp_"):])


def remove_incomplete(output_dir: Path) -> list[str]:
    """Tidy up after interrupted saves, deletions and publishes (main process, before training starts).

    A temporary folder that holds its ``trainer_state.json`` (written last) is complete: only its
    rename was interrupted (``checkpoints/.tmp_step_N``, ``.tmp_final``), so it is published now.
    Other temporary folders and ``.del_*`` leftovers are deleted. Returns one line per folder, naming
    its full path and what was done."""
    root = output_dir / "checkpoints"
    temporary = sorted(p for p in root.glob(".*_" + CHECKPOINT_PREFIX + "*") if p.is_dir()) if root.is_dir() else []
    temporary += [p for p in (output_dir / ".tmp_final", output_dir / ".del_final") if p.is_dir()]
    done = []
    for p in temporary:
        if p.name.startswith(".tmp_") and (p / STATE_FILE).is_file():
            target = _published_name(p)
            remove_tree(target)
            os.replace(p, target)
            done.append(f"completed the interrupted publish of {target} (from {p})")
        else:
            shutil.rmtree(p, ignore_errors=True)
            done.append(f"removed {p}: an interrupted checkpoint save or deletion")
    return done


def export_model(accelerator, model, directory: Path, inputs: TrainingInputs) -> None:
    """Write the prepared model as a ``DepthModel.from_pretrained`` folder (config.json,
    model.safetensors, training_inputs.json). Call on every process: under FSDP the full state dict
    is gathered from all of them (``accelerator.get_state_dict``); under DeepSpeed it is cloned out
    of the engine's flat buffers the same way (safetensors refuses views that share one storage);
    the main process writes."""
    from accelerate.utils import DistributedType

    unwrapped = accelerator.unwrap_model(model)
    if accelerator.distributed_type in (DistributedType.FSDP, DistributedType.DEEPSPEED):  # gather or clone first
        from safetensors.torch import save_file

        from ..model.depth_model import CONFIG_NAME, WEIGHTS_NAME

        state = accelerator.get_state_dict(model)
        if accelerator.is_main_process:
            directory.mkdir(parents=True, exist_ok=True)
            save_file({k: v.contiguous() for k, v in state.items()}, str(directory / WEIGHTS_NAME),
                      metadata={"format": "pt"})
            unwrapped.config.to_json(directory / CONFIG_NAME)
    elif accelerator.is_main_process:
        unwrapped.save_pretrained(directory)
    if accelerator.is_main_process:
        write_training_inputs(directory, inputs)


def _publish(tmp: Path, final: Path, trainer_state: dict) -> None:
    """Write trainer_state.json into ``tmp`` (last), then rename ``tmp`` to ``final`` (main process)."""
    atomic_write_bytes(tmp / STATE_FILE, json.dumps(trainer_state, indent=1).encode())  # its presence = complete
    remove_tree(final)  # only when this folder was written before (a resumed run passing it again)
    os.replace(tmp, final)


def _agreed_free_space(accelerator, output_dir: Path, needed: int, what: str) -> None:
    """``check_free_space`` on the main process; every process raises the same ``NoSpaceError``
    (the main process's answer is broadcast, so no rank is left waiting at a barrier)."""
    from accelerate.utils import broadcast_object_list

    problem = None
    if accelerator.is_main_process:
        try:
            check_free_space(output_dir, needed, what)
        except NoSpaceError as err:
            problem = str(err)
    problem = broadcast_object_list([problem])[0]
    if problem:
        raise NoSpaceError(problem)


@contextlib.contextmanager
def _space_guard(accelerator, tmp: Path, output_dir: Path, needed: int, what: str):
    """Check the free space first; if the writes of the block fail, delete the partial ``tmp`` folder
    (main process) and raise ``NoSpaceError`` when the disk, a quota or the file-size limit was the
    cause (any other error is re-raised as it is)."""
    _agreed_free_space(accelerator, output_dir, needed, what)
    try:
        yield
    except Exception as err:
        if accelerator.is_main_process:
            problem = space_error(err, output_dir, needed, what)
            remove_tree(tmp)
        else:
            problem = None
        if problem is not None:
            raise problem from err
        raise


def save_checkpoint(accelerator, model, output_dir: Path, step: int, trainer_state: dict,
                    inputs: TrainingInputs, optimizer=None) -> Path:
    """Write ``checkpoints/step_N`` atomically: Accelerate state (every process saves its own RNG
    state, ``state/random_states_<rank>.pkl``), exported model, then ``trainer_state.json``, all in
    ``checkpoints/.tmp_step_N``, renamed when complete. Call on every process; returns the folder.

    The free space is checked first against the size of the previous checkpoint (or the state's
    tensors of ``model`` and ``optimizer``); a checkpoint that does not fit, or whose writes fail
    for lack of space, raises ``NoSpaceError`` (one line) and leaves no partial folder behind; the
    previous checkpoints stay."""
    root = output_dir / "checkpoints"
    final = root / f"{CHECKPOINT_PREFIX}{step:07d}"
    tmp = root / f".tmp_{CHECKPOINT_PREFIX}{step:07d}"
    previous = checkpoint_dirs(output_dir)
    needed = expected_checkpoint_bytes(previous[-1] if previous else None, model, optimizer)
    with _space_guard(accelerator, tmp, output_dir, needed, f"checkpoint step {step}"):
        if accelerator.is_main_process:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        accelerator.wait_for_everyone()
        accelerator.save_state(str(tmp / "state"))
        accelerator.wait_for_everyone()  # every rank's RNG file is on disk before the folder is published
        export_model(accelerator, model, tmp / "model", inputs)
        if accelerator.is_main_process:
            _publish(tmp, final, trainer_state)
    accelerator.wait_for_everyone()
    return final


def publish_final(accelerator, model, output_dir: Path, trainer_state: dict, inputs: TrainingInputs) -> Path:
    """Export the final model to ``output_dir/final`` atomically (via ``.tmp_final``); every process.
    Like ``save_checkpoint``, checks the free space first (the model's tensors) and raises
    ``NoSpaceError`` without a partial folder when the export does not fit."""
    final, tmp = output_dir / "final", output_dir / ".tmp_final"
    needed = export_bytes(model)
    with _space_guard(accelerator, tmp, output_dir, needed, "the final model"):
        if accelerator.is_main_process:
            shutil.rmtree(tmp, ignore_errors=True)
        export_model(accelerator, model, tmp, inputs)
        if accelerator.is_main_process:
            _publish(tmp, final, trainer_state)
    accelerator.wait_for_everyone()
    return final
