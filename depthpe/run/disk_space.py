"""Disk space for checkpoints and the final export: an estimate before writing, a one-line error after.

A checkpoint that does not fit is refused before anything is written (``check_free_space``), and a
write that still fails because the disk filled up, a quota was reached or the process hit its
file-size limit (``ulimit -f``) is turned into a ``NoSpaceError`` with one line that names the
folder, the checkpoint and the size it needs (``space_error``). The writers report these failures
in three ways: ``OSError`` with errno ENOSPC / EDQUOT / EFBIG (Python's own writes), a
``SafetensorError`` whose text ends in ``(os error 28)`` (safetensors) and a ``RuntimeError`` of
``torch.save`` that carries no errno at all (``unexpected pos ...``, ``file write failed``); for the
last the folder's free space and the process's file-size limit tell what happened.

The standard library has the pieces (``shutil.disk_usage``, ``resource.getrlimit``); nothing puts
them together for a set of tensors about to be written, hence this module.
"""

from __future__ import annotations

import errno
import re
import shutil
from pathlib import Path

import torch

__all__ = ["NoSpaceError", "folder_bytes", "export_bytes", "state_bytes", "expected_checkpoint_bytes", "check_free_space",
           "space_error", "format_bytes"]

_SPACE_ERRNOS = {errno.ENOSPC: "space", errno.EDQUOT: "quota", errno.EFBIG: "file size"}
_OS_ERROR_CODE = re.compile(r"os error (\d+)")


class NoSpaceError(OSError):
    """A checkpoint or export did not fit (disk full, quota, file-size limit); ``str`` is one line."""


def format_bytes(n: float) -> str:
    """``n`` bytes as "1.2 TB" / "35 MB" / "12 kB" (decimal units, two significant digits) or, below
    1 kB, "999 B". Rounded before the unit is picked, so 999 999 bytes are "1 MB", not "1e+03 kB"."""
    if n < 1e3:
        return f"{int(n)} B"
    n = float(f"{n:.2g}")
    unit, size = next((u, s) for u, s in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)) if n >= s)
    return f"{n / size:.2g} {unit}"


def folder_bytes(folder: Path) -> int:
    """Total size in bytes of the files under ``folder`` (0 when it does not exist)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file()) if Path(folder).is_dir() else 0


def _tensor_bytes(tensors) -> int:
    """Bytes of the tensors among ``tensors`` (numel x element size: the global size of a sharded one)."""
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def export_bytes(model: torch.nn.Module) -> int:
    """Bytes of an exported model: the tensors of ``model``'s state dict."""
    return _tensor_bytes(model.state_dict().values())


def state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None) -> int:
    """Bytes a checkpoint of ``model`` and ``optimizer`` writes: the model's state dict twice (in
    Accelerate's ``state/`` and the exported ``model/``) plus every tensor of the optimizer's state
    (AdamW: two moments per parameter). RNG states and JSON files are small and left out."""
    total = 2 * export_bytes(model)
    if optimizer is not None:
        total += _tensor_bytes(v for s in optimizer.state.values() for v in s.values())
    return total


def expected_checkpoint_bytes(previous: Path | None, model: torch.nn.Module,
                              optimizer: torch.optim.Optimizer | None = None) -> int:
    """The size of the next checkpoint: that of the ``previous`` one when there is one (exact),
    else ``state_bytes`` of the model and optimizer."""
    size = folder_bytes(previous) if previous is not None else 0
    return size or state_bytes(model, optimizer)


def check_free_space(directory: Path, needed: int, what: str) -> None:
    """Raise ``NoSpaceError`` unless the file system of ``directory`` (or of its nearest existing
    parent) has ``needed`` bytes free; ``what`` names the write ("checkpoint step 40")."""
    existing = next(p for p in (Path(directory), *Path(directory).parents) if p.exists())
    free = shutil.disk_usage(existing).free
    if free < needed:
        raise NoSpaceError(f"no space left on {directory} for {what} (needs about {format_bytes(needed)}, "
                           f"{format_bytes(free)} free); free some space or lower train.keep_checkpoints, "
                           "then continue with --resume latest")


def _reason(err: BaseException, directory: Path, needed: int) -> str | None:
    """"space", "quota" or "file size" when ``err`` (a failed write into ``directory``) came from
    one of them, else None."""
    code = getattr(err, "errno", None)
    match = _OS_ERROR_CODE.search(str(err))
    code = code if code in _SPACE_ERRNOS else int(match.group(1)) if match else None
    if code in _SPACE_ERRNOS:
        return _SPACE_ERRNOS[code]
    if not isinstance(err, RuntimeError):  # only torch.save's errors come without an errno
        return None
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if limit != resource.RLIM_INFINITY and limit < needed:
            return "file size"
    except (ImportError, OSError, ValueError):  # no resource module (Windows)
        pass
    return "space" if shutil.disk_usage(directory).free < needed else None


def space_error(err: BaseException, directory: Path, needed: int, what: str) -> NoSpaceError | None:
    """The ``NoSpaceError`` to raise for ``err``, a failed write of ``what`` into ``directory``
    (``needed``: the bytes it needs), or None when ``err`` is not about space."""
    reason = _reason(err, directory, needed)
    if reason is None:
        return None
    size = f"needs about {format_bytes(needed)}"
    if reason == "file size":
        return NoSpaceError(f"the file-size limit of this process (ulimit -f) was reached on {directory} while "
                            f"writing {what} ({size}); raise the limit, then continue with --resume latest")
    where = "no space left" if reason == "space" else "disk quota exceeded"
    return NoSpaceError(f"{where} on {directory} while writing {what} ({size}); free some space or lower "
                        "train.keep_checkpoints, then continue with --resume latest")
