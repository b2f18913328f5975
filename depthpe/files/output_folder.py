"""The one owner of a command's output folder: every depthpe command that writes a folder goes
through ``claim_output_folder`` (docs/outputs.md).

The owner, in this order and before the command writes anything:

1. takes the folder's kernel lock (``depthpe.files.lock_folder``; a second writer, of any command,
   is refused while the first runs);
2. reads the manifest ``OUT/.depthpe-owner.json`` (``MANIFEST``: the command, the fingerprint of
   every input that changes the numbers, the files the command wrote) and refuses a folder that
   holds another command's outputs, or files no depthpe command recorded, unless the command's
   replace flag (``--overwrite``, ``--restart``) is given;
3. ``OutputFolder.begin(fingerprint)``: refuses the outputs of the same command made with another
   fingerprint unless replacing; when replacing, deletes the files the manifest lists as this
   command's own (never a file it did not write); then writes the manifest.

When the command ends (in any way), the files that appeared or changed in the folder since the claim
are added to the manifest's list; a command that wrote nothing leaves no manifest. A holder killed
before that (SIGKILL, power loss) leaves its manifest marked ``running``: the next owner counts the
files changed after that run started as the dead run's own (nothing else could write there while it
held the lock). Written by hand: no library keeps a per-folder record of which program wrote which
file. Bottom layer: standard library (and ``filelock`` through ``depthpe.files``) only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import time
from pathlib import Path
from typing import Callable, Iterator

from ..config import ConfigError
from .atomic import atomic_write_bytes
from .locks import LOCK_FILE, FolderInUse, LocksUnsupported, lock_folder
from .records import read_record

__all__ = ["MANIFEST", "OutputFolder", "claim_output_folder", "owned_output_folder", "register_shard", "settings_fingerprint", "folder_owner",
           "simple_difference"]

MANIFEST = ".depthpe-owner.json"
_INTERNAL = {LOCK_FILE, ".lock.owner", MANIFEST}  # the lock, training's holder record, the manifest
# Options that never change a command's numbers or outputs: left out of a settings fingerprint.
_NOT_SETTINGS = ("out", "progress", "quiet", "overwrite", "restart", "workers", "num_workers", "debug")


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    """{path relative to ``folder`` (POSIX): (size, mtime ns)} of every file under it but the owner's
    own (lock, manifest)."""
    found = {}
    for root, _dirs, names in os.walk(folder):
        for name in names:
            path = Path(root) / name
            rel = path.relative_to(folder).as_posix()
            if rel in _INTERNAL:
                continue
            try:
                st = path.stat()
            except OSError:
                continue
            found[rel] = (st.st_size, st.st_mtime_ns)
    return found


def folder_owner(folder: str | os.PathLike) -> dict | None:
    """The manifest of ``folder`` ({command, fingerprint, files, state, started_ns, ...}), None when
    there is none, {} when it is unreadable (``depthpe.files.read_record``)."""
    return read_record(Path(folder) / MANIFEST)


def simple_difference(old: dict, new: dict) -> str | None:
    """The first entry of two fingerprints that differs, as words ("views was 8, now 2"), or None."""
    for key in [*new, *(k for k in old if k not in new)]:
        if old.get(key) != new.get(key):
            return f"{key} was {old.get(key)!r}, now {new.get(key)!r}"
    return None


def settings_fingerprint(cfg, leave_out: tuple[str, ...] = (), **extra) -> dict:
    """A command's settings as a fingerprint: the fields of the dataclass ``cfg`` (or the attributes of
    an ``argparse.Namespace``) but those that never
    change its numbers (``out``, ``progress``, ``workers``, ``overwrite``, ... and ``leave_out``),
    each string (or string in a list) that names an existing path replaced by its resolved absolute
    path (so ``./a`` and ``a`` agree), plus ``extra`` entries."""
    def resolved(value):
        if isinstance(value, (list, tuple)):
            return [resolved(v) for v in value]
        if isinstance(value, str) and value and os.path.exists(value):
            return str(Path(value).resolve())
        return value

    skip = set(_NOT_SETTINGS) | set(leave_out)
    names = [f.name for f in dataclasses.fields(cfg)] if dataclasses.is_dataclass(cfg) else sorted(vars(cfg))
    doc = {name: resolved(getattr(cfg, name)) for name in names if name not in skip and not callable(getattr(cfg, name))}
    return json.loads(json.dumps({**doc, **extra}, default=str))


@dataclasses.dataclass
class OutputFolder:
    """A claimed output folder (``claim_output_folder``). ``begin(fingerprint)`` before the first
    write; ``remove_own(under)`` deletes files this command wrote (listed), e.g. a stale subfolder."""

    path: Path
    command: str
    label: str
    replace: bool
    replace_flag: str
    difference: Callable[[dict, dict], str | None]
    previous: dict | None  # the manifest found (None: none)
    own: set[str]  # files this command wrote here (its manifest's list, the dead holder's files)
    before: dict[str, tuple[int, int]]  # the folder's files at the claim
    fingerprint: dict | None = None
    detached: bool = False  # a shard's claim: finish() leaves the manifest as begin() wrote it

    def begin(self, fingerprint: dict) -> None:
        """Check ``fingerprint`` against the outputs of this command in the folder: another one is
        refused (one ``ConfigError`` line naming the first difference) unless ``replace``, in which
        case this command's listed files are deleted; then write the manifest (state ``running``)."""
        old = (self.previous or {}).get("fingerprint") if self._same_command() else None
        if old is not None and old != fingerprint:
            if not self.replace:
                difference = self.difference(old, fingerprint) or "the settings changed"
                raise ConfigError(f"{self.label} {self.path} holds the outputs of {self.command} made with other "
                                  f"settings: {difference}; rerun with the same settings, choose another "
                                  f"{self.label}, or pass {self.replace_flag} to replace them")
            self.remove_own()
        elif self.replace and self._same_command():
            self.remove_own()
        self.fingerprint = json.loads(json.dumps(fingerprint, default=str))
        self._write("running")

    def remove_own(self, under: str | None = None) -> int:
        """Delete the files this command wrote here (the manifest's list), all or those under the
        subfolder ``under``; folders left empty go too. Returns how many files were deleted."""
        prefix = None if under is None else Path(under).as_posix().rstrip("/") + "/"
        gone = sorted(rel for rel in self.own if prefix is None or rel.startswith(prefix))
        for rel in gone:
            target = self.path / rel
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
            self._remove_empty_parents(target.parent)
            self.own.discard(rel)
            self.before.pop(rel, None)
        return len(gone)

    def _remove_empty_parents(self, folder: Path) -> None:
        while folder != self.path and self.path in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent

    def finish(self, state: str) -> None:
        """Record the files written since the claim as this command's own and the final ``state``
        (``complete``, ``interrupted``); no manifest at all when this command owns no file here."""
        if self.fingerprint is None or self.detached:
            return
        now = _files(self.path)
        self.own = {rel for rel in self.own if rel in now}
        self.own |= {rel for rel, stamp in now.items() if self.before.get(rel) != stamp}
        if not self.own:
            (self.path / MANIFEST).unlink(missing_ok=True)
            return
        self._write(state)

    def _same_command(self) -> bool:
        return bool(self.previous) and self.previous.get("command") == self.command

    def _write(self, state: str) -> None:
        """Write the manifest atomically. ``started_ns`` is the file system's clock at the first write
        (the manifest's own modification time, not ``time.time_ns``, whose finer clock can run ahead
        of the coarse one file times are stamped with), so every file written later is newer."""
        doc = {"command": self.command, "fingerprint": self.fingerprint, "state": state,
               "started_ns": getattr(self, "_started", None), "host": socket.gethostname(),
               "pid": os.getpid(), "files": sorted(self.own)}
        path = atomic_write_bytes(self.path / MANIFEST, json.dumps(doc, indent=1).encode())
        if doc["started_ns"] is None:
            self._started = doc["started_ns"] = path.stat().st_mtime_ns
            atomic_write_bytes(path, json.dumps(doc, indent=1).encode())


def _lock(path: Path, label: str):
    """The held lock of ``path`` (None where the filesystem has no locks); one line when it is in use."""
    try:
        return lock_folder(path)
    except FolderInUse:
        owner = folder_owner(path) or {}
        who = (f"{owner['command']} (pid {owner.get('pid')} on {owner.get('host')})" if owner.get("command") and owner.get("state") == "running"
               else "another depthpe command or a training run")
        raise ConfigError(f"{label} {path} is in use by {who}; wait for it to finish, or choose another {label}") from None
    except LocksUnsupported:
        return None  # a filesystem without locks: written unguarded, as training does


def _own_files(previous: dict | None, command: str, present: dict[str, tuple[int, int]]) -> set[str]:
    """The files of ``present`` that ``command`` wrote, by the manifest ``previous``: its list, and
    for a holder that died while running, every file changed after it started."""
    if not previous or previous.get("command") != command:
        return set()
    own = {rel for rel in previous.get("files", []) if isinstance(rel, str) and rel in present}
    started = previous.get("started_ns")
    if previous.get("state") == "running" and isinstance(started, int):
        own |= {rel for rel, (_size, mtime) in present.items() if mtime >= started}
    return own


def _refusal(path: Path, command: str, previous: dict | None, present: dict, label: str, flag: str) -> str | None:
    """Why ``command`` may not write into ``path`` without ``flag``: another command's outputs, an
    unreadable manifest, or files that no depthpe command recorded; else None."""
    if previous == {}:
        return (f"{label} {path}: its {MANIFEST} is unreadable, so depthpe cannot tell which files are whose; "
                f"choose another {label}, or pass {flag} to write into it anyway")
    if previous and previous.get("command") != command:
        return (f"{label} {path} holds the outputs of {previous.get('command')}, not of {command}; choose another "
                f"{label}, or pass {flag} to write into it anyway (their files are kept)")
    if previous is None and present:
        example = sorted(present)[0]
        return (f"{label} {path} already holds {len(present)} file(s) that no depthpe command recorded as its "
                f"outputs (e.g. {example}); choose an empty or new {label}, or pass {flag} to write into it anyway "
                "(those files are kept)")
    return None


@contextlib.contextmanager
def claim_output_folder(path: str | os.PathLike, command: str, *, replace: bool = False,
                        replace_flag: str = "--overwrite", label: str = "--out",
                        difference: Callable[[dict, dict], str | None] = simple_difference) -> Iterator[OutputFolder]:
    """Own ``path`` for ``command`` (e.g. ``"depthpe eval"``) while the block runs (module docstring):
    lock it, refuse another command's folder or unrecorded files unless ``replace`` (the command's
    ``replace_flag``, named in the error), yield an ``OutputFolder`` whose ``begin(fingerprint)`` the
    command calls before its first write, and record the files it wrote when the block ends.
    ``label``: how errors name the folder; ``difference(old, new)``: words for the first fingerprint
    entry that differs. Every refusal is one ``ConfigError`` line, raised before anything is written."""
    path = Path(path)
    created, new_lock = not path.exists(), not (path / LOCK_FILE).exists()
    lock = _lock(path, label)
    try:
        previous = folder_owner(path)
        present = _files(path)
        problem = _refusal(path, command, previous, present, label, replace_flag)
        if problem and not replace:
            if new_lock:  # a refused folder is left exactly as it was
                (path / LOCK_FILE).unlink(missing_ok=True)
            raise ConfigError(problem)
        folder = OutputFolder(path, command, label, replace, replace_flag, difference, previous,
                              _own_files(previous, command, present), present)
        try:
            yield folder
        except BaseException:
            folder.finish("interrupted")
            raise
        folder.finish("complete")
    finally:
        if created:
            _remove_if_unused(path)
        if lock is not None:
            lock.release()


def _remove_if_unused(path: Path) -> None:
    """Remove the folder the claim created when nothing but the lock is in it (a command refused or
    failed before its first write leaves no trace); the lock file goes while it is still held."""
    try:
        if {p.name for p in path.iterdir()} <= {LOCK_FILE}:
            (path / LOCK_FILE).unlink(missing_ok=True)
            path.rmdir()
    except OSError:
        pass


@contextlib.contextmanager
def owned_output_folder(path: str | os.PathLike, command: str, fingerprint: dict, *, replace: bool = False,
                        replace_flag: str = "--overwrite", label: str = "--out") -> Iterator[OutputFolder]:
    """``claim_output_folder`` and ``begin(fingerprint)`` at once, for a command whose fingerprint is
    known before it starts (its settings, ``settings_fingerprint``) and that does not resume."""
    with claim_output_folder(path, command, replace=replace, replace_flag=replace_flag, label=label) as folder:
        folder.begin(fingerprint)
        yield folder


def register_shard(path: str | os.PathLike, command: str, fingerprint: dict, *, replace: bool = False,
                   replace_flag: str = "--overwrite", label: str = "--out", wait_s: float = 60.0) -> None:
    """For one of several processes that write disjoint files of one folder at the same time
    (``depthpe convert --shard K/N`` in an array job): the owner's checks under the folder's lock, held
    only for this call (waiting up to ``wait_s`` seconds while another shard holds it), then the lock is
    released and the shard writes unlocked. The first shard writes the manifest (state ``running``);
    the others check theirs against it without rewriting it, so the files every shard writes after
    that start count as the command's own (the dead-holder rule of ``claim_output_folder``) until a
    run without shards finishes the folder. Refusals as ``claim_output_folder``'s."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with claim_output_folder(path, command, replace=replace, replace_flag=replace_flag, label=label) as folder:
                folder.detached = True
                previous = folder.previous or {}
                if not (previous.get("command") == command and previous.get("fingerprint") == fingerprint
                        and previous.get("state") == "running"):
                    folder.begin(fingerprint)
            return
        except ConfigError as err:
            if " is in use by " not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
