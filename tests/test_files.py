"""depthpe.files: atomic writes (the bottom layer every writer of the package uses)."""

import subprocess
import sys

import pytest

from depthpe.files import atomic_target, atomic_write_bytes


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
