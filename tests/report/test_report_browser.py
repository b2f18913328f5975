"""report.html in a real browser (headless system Chromium via playwright), opened from disk:
the tables render, no image is broken, nothing is requested from a network, and a header click
sorts the per-scene table. Skipped, with the reason, without Chromium or playwright. Screenshots
are kept in test-artifacts/."""

from __future__ import annotations

from urllib.parse import urlsplit

from tests.helpers.browser import artifacts_dir, launch_or_skip, sync_playwright_or_skip
from depthpe.cli import main
from tests.fixtures.evaluation import WORST
from tests.helpers.compare import SEEDS

BROKEN_IMAGES = "Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0).length"


def open_page(browser, path):
    """(page, requests that left the local disk) for ``path`` opened as file://."""
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    remote = []
    page.on("request", lambda r: remote.append(r.url) if urlsplit(r.url).scheme not in ("file", "data") else None)
    page.goto(path.resolve().as_uri())
    page.wait_for_load_state("load")
    return page, remote


def test_eval_report_renders_offline(eval_dir):
    with sync_playwright_or_skip() as p:
        browser = launch_or_skip(p)
        page, remote = open_page(browser, eval_dir / "report.html")
        assert page.locator("#metrics-table tbody tr").count() == 5
        assert page.locator("figure.worst img").count() == WORST
        assert page.evaluate("document.images.length") == WORST + 1
        assert page.evaluate(BROKEN_IMAGES) == 0
        assert page.locator("figure.worst img").first.bounding_box()["width"] > 100  # drawn, not a 0-px box
        first = lambda: page.locator("#scene-table tbody tr").first.inner_text()  # noqa: E731
        before = first()
        page.locator("#scene-table th", has_text="abs_rel").first.click()  # sort: largest first
        page.locator("#scene-table th", has_text="abs_rel").first.click()  # then smallest first
        assert first() != before
        page.screenshot(path=str(artifacts_dir() / "eval_report.png"), full_page=True)
        assert remote == []
        browser.close()


def test_compare_report_renders_offline(study, tmp_path):
    _, numbers = study
    out = tmp_path / "cmp"
    assert main(["compare", *[str(numbers[(pe, s)]["eval"]) for pe in ("rope", "prope") for s in SEEDS],
                 "--bootstrap", "200", "--out", str(out)]) == 0
    with sync_playwright_or_skip() as p:
        browser = launch_or_skip(p)
        page, remote = open_page(browser, out / "report.html")
        assert page.locator("table.compare-table tbody tr").count() == 2
        assert page.evaluate(BROKEN_IMAGES) == 0
        page.screenshot(path=str(artifacts_dir() / "compare_report.png"), full_page=True)
        assert remote == []
        browser.close()
