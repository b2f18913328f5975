"""docs/ builds as a site (mkdocs-material, ``mkdocs.yml`` at the repository root) with
``mkdocs build --strict``: a page of docs/ missing from ``nav``, a link to a file that is not there
or an ``#anchor`` that is no heading of its page fails the build, and so this test. The second test
shows, on a two-page site of its own with the repository's validation and markdown settings, that
the strict build does fail on each of those."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _mkdocs_build(config: Path, site: Path, cwd: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config`` into ``site`` (run in ``cwd``: snippet paths are relative to it)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_docs_build_strictly_as_a_site(tmp_path):
    result = _mkdocs_build(ROOT / "mkdocs.yml", tmp_path / "site", ROOT)
    assert result.returncode == 0, "mkdocs build --strict failed:\n" + result.stdout + result.stderr
    for page in (ROOT / "docs").glob("*.md"):
        name = "index.html" if page.stem == "index" else f"{page.stem}/index.html"
        assert (tmp_path / "site" / name).is_file(), f"docs/{page.name} was not built"
    install = (tmp_path / "site" / "install" / "index.html").read_text()
    assert "python -m pytest -n 2 --dist loadfile" in install  # the README's command, included as a snippet
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "from_pretrained" in api  # the reference is generated from the docstrings


def _repo_settings() -> dict:
    """The repository's ``validation`` and ``markdown_extensions`` settings (mkdocs.yml has python tags)."""
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    doc = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)
    extensions = [e for e in doc["markdown_extensions"] if not (isinstance(e, dict) and "toc" in e)]
    return {"validation": doc["validation"], "markdown_extensions": extensions + ["toc"]}


def test_the_strict_build_fails_on_broken_links_and_pages_missing_from_nav(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[gone](missing.md), [bad anchor](other.md#no-such-heading)\n")
    (docs / "other.md").write_text("# Other\n\n## A heading\n")
    (docs / "orphan.md").write_text("# Not in nav\n")
    config = {"site_name": "t", "docs_dir": "docs", "nav": ["index.md", "other.md"], **_repo_settings()}
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    result = _mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site", tmp_path)
    assert result.returncode != 0
    log = result.stdout + result.stderr
    for needle in ("missing.md", "no-such-heading", "orphan.md"):
        assert needle in log, (needle, log)
