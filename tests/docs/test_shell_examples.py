"""The shell examples of the README and docs/ run as written, on tiny data.

A ```` ```bash ```` block preceded by an HTML comment that starts with ``ci: run`` is run here (the
rules are on docs/install.md, "Shell examples that run in CI"). The comment lists what the test
changes, next to the block, for a reader to see:

* ``sub: OLD => NEW`` replaces the text OLD of the block by NEW (tiny scenes, two training steps);
  an OLD that is not in the block fails the test, so that a substitution cannot go stale;
* ``setup: NAME ...`` writes the block's inputs first, or starts what it talks to (``SETUPS``: ``rmvd``,
  ``captures``, ``wai``, ``hub``: a fake Hugging Face Hub on the loopback, ``tests/helpers/hub_server.py``).

The marked blocks of one file run in order, each in a fresh ``bash -euo pipefail``, in one temporary
folder per file (a later block reads what an earlier one wrote), with ``depthpe`` run as
``python -m depthpe`` from this checkout and nothing downloaded.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FILES = ("README.md", "docs/*.md")
MARKER = "<!-- ci: run"


@dataclass
class Block:
    """One marked bash block: where it is, its text, and what the test changes before running it."""

    path: Path
    line: int  # of the ```bash fence, 1-based
    code: str
    subs: list[tuple[str, str]] = field(default_factory=list)
    setups: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path}:{self.line}"


def _directives(lines: list[str], path: Path, start: int) -> tuple[list, list, int]:
    """The ``sub:`` and ``setup:`` lines of the marker comment opening at ``start`` -> (subs, setups,
    index of the line after ``-->``)."""
    subs, setups = [], []
    first = lines[start][len(MARKER):].strip()
    body, i = ([first] if first and first != "-->" else []), start + 1
    if first.endswith("-->"):
        body = [first[:-3].strip()] if first[:-3].strip() else []
    else:
        while i < len(lines) and not lines[i].strip().startswith("-->"):
            body.append(lines[i].strip())
            i += 1
        i += 1
    for text in filter(None, body):
        kind, _, rest = text.partition(":")
        if kind == "sub" and " => " in rest:
            old, new = rest.strip().split(" => ", 1)
            subs.append((old, new))
        elif kind == "setup" and rest.strip():
            setups.append(rest.split()[0])
        else:
            raise ValueError(f"{path}:{start + 1}: cannot read {text!r} in a ci marker (write 'sub: OLD => NEW' "
                             "or 'setup: NAME ...')")
    return subs, setups, i


def marked_blocks(path: Path) -> list[Block]:
    """The marked bash blocks of the markdown file ``path``, in order. A marker that is not followed
    (after blank lines) by a ```` ```bash ```` block is an error; markers inside code blocks are text."""
    lines = path.read_text().splitlines()
    blocks, i, fence = [], 0, None
    while i < len(lines):
        stripped = lines[i].strip()
        if fence:
            fence = None if stripped == fence else fence
        elif stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        elif stripped.startswith(MARKER):
            subs, setups, i = _directives(lines, path, i)
            while i < len(lines) and not lines[i].strip():
                i += 1
            if i >= len(lines) or lines[i].strip() != "```bash":
                raise ValueError(f"{path}:{i + 1}: a ci marker must be followed by a ```bash block")
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), len(lines))
            blocks.append(Block(path, i + 1, "\n".join(lines[i + 1:end]) + "\n", subs, setups))
            i = end
        i += 1
    return blocks


def script_of(block: Block) -> str:
    """The bash script the test runs for ``block``: the substitutions made, ``depthpe`` as a function."""
    code = block.code
    for old, new in block.subs:
        if old not in code:
            raise ValueError(f"{block.where}: the substitution {old!r} => ... matches nothing in the block; "
                             "update the marker to the block")
        code = code.replace(old, new)
    return 'set -euo pipefail\ndepthpe() { "$DEPTHPE_PYTHON" -m depthpe "$@"; }\n' + code


# ------------------------------------------------------------------ inputs that blocks start from
def _run(args: list[str], cwd: Path) -> None:
    subprocess.run([sys.executable, "-m", "depthpe", *args], cwd=cwd, env=_env(), check=True,
                   capture_output=True, timeout=120)


def _one_scene(folder: Path, scenes: int = 1) -> list[Path]:
    """``scenes`` synthetic scene files of 4 views, 56 x 56 px, written by ``depthpe synth``."""
    _run(["synth", "--out", str(folder), "--train-scenes", "0", "--val-scenes", str(scenes), "--views", "4",
          "--height", "56", "--width", "56", "--quiet"], folder.parent)
    return sorted((folder / "synth" / "val").glob("*.h5"))


def _setup_rmvd(folder: Path, stack) -> None:
    """A sample list in ``lists/`` and predictions (GT x 1.02) in ``preds/<setting>/`` of two settings."""
    from depthpe.testing.rmvd_samples import write_predictions, write_sample_list

    sample_list = write_sample_list(folder / "lists", "toy")
    for setting in ("known_poses", "intrinsics_only"):
        write_predictions(folder / "preds" / setting, sample_list, 1.02)


def _setup_captures(folder: Path, stack) -> None:
    """A synthetic scene as a capture with a COLMAP model: ``my_scene/{images,depth,sparse/0}``."""
    from depthpe.testing.captures import export_capture

    export_capture(_one_scene(folder / "_scene")[0], folder / "my_scene", cameras="colmap")


def _setup_wai(folder: Path, stack) -> None:
    """Three synthetic scenes as a WAI dataset in ``wai/eth3d/`` (two go to train, one to val)."""
    from depthpe.testing.transforms_captures import write_wai_scene

    for i, scene in enumerate(_one_scene(folder / "_scenes", 3)):
        write_wai_scene(folder / "wai" / "eth3d", scene, name=f"scene_{i}")


def _setup_hub(folder: Path, stack: contextlib.ExitStack) -> dict:
    """A fake Hub on 127.0.0.1 for the rest of the file's blocks: the environment that points at it."""
    from tests.helpers.hub_server import FakeHub

    return stack.enter_context(FakeHub()).env(home=str(folder / "_hf_home"))


# name -> function(folder, exit stack) that prepares a block; a dict it returns is added to the environment
SETUPS = {"rmvd": _setup_rmvd, "captures": _setup_captures, "wai": _setup_wai, "hub": _setup_hub}


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "DEPTHPE_PYTHON": sys.executable, "HF_HUB_OFFLINE": "1", "MPLBACKEND": "Agg",
            "OMP_NUM_THREADS": "1", "NO_MKDOCS_2_WARNING": "1"}


def run_block(block: Block, folder: Path, stack: contextlib.ExitStack) -> subprocess.CompletedProcess:
    """Prepare the block's inputs in ``folder`` (what a setup starts stays up until ``stack`` closes)
    and run its script there."""
    env = _env()
    for name in block.setups:
        if name not in SETUPS:
            raise ValueError(f"{block.where}: unknown setup {name!r} (known: {', '.join(SETUPS)})")
        env.update(SETUPS[name](folder, stack) or {})
    return subprocess.run(["bash", "-c", script_of(block)], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=300)


def _files_with_blocks() -> list[Path]:
    paths = sorted({p for pattern in FILES for p in ROOT.glob(pattern)})
    return [p for p in paths if MARKER in p.read_text() and marked_blocks(p)]


def _readme_headline_comes_from_compare(folder: Path) -> None:
    """The README quotes its headline ratio as what `depthpe compare` prints: the column is there."""
    header = next(line for line in (folder / "runs" / "compare" / "compare.md").read_text().splitlines()
                  if line.startswith("| group |"))
    assert "| native / global const. |" in header, header


# What a file's examples must have written, checked after its blocks ran.
AFTER = {"README.md": _readme_headline_comes_from_compare}


# ------------------------------------------------------------------------------------------- tests
@pytest.mark.slow  # trains, evaluates and predicts in fresh processes: about 50 s of CPU for all files
@pytest.mark.parametrize("path", _files_with_blocks(), ids=lambda p: str(p.relative_to(ROOT)))
def test_marked_shell_examples_run(path, tmp_path):
    with contextlib.ExitStack() as stack:
        for block in marked_blocks(path):
            result = run_block(block, tmp_path, stack)
            assert result.returncode == 0, (f"{block.where}: the example failed (exit {result.returncode}):\n"
                                            f"{script_of(block)}\n--- output ---\n{result.stdout[-3000:]}"
                                            f"{result.stderr[-3000:]}")
    check = AFTER.get(str(path.relative_to(ROOT)))
    if check is not None:
        check(tmp_path)


def test_the_readme_runs_one_example_of_each_cheap_workflow():
    commands = " ".join(b.code for b in marked_blocks(ROOT / "README.md"))
    for command in ("depthpe synth", "depthpe train", "depthpe eval", "depthpe compare", "depthpe rmvd",
                    "depthpe predict", "depthpe push"):
        assert command in commands, f"no marked README block runs {command}"


def test_markers_are_read_and_checked(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```markdown\n<!-- ci: run -->\n```\n\n<!-- ci: run\nsub: hello => hi there\n"
                    "setup: rmvd lists\n-->\n```bash\necho hello\n```\n\n<!-- ci: run -->\n\n```bash\necho 2\n```\n")
    first, second = marked_blocks(page)
    assert (first.subs, first.setups, first.line) == ([("hello", "hi there")], ["rmvd"], 11)
    assert script_of(first).endswith("echo hi there\n") and second.code == "echo 2\n"
    result = run_block(second, tmp_path, contextlib.ExitStack())
    assert result.returncode == 0 and result.stdout == "2\n"

    page.write_text("<!-- ci: run\nsub: gone => x\n-->\n```bash\necho hello\n```\n")
    with pytest.raises(ValueError, match="matches nothing"):
        script_of(marked_blocks(page)[0])
    page.write_text("<!-- ci: run -->\n```python\nprint(1)\n```\n")
    with pytest.raises(ValueError, match="must be followed by a ```bash block"):
        marked_blocks(page)
    page.write_text("<!-- ci: run -->\n```bash\nfalse\necho not reached\n```\n")
    result = run_block(marked_blocks(page)[0], tmp_path, contextlib.ExitStack())
    assert result.returncode != 0 and "not reached" not in result.stdout
