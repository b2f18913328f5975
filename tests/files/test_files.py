"""depthpe.files: atomic writes (the bottom layer every writer of the package uses) and the folder
lock (which errors of the kernel lock mean "locks do not work here" and which "in use")."""

import errno
import fcntl
import subprocess
import sys

import filelock
import pytest

from depthpe.files import FolderInUse, LocksUnsupported, atomic_target, atomic_write_bytes, lock_folder


def test_atomic_write_replaces_the_file_and_creates_its_folder(tmp_path):
    path = tmp_path / "a" / "b" / "doc.json"
    assert atomic_write_bytes(path, b"one") == path
    atomic_write_bytes(str(path), b"two")
    assert path.read_bytes() == b"two" and [p.name for p in path.parent.iterdir()] == ["doc.json"]


def test_an_interrupted_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "doc.json"
    path.write_bytes(b"old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_target(path) as tmp:
            with open(tmp, "wb") as f:
                f.write(b"half")
            raise KeyboardInterrupt
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["doc.json"]


def test_the_module_imports_neither_torch_nor_h5py():
    code = "import sys, depthpe.files; print(sorted({'torch', 'h5py', 'numpy'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _acquire_raises(monkeypatch, error: BaseException) -> None:
    """Every ``filelock.FileLock.acquire`` raises ``error`` (lock_folder takes FileLock from filelock)."""

    class Refusing(filelock.FileLock):
        def acquire(self, *args, **kwargs):
            raise error

    monkeypatch.setattr(filelock, "FileLock", Refusing)


@pytest.mark.parametrize("code", [errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP])
def test_a_filesystem_refusing_locks_is_locks_unsupported(tmp_path, monkeypatch, code):
    _acquire_raises(monkeypatch, OSError(code, "refused"))
    with pytest.raises(LocksUnsupported) as err:
        lock_folder(tmp_path / "run")
    assert err.value.__cause__.errno == code and "refused" in str(err.value)


@pytest.mark.parametrize("code", [errno.EACCES, errno.EROFS, errno.EIO])
def test_other_os_errors_of_the_lock_propagate_as_they_are(tmp_path, monkeypatch, code):
    error = OSError(code, "other")
    _acquire_raises(monkeypatch, error)
    with pytest.raises(OSError) as err:
        lock_folder(tmp_path / "run")
    assert err.value is error and not isinstance(err.value, LocksUnsupported)


def test_a_held_lock_is_folder_in_use(tmp_path, monkeypatch):
    _acquire_raises(monkeypatch, filelock.Timeout(str(tmp_path / "run" / ".lock")))
    with pytest.raises(FolderInUse, match="run"):
        lock_folder(tmp_path / "run")


@pytest.mark.parametrize("code,expected", [(errno.ENOLCK, LocksUnsupported), (errno.EOPNOTSUPP, LocksUnsupported),
                                           (errno.EAGAIN, FolderInUse)])
def test_flock_errors_through_the_installed_filelock(tmp_path, monkeypatch, code, expected):
    """The kernel's answers as filelock passes them on: ENOLCK / EOPNOTSUPP (NFS without a lock
    manager) mean no locks, EAGAIN means another process holds the lock."""
    real = fcntl.flock

    def flock(fd, operation):
        if operation & fcntl.LOCK_EX:
            raise OSError(code, "flock")
        return real(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    with pytest.raises(expected):
        lock_folder(tmp_path / "run")
    monkeypatch.undo()
    lock_folder(tmp_path / "run").release()  # and nothing was left held
