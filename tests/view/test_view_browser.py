"""`depthpe view` in a real browser (headless system Chromium through playwright): the canvas is
not blank, the point count the panel reports equals the points sent, and the confidence slider
changes it. Skipped, with the reason, where Chromium, playwright or viser is missing. Screenshots
are kept in test-artifacts/ (tests/helpers/browser.py)."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from tests.helpers.browser import (artifacts_dir, free_port, launch_or_skip, open_page, outside, pixel_std,
                                  start_depthpe_server, sync_playwright_or_skip)
from tests.helpers.view import expected_count

pytest.importorskip("viser", reason="the view extra (viser) is not installed: pip install 'depthpe[view]'")

COUNT = re.compile(r"points shown: (\d+) of (\d+)")


def start_view(argv: list[str], timeout: float = 120.0):
    """`depthpe view ARGV --port P` in a subprocess; returns (process, the URL it printed)."""
    return start_depthpe_server(["view", *argv, "--port", str(free_port())], timeout)


def reported(page) -> tuple[int, int]:
    """(shown, total) from the panel's 'points shown: N of M'."""
    shown, total = COUNT.search(page.get_by_text("points shown").first.inner_text()).groups()
    return int(shown), int(total)


def wait_for_count_change(page, before: tuple[int, int], timeout: float = 20.0) -> tuple[int, int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = reported(page)
        if now != before:
            return now
        time.sleep(0.2)
    return before


def canvas_std(page, name: str) -> float:
    """Grey-level std of the 3D canvas (screenshot saved as test-artifacts/NAME.png)."""
    png = page.locator("canvas").first.screenshot()
    page.screenshot(path=str(artifacts_dir() / f"{name}.png"))
    return pixel_std(png)


def open_viewer(browser, url):
    page, requests = open_page(browser, url, {"width": 1100, "height": 700})
    page.wait_for_selector("text=points shown", timeout=60_000)
    time.sleep(3)  # the first frames of the point cloud
    return page, requests


def test_viewer_of_a_prediction(pred_dir):
    proc, url = start_view([str(pred_dir)])
    try:
        with sync_playwright_or_skip() as p:
            browser = launch_or_skip(p)
            page, requests = open_viewer(browser, url)
            shown, total = reported(page)
            assert shown == total == expected_count(pred_dir)  # all pixels with depth, no threshold yet
            assert canvas_std(page, "view_prediction") > 5.0, "the 3D canvas is blank"
            slider = page.get_by_role("slider").first  # confidence
            slider.focus()
            page.keyboard.press("End")  # threshold = its top (the 99th percentile of confidence)
            after = wait_for_count_change(page, (shown, total))
            threshold = float(slider.get_attribute("aria-valuenow"))
            assert after[1] < total, f"the slider did not filter: {after}"
            assert after[0] == after[1] == expected_count(pred_dir, conf_threshold=threshold)
            page.screenshot(path=str(artifacts_dir() / "view_prediction_filtered.png"))
            assert not outside(requests, url), outside(requests, url)
            browser.close()
    finally:
        proc.kill()
        proc.wait()


def test_viewer_of_a_held_out_scene(saved_model, synth_root):
    proc, url = start_view(["--model", str(saved_model), "--data", str(synth_root), "--scene", "val_000000",
                            "--views", "3", "--image-width", "42", "--max-points", "1500"])
    try:
        with sync_playwright_or_skip() as p:
            browser = launch_or_skip(p)
            page, _ = open_viewer(browser, url)
            shown, total = reported(page)
            assert shown == 1500 and total > 1500  # GT and prediction side by side, subsampled to the budget
            assert "scene metrics" in page.inner_text("body") and "scene_aligned" in page.inner_text("body")
            assert canvas_std(page, "view_held_out_scene") > 5.0, "the 3D canvas is blank"
            browser.close()
    finally:
        proc.kill()
        proc.wait()
