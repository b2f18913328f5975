"""References between the repository's files stay valid.

The README, docs/, docstrings, help texts and YAML comments point at each other (``docs/data.md``,
``configs/quickstart.yaml``, ``depthpe/run/losses.py``, markdown links with anchors). These tests read
those files and check that

* every referenced repository path exists (a file for a name with an extension, a folder for a name
  ending in ``/``; ``*`` and ``{a,b}`` patterns must match something);
* every markdown link to a local file resolves, and its ``#anchor`` names a heading of that file;
* a bare ``NAME.md`` is a page of the repository (or a known output file such as ``summary.md``);
* nothing mentions the design notes or reference pages that live outside the repository: the
  repository must stand on its own.

User paths (``runs/...``, ``data/...``), external URLs and placeholders (``configs/NAME.yaml``,
``step_XXXXXXX``) are not checked. The checker functions take a root folder so that they can be
tested on a small tree of their own.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Files whose references are checked (relative glob patterns; configs/ may be a link into depthpe/).
SCANNED = ("README.md", "docs/**/*.md", "depthpe/**/*.py", "depthpe/**/*.yaml", "configs/**/*.yaml",
           "train/**/*.py", "eval/**/*.py", "setup.cfg", ".ci/run")
# Files that must not mention notes outside the repository (tests too, except this file).
SCANNED_FOR_OUTSIDE = SCANNED + ("tests/**/*.py",)

# Top-level folders of the repository: a path starting with one of them is a repository path.
REPO_DIRS = ("docs", "configs", "depthpe", "tests", "train", "eval", ".ci")
EXTENSIONS = (".py", ".md", ".yaml", ".yml", ".cfg", ".txt", ".toml", ".json")
PLACEHOLDERS = {"NAME", "DIR", "ROOT", "FILE", "PATH", "N", "OTHER"}
# Bare .md names that are files a command writes, not pages of this repository.
OUTPUT_MD_NAMES = {"README.md", "summary.md", "report.md", "compare.md"}  # files that commands write

_PATH = re.compile(r"(?<![\w./-])((?:%s)/(?:[\w./*-]|\{[\w.,-]*\})*)" % "|".join(re.escape(d) for d in REPO_DIRS))
_BARE_MD = re.compile(r"(?<![\w./-])([\w-]+\.md)\b")
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
# Written in pieces so that a search of the repository for these names does not list this file.
_OUTSIDE = re.compile("DESIGN" + r"\.md|\breference" + r"/[\w-]+\.md")


def scanned_files(root: Path, patterns=SCANNED) -> list[Path]:
    """The files matched by ``patterns`` under ``root`` (each once, caches and build output left out)."""
    seen, out = set(), []
    for pattern in patterns:
        for path in sorted(root.glob(pattern)):
            if not path.is_file() or "__pycache__" in path.parts or any(p.endswith(".egg-info") for p in path.parts):
                continue
            key = path.resolve()
            if key not in seen and path.name != Path(__file__).name:
                seen.add(key)
                out.append(path)
    return out


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _blank_code_blocks(text: str) -> str:
    """``text`` with fenced code blocks blanked out (same length, so positions and lines are kept)."""
    return _FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _slug(heading: str) -> str:
    """The anchor a markdown heading gets (GitHub's rule: lower case, punctuation dropped, spaces -> -)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The heading anchors of a markdown file (repeated headings get -1, -2, ... as on GitHub)."""
    counts: dict[str, int] = {}
    out = set()
    for match in re.finditer(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", _blank_code_blocks(path.read_text()), re.M):
        slug = _slug(match.group(1))
        n = counts.get(slug, 0)
        counts[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _expand_braces(pattern: str) -> list[str]:
    parts = re.split(r"(\{[^}]*\})", pattern)
    choices = [p[1:-1].split(",") if p.startswith("{") else [p] for p in parts]
    return ["".join(c) for c in itertools.product(*choices)]


def _is_placeholder(path: str) -> bool:
    stems = [Path(part).stem if "." in part else part for part in path.split("/")]
    return "..." in path or "XXX" in path or any(s in PLACEHOLDERS for s in stems)


def _path_problem(root: Path, ref: str) -> str | None:
    """Why the repository path ``ref`` (relative to ``root``) is broken, or None."""
    ref = ref.rstrip(".")
    if _is_placeholder(ref):
        return None
    is_dir = ref.endswith("/")
    if not is_dir and not ref.endswith(EXTENSIONS) and "*" not in ref:
        return None  # not a file name (e.g. "train/val" in prose)
    for candidate in _expand_braces(ref):
        if "*" in candidate:
            if not any(root.glob(candidate.rstrip("/"))):
                return f"no file matches {candidate}"
        elif is_dir and not (root / candidate).is_dir():
            return f"folder {candidate} does not exist"
        elif not is_dir and not (root / candidate).is_file():
            return f"file {candidate} does not exist"
    return None


def _link_problem(root: Path, source: Path, target: str) -> str | None:
    """Why the markdown link ``target`` in ``source`` is broken, or None (external links are not checked)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
        return None
    file_part, _, anchor = target.partition("#")
    dest = (source.parent / file_part).resolve() if file_part else source.resolve()
    if not dest.exists():
        return f"links to {file_part}, which does not exist"
    try:
        dest.relative_to(root.resolve())
    except ValueError:
        return f"links to {file_part}, outside the repository"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return f"links to #{anchor}, which is not a heading of {dest.relative_to(root.resolve())}"
    return None


def reference_problems(root: Path, files) -> list[str]:
    """``file:line: problem`` for every broken reference to a repository file in ``files``."""
    problems = []
    pages = {p.name for p in (root / "docs").glob("*.md")} | {p.name for p in root.glob("*.md")}
    for path in files:
        text = path.read_text(errors="replace")
        rel = path.relative_to(root)
        found, link_targets = [], set()
        if path.suffix == ".md":
            for m in _LINK.finditer(_blank_code_blocks(text)):
                link_targets.update(range(m.start(1), m.end(1)))
                found.append((m.start(1), _link_problem(root, path, m.group(1))))
        for m in _PATH.finditer(text):
            found.append((m.start(1), _path_problem(root, m.group(1))))
        for m in _BARE_MD.finditer(text):
            name = m.group(1)
            if m.start(1) in link_targets or _OUTSIDE.fullmatch(name):
                continue  # checked as a link / reported by test_nothing_points_outside_the_repository
            ok = name in pages or name in OUTPUT_MD_NAMES or (path.parent / name).is_file()
            found.append((m.start(1), None if ok else f"{name} is not a page of this repository"))
        problems += [f"{rel}:{_line(text, pos)}: {msg}" for pos, msg in found if msg]
    return problems


def outside_mentions(root: Path, files) -> list[str]:
    """``file:line: name`` for every mention of the design notes or reference pages kept elsewhere."""
    out = []
    for path in files:
        text = path.read_text(errors="replace")
        out += [f"{path.relative_to(root)}:{_line(text, m.start())}: {m.group(0)}" for m in _OUTSIDE.finditer(text)]
    return out


# ------------------------------------------------------------------------------------------- tests
def test_referenced_repository_paths_exist():
    problems = reference_problems(ROOT, scanned_files(ROOT))
    assert not problems, "broken references to repository files:\n" + "\n".join(problems)


def test_nothing_points_outside_the_repository():
    mentions = outside_mentions(ROOT, scanned_files(ROOT, SCANNED_FOR_OUTSIDE))
    assert not mentions, ("these files point at notes that are not part of the repository; point at the "
                          "docs/ page that holds the fact instead:\n" + "\n".join(mentions))


def test_the_checker_finds_broken_references(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "quickstart.yaml").write_text("seed: 0\n")
    (tmp_path / "docs" / "data.md").write_text("# Data\n\n## Checking data\n\n```bash\n# not a heading\n```\n")
    good = ("# Index\n\n[data](data.md), [checks](data.md#checking-data), [up](../README.md),\n"
            "`configs/quickstart.yaml`, `configs/NAME.yaml`, `runs/quickstart/final`, https://example.org/x.md,\n"
            "```bash\ndepthpe eval --model runs/NAME/final --data data/synth/val\n```\n")
    (tmp_path / "README.md").write_text("# Top\n")
    (tmp_path / "docs" / "index.md").write_text(good)
    files = [tmp_path / "docs" / "index.md", tmp_path / "docs" / "data.md"]
    assert reference_problems(tmp_path, files) == []

    (tmp_path / "docs" / "index.md").write_text(
        good + "[gone](missing.md)\n[bad anchor](data.md#not-a-heading)\n`configs/nope.yaml`\n"
        "see vggt.md\n`depthpe/run/`\n")
    problems = reference_problems(tmp_path, files)
    assert len(problems) == 5, problems
    for needle in ("missing.md", "#not-a-heading", "configs/nope.yaml", "vggt.md", "depthpe/run"):
        assert any(needle in p for p in problems), (needle, problems)

    (tmp_path / "docs" / "data.md").write_text("# Data\nsee " + "DESIGN" + ".md and " + "reference" + "/vggt.md\n")
    assert len(outside_mentions(tmp_path, files)) == 2
